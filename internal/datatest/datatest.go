// Package datatest writes small dataset files in real formats for tests.
package datatest

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

// Additions writes to path a GSM8K-format file of n questions "a+b?", a in
// 1..7 and b in 1..5, each with its worked solution and "#### a+b"; the
// i-th question is the (i+offset)-th of that cycle of 35, so files written
// at offsets 35 apart hold the same questions.
func Additions(t testing.TB, path string, n, offset int) string {
	t.Helper()
	var lines []string
	for i := range n {
		a, b := (i+offset)%7+1, (i+offset)/7%5+1
		lines = append(lines, fmt.Sprintf(`{"question": "%d+%d?", "answer": "%d+%d=%d\n#### %d"}`, a, b, a, b, a+b, a+b))
	}
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}
