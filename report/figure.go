package report

import (
	"fmt"
	"image/color"
	"math"
	"os"
	"strconv"
	"strings"

	xfont "golang.org/x/image/font"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// The geometry of the PNGs: every chart has the same width, so that text has
// the same size across the page's grid, and is drawn at twice the usual
// resolution for sharp text on high-density screens.
const (
	dpi         = 192
	figWidth    = 6.4 * vg.Inch
	panelHeight = 3.0 * vg.Inch
	figPad      = 8  // points around the figure
	tilePadX    = 14 // points between columns of panels
	tilePadY    = 10 // points between rows of panels
)

var (
	inkColor   = color.NRGBA{0x22, 0x22, 0x22, 0xff}
	mutedColor = color.NRGBA{0x66, 0x66, 0x66, 0xff}
	axisColor  = color.NRGBA{0xaa, 0xaa, 0xaa, 0xff}
	gridColor  = color.NRGBA{0xe4, 0xe4, 0xe4, 0xff}
	keyColor   = color.NRGBA{0x55, 0x55, 0x55, 0xff} // style-only legend entries
)

// sans returns a Liberation Sans text style.
func sans(size vg.Length, bold bool, c color.Color) text.Style {
	f := font.Font{Typeface: "Liberation", Variant: "Sans"}
	if bold {
		f.Weight = xfont.WeightBold
	}
	return text.Style{Color: c, Font: font.From(f, size), Handler: plot.DefaultTextHandler}
}

// figure is one PNG: a title, a grid of panels and a legend below them.
type figure struct {
	title  string
	panels []*plot.Plot // row-major; nil leaves a tile empty
	cols   int
	legend []legendEntry
	// width is the figure's width, 0 meaning figWidth; panelH is the height
	// of a row of panels, 0 meaning panelHeight.
	width, panelH vg.Length
}

type legendEntry struct {
	label string
	thumb plot.Thumbnailer
}

// newPanel returns a plot styled for the report, with a step x axis.
func newPanel(title, ylabel string, yfmt tickFormat) *plot.Plot {
	p := plot.New()
	p.BackgroundColor = color.Transparent
	p.Title.Text = title
	p.Title.TextStyle = sans(11.5, true, inkColor)
	p.Title.TextStyle.XAlign = draw.XCenter
	p.Title.TextStyle.YAlign = draw.YTop
	p.Title.Padding = vg.Points(4)
	for _, a := range []*plot.Axis{&p.X, &p.Y} {
		a.LineStyle = draw.LineStyle{Color: axisColor, Width: vg.Points(0.6)}
		a.Tick.LineStyle = draw.LineStyle{Color: axisColor, Width: vg.Points(0.6)}
		a.Tick.Length = vg.Points(3)
		a.Padding = vg.Points(2)
		xa, ya := a.Tick.Label.XAlign, a.Tick.Label.YAlign
		a.Tick.Label = sans(10, false, mutedColor)
		a.Tick.Label.XAlign, a.Tick.Label.YAlign = xa, ya
		a.Label.TextStyle = sans(10.5, false, inkColor)
		a.Label.TextStyle.XAlign = draw.XCenter
		a.Label.TextStyle.YAlign = draw.YBottom
		a.Label.Padding = vg.Points(3)
	}
	p.X.Label.Text = "step"
	p.X.Tick.Marker = ticker{format: plainTicks}
	p.Y.Label.Text = ylabel
	p.Y.Tick.Marker = ticker{format: yfmt}
	grid := plotter.NewGrid()
	grid.Vertical = draw.LineStyle{Color: gridColor, Width: vg.Points(0.5)}
	grid.Horizontal = grid.Vertical
	p.Add(grid)
	return p
}

// setRange sets an axis to [lo, hi] widened to round tick values.
func setRange(a *plot.Axis, lo, hi float64) {
	if math.IsNaN(lo) || math.IsNaN(hi) || math.IsInf(lo, 0) || math.IsInf(hi, 0) {
		lo, hi = 0, 1
	}
	if lo > hi {
		lo, hi = hi, lo
	}
	if hi-lo <= 1e-12*math.Max(math.Abs(lo), math.Abs(hi)) {
		// A constant: centred, or from 0 up when it is 0.
		if d := math.Abs(lo) * 0.1; d == 0 {
			hi = lo + 1
		} else {
			lo, hi = lo-d, hi+d
		}
	}
	step := niceStep(hi-lo, 5)
	if math.IsInf(step, 0) || math.IsNaN(step) { // beyond float64: no rounding
		a.Min, a.Max = lo, hi
		return
	}
	a.Min = math.Floor(lo/step+1e-9) * step
	a.Max = math.Ceil(hi/step-1e-9) * step
	if a.Max <= a.Min {
		a.Max = a.Min + step
	}
}

// niceStep returns a round step (1, 2 or 5 times a power of ten) that cuts
// span into about n intervals.
func niceStep(span float64, n int) float64 {
	raw := span / float64(n)
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	switch f := raw / mag; {
	case f < 1.5:
		return mag
	case f < 3.5:
		return 2 * mag
	case f < 7.5:
		return 5 * mag
	}
	return 10 * mag
}

// tickFormat is how tick labels show values.
type tickFormat int

const (
	plainTicks   tickFormat = iota
	percentTicks            // fractions in [0, 1] as percentages
)

// ticker puts labelled ticks at round values.
type ticker struct{ format tickFormat }

// Ticks implements plot.Ticker.
func (t ticker) Ticks(lo, hi float64) []plot.Tick {
	if !(hi > lo) || math.IsInf(hi-lo, 0) {
		return nil
	}
	step := niceStep(hi-lo, 5)
	first := math.Ceil(lo/step - 1e-9)
	var ticks []plot.Tick
	for i := first; i*step <= hi+step*1e-9 && len(ticks) < 50; i++ {
		v := i * step
		ticks = append(ticks, plot.Tick{Value: v, Label: formatTick(v, step, math.Max(math.Abs(lo), math.Abs(hi)), t.format)})
	}
	return ticks
}

// formatTick writes v, one of the ticks step apart on an axis reaching
// magnitude mag, with as many digits as the step needs.
func formatTick(v, step, mag float64, f tickFormat) string {
	if math.Abs(v) < step*1e-6 {
		v = 0
	}
	if v == 0 && f == plainTicks && (mag >= 1e4 || mag < 1e-3) {
		return "0"
	}
	suffix := ""
	switch {
	case f == percentTicks:
		v, step, suffix = v*100, step*100, "%"
	case mag >= 1e6:
		v, step, suffix = v/1e6, step/1e6, "M"
	case mag >= 1e4:
		v, step, suffix = v/1e3, step/1e3, "k"
	case mag < 1e-3:
		// 2e-5, 1.5e-4: the mantissa without trailing zeros.
		mant, exp, _ := strings.Cut(strconv.FormatFloat(v, 'e', 4, 64), "e")
		if strings.Contains(mant, ".") {
			mant = strings.TrimRight(strings.TrimRight(mant, "0"), ".")
		}
		e, _ := strconv.Atoi(exp)
		return mant + "e" + strconv.Itoa(e)
	}
	return strconv.FormatFloat(v, 'f', digits(step), 64) + suffix
}

// digits returns the decimals that a step of a 1-2-5 sequence needs.
func digits(step float64) int {
	if step <= 0 {
		return 0
	}
	return min(max(0, int(-math.Floor(math.Log10(step)+1e-9))), 12)
}

// save draws the figure into a PNG file.
func (f *figure) save(path string) (err error) {
	defer func() {
		// gonum/plot panics on some impossible geometry; a report is not
		// worth crashing the caller for.
		if r := recover(); r != nil {
			err = fmt.Errorf("drawing %s: %v", path, r)
		}
	}()
	cols := max(f.cols, 1)
	rows := (len(f.panels) + cols - 1) / cols
	ph := f.panelH
	if ph == 0 {
		ph = panelHeight
	}
	width := f.width
	if width == 0 {
		width = figWidth
	}
	pad := vg.Points(figPad)
	titleStyle := sans(14, true, inkColor)
	titleStyle.XAlign, titleStyle.YAlign = draw.XCenter, draw.YTop
	titleH := titleStyle.Height(f.title) + vg.Points(8)
	legendStyle := sans(10.5, false, inkColor)
	lines := layoutLegend(f.legend, legendStyle, width-2*pad)
	rowH := legendStyle.Height("Mg") + vg.Points(5)
	legendH := vg.Length(len(lines)) * rowH
	if legendH > 0 {
		legendH += vg.Points(6)
	}
	height := pad + titleH + vg.Length(rows)*ph + legendH + pad

	img := vgimg.NewWith(vgimg.UseWH(width, height), vgimg.UseDPI(dpi), vgimg.UseBackgroundColor(color.White))
	dc := draw.New(img)
	dc.FillText(titleStyle, vg.Point{X: width / 2, Y: height - pad}, f.title)

	// Titles and y labels too long for their tile are shortened.
	tileW := (width-2*pad-vg.Length(cols-1)*vg.Points(tilePadX))/vg.Length(cols) - vg.Points(6)
	for _, p := range f.panels {
		if p == nil {
			continue
		}
		p.Title.Text = fitText(p.Title.TextStyle, p.Title.Text, tileW)
		p.Y.Label.Text = fitText(p.Y.Label.TextStyle, p.Y.Label.Text, ph-vg.Points(50))
	}

	area := draw.Crop(dc, pad, -pad, pad+legendH, -(pad + titleH))
	grid := make([][]*plot.Plot, rows)
	for r := range rows {
		grid[r] = make([]*plot.Plot, cols)
		for c := range cols {
			if i := r*cols + c; i < len(f.panels) {
				grid[r][c] = f.panels[i]
			}
		}
	}
	tiles := draw.Tiles{Rows: rows, Cols: cols, PadX: vg.Points(tilePadX), PadY: vg.Points(tilePadY)}
	canvases := plot.Align(grid, tiles, area)
	for r := range rows {
		for c := range cols {
			if grid[r][c] != nil {
				grid[r][c].Draw(canvases[r][c])
			}
		}
	}

	// The legend, centred in rows under the panels.
	y := pad + legendH - vg.Points(6) - rowH
	for _, line := range lines {
		x := (width - line.width) / 2
		for _, e := range line.entries {
			icon := draw.Canvas{Canvas: dc.Canvas, Rectangle: vg.Rectangle{
				Min: vg.Point{X: x, Y: y + vg.Points(1)},
				Max: vg.Point{X: x + legendThumb, Y: y + rowH - vg.Points(1)},
			}}
			e.thumb.Thumbnail(&icon)
			ts := legendStyle
			ts.YAlign = draw.YCenter
			dc.FillText(ts, vg.Point{X: x + legendThumb + legendGap, Y: y + rowH/2}, e.label)
			x += legendThumb + legendGap + legendStyle.Width(e.label) + legendSep
		}
		y -= rowH
	}

	w, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(w); err != nil {
		w.Close()
		return err
	}
	return w.Close()
}

// fitText returns s, or when it is wider than width in the style sty, s with
// its middle replaced by an ellipsis: a metric's prefix and its last part
// tell the most.
func fitText(sty text.Style, s string, width vg.Length) string {
	if sty.Width(s) <= width {
		return s
	}
	r := []rune(s)
	// The longest cut that fits keeps ⌈k/2⌉ runes in front and ⌊k/2⌋ behind.
	cut := func(k int) string { return string(r[:(k+1)/2]) + "…" + string(r[len(r)-k/2:]) }
	lo, hi := 0, len(r) // cut(lo) fits, or lo is 0
	for hi-lo > 1 {
		mid := (lo + hi) / 2
		if sty.Width(cut(mid)) <= width {
			lo = mid
		} else {
			hi = mid
		}
	}
	return cut(lo)
}

// The legend's spacing, in points.
const (
	legendThumb vg.Length = 20
	legendGap   vg.Length = 4
	legendSep   vg.Length = 16
)

type legendLine struct {
	entries []legendEntry
	width   vg.Length
}

// layoutLegend flows the entries into as few lines no wider than width as
// it can, balancing their lengths.
func layoutLegend(entries []legendEntry, sty text.Style, width vg.Length) []legendLine {
	lines := flowLegend(entries, sty, width)
	lo, hi := vg.Length(0), width
	for hi-lo > 1 {
		mid := (lo + hi) / 2
		if len(flowLegend(entries, sty, mid)) > len(lines) {
			lo = mid
		} else {
			hi = mid
		}
	}
	return flowLegend(entries, sty, hi)
}

// flowLegend fills lines no wider than width, one after the other.
func flowLegend(entries []legendEntry, sty text.Style, width vg.Length) []legendLine {
	var lines []legendLine
	var cur legendLine
	for _, e := range entries {
		w := legendThumb + legendGap + sty.Width(e.label)
		if len(cur.entries) > 0 && cur.width+legendSep+w > width {
			lines = append(lines, cur)
			cur = legendLine{}
		}
		if len(cur.entries) > 0 {
			cur.width += legendSep
		}
		cur.entries = append(cur.entries, e)
		cur.width += w
	}
	if len(cur.entries) > 0 {
		lines = append(lines, cur)
	}
	return lines
}

// lineThumb draws a legend's line sample.
type lineThumb draw.LineStyle

// Thumbnail implements plot.Thumbnailer.
func (t lineThumb) Thumbnail(c *draw.Canvas) {
	y := c.Center().Y
	c.StrokeLine2(draw.LineStyle(t), c.Min.X, y, c.Max.X, y)
}

// boxThumb draws a legend's filled-area sample.
type boxThumb struct{ color.Color }

// Thumbnail implements plot.Thumbnailer.
func (t boxThumb) Thumbnail(c *draw.Canvas) {
	h := (c.Max.Y - c.Min.Y) * 0.35
	cy := c.Center().Y
	c.FillPolygon(t.Color, []vg.Point{
		{X: c.Min.X, Y: cy - h}, {X: c.Max.X, Y: cy - h}, {X: c.Max.X, Y: cy + h}, {X: c.Min.X, Y: cy + h},
	})
}

// Thumbnails combined.
type thumbs []plot.Thumbnailer

// Thumbnail implements plot.Thumbnailer.
func (ts thumbs) Thumbnail(c *draw.Canvas) {
	for _, t := range ts {
		t.Thumbnail(c)
	}
}
