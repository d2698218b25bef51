package probe

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"reflect"
	"strings"

	"rlvr/internal/stats"
)

// NoSample is how a table writes a measure that has no sample to be
// measured on.
const NoSample = "no sample"

// Print writes the report as one table per method, every rate with its
// 95% interval and its count.
func (r DatasetReport) Print(w io.Writer) {
	fmt.Fprintf(w, "model %s on %s: %s; never the test split\n", r.Model, r.Data, r.From)
	fmt.Fprintf(w, "%d samples per problem at T=%g, %d tokens per answer, seed %d\n", r.K, r.Temperature, r.MaxTokens, r.Seed)
	for _, s := range r.Skipped {
		fmt.Fprintf(w, "skipped: %s\n", s)
	}

	fmt.Fprintf(w, "\nThe policy alone (the run's prompt)\n\n| measure | measured |\n| --- | --- |\n")
	fmt.Fprintf(w, "| greedy accuracy | %s |\n", rate(r.Greedy))
	fmt.Fprintf(w, "| accuracy of the %d samples | %s |\n", r.K, rate(r.Sampled))
	fmt.Fprintf(w, "| groups all right or all wrong | %s |\n", rate(r.ZeroVariance))

	if e := r.EAPO; e != nil {
		fmt.Fprintf(w, "\nEAPO: each expert asked the whole question, its reply in the history, then %d episodes per problem (turn budget %d)\n\n", r.K, e.Turns)
		fmt.Fprintf(w, "| expert | its reply right | no reply | policy with the reply | without consultation | with − without, paired | when the reply is right | when it is wrong |\n")
		fmt.Fprintf(w, "| --- | --- | --- | --- | --- | --- | --- | --- |\n")
		for _, x := range e.Experts {
			name := x.Name
			if x.Model != "" && x.Model != x.Name {
				name += " (" + x.Model + ")"
			}
			fmt.Fprintf(w, "| %s | %s | %d | %s | %s | %s | %s | %s |\n", name, rate(x.Right), x.NoReply, rate(x.With), rate(e.Without),
				diff(x.Gain), diff(x.GainRight), diff(x.GainWrong))
		}
		for _, x := range e.Experts {
			if x.Consulted > 0 {
				fmt.Fprintf(w, "expert %s: in %d of %d episodes the policy consulted again\n", x.Name, x.Consulted, r.Problems*r.K)
			}
		}
	}

	if m := r.MEL; m != nil {
		fmt.Fprintf(w, "\nMEL: replay with a meta-experience M against without, on the %d questions the policy failed (all %d samples wrong, or greedy wrong)\n\n", m.Failed, r.K)
		fmt.Fprintf(w, "| measure | measured |\n| --- | --- |\n")
		fmt.Fprintf(w, "| pairs: right answer the policy's own / the reference solution | %d / %d |\n", m.FromPolicy, m.FromReference)
		if m.NoReference > 0 || m.TooLong > 0 {
			fmt.Fprintf(w, "| failed questions without a right answer or reference / prompts too long | %d / %d |\n", m.NoReference, m.TooLong)
		}
		fmt.Fprintf(w, "| meta-experiences parsed | %d of %d, %s |\n", parsedCount(m), m.Pairs, rate(m.Parsed))
		fmt.Fprintf(w, "| validated (the validation replay right) | %d |\n", m.Validated)
		fmt.Fprintf(w, "| accuracy with M / without, fresh samples | %s / %s |\n", rate(m.With), rate(m.Without))
		fmt.Fprintf(w, "| replay with M − without, paired by question | %s |\n", diff(m.Gain))
		fmt.Fprintf(w, "| the same over validated Ms | %s |\n", diff(m.GainValidated))
		if parsedCount(m) == 0 {
			fmt.Fprintf(w, "no meta-experience parsed, so the replay gain has no sample: the policy does not write the reflection format from the instruction alone (a cold start teaches it)\n")
		}
	}

	if m := r.MEML; m != nil {
		fmt.Fprintf(w, "\nMEML: each expert prompt's greedy accuracy, as training renders the prompts\n\n| prompt | greedy accuracy |\n| --- | --- |\n")
		fmt.Fprintf(w, "| the run's prompt alone | %s |\n", rate(r.Greedy))
		for _, p := range m.Prompts {
			fmt.Fprintf(w, "| %s | %s |\n", p.Name, rate(p.Greedy))
		}
		fmt.Fprintf(w, "| questions whose answers across the prompts are mixed | %s (all right %d, all wrong %d) |\n", rate(m.Mixed), m.AllRight, m.AllWrong)
	}
}

// parsedCount is the number of meta-experiences that parsed.
func parsedCount(m *MELReport) int {
	if m.Parsed.N == 0 {
		return 0
	}
	return int(math.Round(m.Parsed.Mean * float64(m.Parsed.N)))
}

// rate writes a proportion with its interval and count.
func rate(iv stats.Interval) string {
	if iv.N == 0 {
		return NoSample
	}
	return fmt.Sprintf("%s (n=%d)", iv.Percent(), iv.N)
}

// diff writes a mean difference in points with its interval and count.
func diff(iv stats.Interval) string {
	switch {
	case iv.N == 0:
		return NoSample
	case iv.N == 1:
		return fmt.Sprintf("%+.1f pp (n=1)", 100*iv.Mean)
	}
	return fmt.Sprintf("%+.1f pp [%+.1f, %+.1f] (n=%d)", 100*iv.Mean, 100*iv.Low, 100*iv.High, iv.N)
}

// JSON is a report as indented JSON, its fields in order, every number
// that is not finite (an interval over no sample) written as null, which
// encoding/json alone refuses to write.
func JSON(v any) ([]byte, error) {
	var b bytes.Buffer
	if err := writeJSON(&b, reflect.ValueOf(v)); err != nil {
		return nil, err
	}
	var out bytes.Buffer
	if err := json.Indent(&out, b.Bytes(), "", "  "); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

// writeJSON writes v as encoding/json would, with non-finite floats as
// null: structs by their exported fields and json tags (a name, "-",
// omitempty), pointers and interfaces by what they hold.
func writeJSON(b *bytes.Buffer, v reflect.Value) error {
	switch v.Kind() {
	case reflect.Float32, reflect.Float64:
		if f := v.Float(); math.IsNaN(f) || math.IsInf(f, 0) {
			b.WriteString("null")
			return nil
		}
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			b.WriteString("null")
			return nil
		}
		return writeJSON(b, v.Elem())
	case reflect.Slice, reflect.Array:
		if v.Kind() == reflect.Slice && v.IsNil() {
			b.WriteString("null")
			return nil
		}
		b.WriteByte('[')
		for i := range v.Len() {
			if i > 0 {
				b.WriteByte(',')
			}
			if err := writeJSON(b, v.Index(i)); err != nil {
				return err
			}
		}
		b.WriteByte(']')
		return nil
	case reflect.Struct:
		if _, ok := v.Interface().(json.Marshaler); ok {
			break
		}
		b.WriteByte('{')
		n := 0
		for i := range v.NumField() {
			f := v.Type().Field(i)
			name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
			if !f.IsExported() || name == "-" || opts == "omitempty" && v.Field(i).IsZero() ||
				opts == "omitempty" && (f.Type.Kind() == reflect.Slice || f.Type.Kind() == reflect.Map) && v.Field(i).Len() == 0 {
				continue
			}
			if name == "" {
				name = f.Name
			}
			if n > 0 {
				b.WriteByte(',')
			}
			n++
			key, _ := json.Marshal(name)
			b.Write(key)
			b.WriteByte(':')
			if err := writeJSON(b, v.Field(i)); err != nil {
				return err
			}
		}
		b.WriteByte('}')
		return nil
	}
	out, err := json.Marshal(v.Interface())
	if err != nil {
		return err
	}
	b.Write(out)
	return nil
}
