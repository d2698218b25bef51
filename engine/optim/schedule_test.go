package optim

import (
	"math"
	"testing"
)

func TestScheduleLR(t *testing.T) {
	// Warmup 10, decay over steps 10..110 to 0.1: the midpoint of the decay
	// is step 60, a quarter of the way is step 35.
	sched := func(k ScheduleKind) Schedule {
		return Schedule{Kind: k, PeakLR: 1, WarmupSteps: 10, TotalSteps: 110, MinLRRatio: 0.1}
	}
	quarterCos := 0.1 + 0.9*(1+math.Sqrt2/2)/2
	tests := []struct {
		name string
		s    Schedule
		step int
		want float64
	}{
		{"constant warmup start", sched(Constant), 0, 0.1},
		{"constant warmup middle", sched(Constant), 4, 0.5},
		{"constant warmup end", sched(Constant), 9, 1},
		{"constant decay start", sched(Constant), 10, 1},
		{"constant midpoint", sched(Constant), 60, 1},
		{"constant end", sched(Constant), 110, 1},
		{"constant after end", sched(Constant), 1000, 1},
		{"constant unbounded", Schedule{Kind: Constant, PeakLR: 2e-4}, 1 << 40, 2e-4},

		{"linear warmup start", sched(Linear), 0, 0.1},
		{"linear warmup end", sched(Linear), 9, 1},
		{"linear decay start", sched(Linear), 10, 1},
		{"linear quarter", sched(Linear), 35, 0.775},
		{"linear midpoint", sched(Linear), 60, 0.55},
		{"linear end", sched(Linear), 110, 0.1},
		{"linear after end", sched(Linear), 1000, 0.1},
		{"linear to zero", Schedule{Kind: Linear, PeakLR: 3e-4, TotalSteps: 4}, 3, 0.75e-4},

		{"cosine warmup start", sched(Cosine), 0, 0.1},
		{"cosine warmup end", sched(Cosine), 9, 1},
		{"cosine decay start", sched(Cosine), 10, 1},
		{"cosine quarter", sched(Cosine), 35, quarterCos},
		{"cosine midpoint", sched(Cosine), 60, 0.55},
		{"cosine end", sched(Cosine), 110, 0.1},
		{"cosine after end", sched(Cosine), 1000, 0.1},
		{"cosine no warmup", Schedule{Kind: Cosine, PeakLR: 1e-3, TotalSteps: 100}, 0, 1e-3},
		{"cosine no decay phase", Schedule{Kind: Cosine, PeakLR: 1, WarmupSteps: 5, TotalSteps: 5, MinLRRatio: 0.5}, 5, 0.5},
		{"negative step", sched(Cosine), -3, 0.1},
	}
	for _, tt := range tests {
		if got := tt.s.LR(tt.step); math.Abs(got-tt.want) > 1e-12*tt.want {
			t.Errorf("%s: LR(%d) = %v, want %v", tt.name, tt.step, got, tt.want)
		}
	}
}

func TestScheduleValidate(t *testing.T) {
	tests := []struct {
		name string
		s    Schedule
		want []string // substrings of the error; nil means valid
	}{
		{"cosine", Schedule{Kind: Cosine, PeakLR: 1e-4, WarmupSteps: 10, TotalSteps: 100, MinLRRatio: 0.1}, nil},
		{"constant without length", Schedule{Kind: Constant, PeakLR: 1e-4, WarmupSteps: 10}, nil},
		{"warmup is everything", Schedule{Kind: Linear, PeakLR: 1e-4, WarmupSteps: 5, TotalSteps: 5, MinLRRatio: 1}, nil},
		{"everything wrong", Schedule{Kind: "exp", PeakLR: -1, WarmupSteps: -2, TotalSteps: -3, MinLRRatio: 1.5},
			[]string{`Kind = "exp"`, "PeakLR = -1", "WarmupSteps = -2", "TotalSteps = -3", "MinLRRatio = 1.5"}},
		{"zero value", Schedule{}, []string{`Kind = ""`, "PeakLR = 0"}},
		{"warmup too long", Schedule{Kind: Cosine, PeakLR: 1, WarmupSteps: 20, TotalSteps: 10, MinLRRatio: -0.1},
			[]string{"WarmupSteps = 20 exceeds TotalSteps = 10", "MinLRRatio = -0.1"}},
		{"decay needs length", Schedule{Kind: Linear, PeakLR: math.NaN(), WarmupSteps: 10},
			[]string{"TotalSteps = 0", "PeakLR = NaN"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkProblems(t, tt.s.Validate(), tt.want)
		})
	}
}

func TestParseScheduleKind(t *testing.T) {
	tests := []struct {
		in      string
		want    ScheduleKind
		wantErr bool
	}{
		{"constant", Constant, false},
		{"linear", Linear, false},
		{" Cosine ", Cosine, false},
		{"", "", true},
		{"exponential", "", true},
	}
	for _, tt := range tests {
		got, err := ParseScheduleKind(tt.in)
		if got != tt.want || (err != nil) != tt.wantErr {
			t.Errorf("ParseScheduleKind(%q) = %q, %v; want %q, error %v", tt.in, got, err, tt.want, tt.wantErr)
		}
	}
}

// TestLeft checks the shapes' share of the way left at both ends and the
// middle: 1 at the start and exactly 0 at the end for every kind that
// moves, and the middle of each curve.
func TestLeft(t *testing.T) {
	for _, tc := range []struct {
		kind ScheduleKind
		mid  float64 // at x = 0.5
	}{
		{Linear, 0.5},
		{Cosine, 0.5},
		{Exponential, 1 - math.Expm1(-2.5)/math.Expm1(-5)}, // rate 0 means 5
		{Constant, 1},
	} {
		end := 0.0
		if tc.kind == Constant {
			end = 1
		}
		if got := Left(tc.kind, 0, 0); got != 1 {
			t.Errorf("%s: Left(0) = %v, want 1", tc.kind, got)
		}
		if got := Left(tc.kind, 1, 0); got != end {
			t.Errorf("%s: Left(1) = %v, want exactly %v", tc.kind, got, end)
		}
		if got := Left(tc.kind, 0.5, 0); math.Abs(got-tc.mid) > 1e-15 {
			t.Errorf("%s: Left(0.5) = %v, want %v", tc.kind, got, tc.mid)
		}
	}
	if a, b := Left(Exponential, 0.3, 2), Left(Exponential, 0.3, 8); a <= b {
		t.Errorf("a faster exponential should have less left at 0.3: rate 2 %v, rate 8 %v", a, b)
	}
}
