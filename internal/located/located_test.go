package located

import (
	"errors"
	"fmt"
	"testing"
)

func TestAt(t *testing.T) {
	bad := errors.New("want an integer, got \"one\"")
	for _, tc := range []struct {
		err  *Error
		want string
	}{
		{At("collect", "dme.jsonl", 12, -1, "", Field("expert", bad)), `collect: dme.jsonl:12: field "expert": want an integer, got "one"`},
		{At("task", "dev.json", 0, 3, "", fmt.Errorf("wrapped: %w", Field("answer", bad))), `task: dev.json: element 3: field "answer": want an integer, got "one"`},
		{At("task", "train.parquet", 0, 7, "row", bad), `task: train.parquet: row 7: want an integer, got "one"`},
		{At("task", "x.jsonl", 2, 5, "element", bad), `task: x.jsonl:2: want an integer, got "one"`},
		{At("task", "empty.jsonl", 0, -1, "", bad), `task: empty.jsonl: want an integer, got "one"`},
	} {
		if got := tc.err.Error(); got != tc.want {
			t.Errorf("Error() = %q, want %q", got, tc.want)
		}
		if !errors.Is(tc.err, bad) {
			t.Errorf("%q does not wrap the complaint", tc.err)
		}
	}
	if e := At("task", "x.jsonl", 2, 5, "", bad); e.Index != -1 {
		t.Errorf("a line's error has index %d, want -1", e.Index)
	}
	if f := FieldOf(fmt.Errorf("decoding: %w", Field("correct", bad))); f != "correct" {
		t.Errorf("FieldOf = %q", f)
	}
	if f := FieldOf(bad); f != "" {
		t.Errorf("FieldOf(a plain error) = %q", f)
	}
}
