package world

import (
	"math"
	"testing"
)

// TestStepTally reads the corpus's own solutions: the reference's steps
// are all right, the version 2 habit's are right or its slip on prone
// steps (the slip at its rate) and right elsewhere; a wrong result of another kind
// and an unreadable line are counted as such.
func TestStepTally(t *testing.T) {
	c := NewCorpus(Version2([]int{5, 6}), 3)
	var ref, habit StepTally
	for range 2000 {
		p := c.problem()
		ref.Add(p.Solution())
		habit.Add(c.habitual(p, 0, 0))
	}
	if ref.ProneRight != ref.Prone || ref.OtherRight != ref.Other || ref.Unread != 0 || ref.Prone == 0 || ref.Other == 0 {
		t.Errorf("reference solutions: %+v", ref)
	}
	if habit.ProneRight+habit.ProneSlip != habit.Prone || habit.OtherRight != habit.Other || habit.Unread != 0 {
		t.Errorf("the habit's solutions: %+v", habit)
	}
	if f := float64(habit.ProneSlip) / float64(habit.Prone); math.Abs(f-c.cfg.Habit) > 0.03 {
		t.Errorf("the habit slips on %.3f of prone steps, want %v", f, c.cfg.Habit)
	}
	var odd StepTally
	odd.Add("15+27=42\n38+47=75\n38+47=86\n-12-5=-17\n29*8=222\n29*8=232\nhello\n12+x=3\n####232\n")
	// 15+27 and 38+47 carry from the units but not into the hundreds: not
	// prone (one right, two wrong); -12-5 borrows (prone, right); 29*8 is
	// prone, once slipped and once right.
	want := StepTally{Prone: 3, ProneRight: 2, ProneSlip: 1, Other: 3, OtherRight: 1, Unread: 2}
	if odd != want {
		t.Errorf("tally %+v, want %+v", odd, want)
	}
}
