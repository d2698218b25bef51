package optim_test

import (
	"fmt"

	"rlvr/engine/optim"
)

func ExampleSchedule() {
	s := optim.Schedule{Kind: optim.Cosine, PeakLR: 1e-3, WarmupSteps: 2, TotalSteps: 10, MinLRRatio: 0.1}
	if err := s.Validate(); err != nil {
		fmt.Println(err)
		return
	}
	for _, step := range []int{0, 1, 2, 6, 10, 11} {
		fmt.Printf("step %2d: lr %.2e\n", step, s.LR(step))
	}
	// Output:
	// step  0: lr 5.00e-04
	// step  1: lr 1.00e-03
	// step  2: lr 1.00e-03
	// step  6: lr 5.50e-04
	// step 10: lr 1.00e-04
	// step 11: lr 1.00e-04
}
