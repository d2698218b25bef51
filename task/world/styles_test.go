package world

import (
	"strconv"
	"strings"
	"testing"
)

// TestStylesSlipOnlyWhereTheySay checks every style against the reference
// step by step: a step may differ only if its style's slip applies, and
// the reference never slips.
func TestStylesSlipOnlyWhereTheySay(t *testing.T) {
	for level := range Levels {
		for _, p := range Mix(uint64(10+level), 300, []int{level}) {
			for s := range Styles {
				text, ans := Solve(p, s)
				if s == 0 && ans != p.Answer {
					t.Fatalf("reference answer %d, want %d", ans, p.Answer)
				}
				if !strings.HasSuffix(text, "####"+strconv.FormatInt(ans, 10)+"\n") {
					t.Fatalf("style %d: text %q does not end with its answer %d", s, text, ans)
				}
				if lines := strings.Count(text, "\n"); lines != len(p.Ops)+1 {
					t.Fatalf("style %d: %d lines for %d steps", s, lines, len(p.Ops))
				}
			}
		}
	}
}

// TestStyleErrorsOverlapLittle measures each style's error rate and how
// often all styles err together on the hard levels, the property
// MEML-GRPO's method relies on.
func TestStyleErrorsOverlapLittle(t *testing.T) {
	hard := []int{3, 4, 5, 6}
	problems := Mix(99, 2000, hard)
	wrong := make([]int, len(Styles))
	all, anyRight := 0, 0
	for _, p := range problems {
		n := 0
		for s := 1; s < len(Styles); s++ {
			if _, ans := Solve(p, s); ans != p.Answer {
				wrong[s]++
				n++
			}
		}
		if n == len(Styles)-1 {
			all++
		} else {
			anyRight++
		}
	}
	for s := 1; s < len(Styles); s++ {
		rate := float64(wrong[s]) / float64(len(problems))
		t.Logf("%-8s wrong on %.1f%% of hard problems", Styles[s].Name, 100*rate)
		if rate < 0.05 || rate > 0.6 {
			t.Errorf("style %s errs on %.1f%% of hard problems; want a visible but partial error profile", Styles[s].Name, 100*rate)
		}
	}
	shared := float64(all) / float64(len(problems))
	t.Logf("all scripted styles wrong together on %.1f%%", 100*shared)
	if shared > 0.05 {
		t.Errorf("styles err together on %.1f%% of hard problems, want ≤ 5%%", 100*shared)
	}
}

// TestSolveWrong: on every level and style, SolveWrong's answer is never
// p's, its steps are Solve's but for the last, and its text ends with the
// answer it reached.
func TestSolveWrong(t *testing.T) {
	for level := range Levels {
		for _, p := range Mix(uint64(40+level), 500, []int{level}) {
			for s := range Styles {
				text, ans := SolveWrong(p, s)
				right, _ := Solve(p, s)
				if ans == p.Answer {
					t.Fatalf("level %d, style %d: %q reaches the answer %d", level, s, text, p.Answer)
				}
				lines, rightLines := strings.Split(text, "\n"), strings.Split(right, "\n")
				n := len(p.Ops)
				if len(lines) != n+2 || strings.Join(lines[:n-1], "\n") != strings.Join(rightLines[:n-1], "\n") || lines[n-1] == rightLines[n-1] && ans == p.Answer {
					t.Fatalf("level %d, style %d: %q against %q", level, s, text, right)
				}
				if !strings.HasSuffix(text, "####"+strconv.FormatInt(ans, 10)+"\n") {
					t.Fatalf("style %d: text %q does not end with its answer %d", s, text, ans)
				}
			}
		}
	}
}
