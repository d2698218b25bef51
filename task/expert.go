package task

import "fmt"

// ExpertName is the name of expert i and of the prompt that asks for it:
// E<i>. Training variants, evaluation records, reports and metric names
// (variant/E1/accuracy) know an expert by it.
func ExpertName(i int) string { return fmt.Sprintf("E%d", i) }
