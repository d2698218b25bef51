package task

import "testing"

func TestReferenceResponse(t *testing.T) {
	for _, tc := range []struct {
		e    Example
		want string
	}{
		{Example{Solution: "3 + 4 = 7", Answer: "7"}, "3 + 4 = 7\n#### 7\n"},
		{Example{Solution: "12+7=19\n####19\n", Answer: "19"}, "12+7=19\n####19\n"},
		{Example{Solution: `so \boxed{5}`, Answer: "5"}, "so \\boxed{5}\n"},
		{Example{Answer: "5"}, ""},
	} {
		if got := ReferenceResponse(tc.e); got != tc.want {
			t.Errorf("ReferenceResponse(%+v) = %q, want %q", tc.e, got, tc.want)
		}
	}
}
