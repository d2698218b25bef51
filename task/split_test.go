package task_test

import (
	"fmt"
	"testing"

	"rlvr/task"
	"rlvr/task/world"
)

func TestFractionSplitsQuestionsByText(t *testing.T) {
	examples := world.Examples(7, 4000, []int{3, 4, 5, 6})
	warm := 0
	for _, e := range examples {
		f := task.Fraction(e)
		if f < 0 || f >= 1 {
			t.Fatalf("Fraction(%q) = %v, outside [0, 1)", e.Prompt, f)
		}
		// Only the question counts: the same question read from another
		// file, with another id and solution, lands on the same side.
		moved := task.Example{ID: "elsewhere/1", Prompt: e.Prompt, Solution: "other", Source: "x.jsonl:3"}
		if task.Fraction(moved) != f {
			t.Fatalf("Fraction depends on more than the question for %q", e.Prompt)
		}
		if f < 0.2 {
			warm++
		}
	}
	// 4000 draws of a fair 20% split: the share is 0.2 ± 0.025 with
	// overwhelming probability (more than 3.9 standard deviations).
	if got := float64(warm) / float64(len(examples)); got < 0.175 || got > 0.225 {
		t.Errorf("warm-up share of 4000 world questions = %.3f, want about 0.2", got)
	}
	chat := task.Example{Messages: []task.Message{{Role: "user", Content: "2+2?"}}}
	system := task.Example{Messages: []task.Message{{Role: "system", Content: "2+2?"}}}
	if task.Fraction(chat) == task.Fraction(system) {
		t.Error("a chat's roles do not count in its fraction")
	}
}

func ExampleFraction() {
	e := task.Example{Prompt: "Q:12+7\n"}
	fmt.Println(task.Fraction(e) == task.Fraction(task.Example{ID: "copy", Prompt: "Q:12+7\n"}))
	// Output: true
}
