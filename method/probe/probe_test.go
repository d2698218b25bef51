package probe

import (
	"strings"
	"testing"
)

// TestAcceptedReplies reads replies out of episodes as the consultation
// loop writes them: right ones, a wrong one, one that did not come, and a
// line that only looks like a consultation.
func TestAcceptedReplies(t *testing.T) {
	for _, tc := range []struct {
		text     string
		accepted int
		allRight bool
	}{
		{"12+7=19\n?E1:19*8?\n!E1:152\n19*8=152\n####152\n", 1, true},
		{"?E1:19*8;E3:19*8?\n!E1:152\n!E3:142\n19*8=142\n####142\n", 2, false},
		{"?E2:57-29?\n!E2:-\n57-29=28\n####28\n", 0, true},
		{"?E2:-57+542?\n!E2:485\n####485\n", 1, true},
		{"12+7=19\n####19\n", 0, true},
		{"?E1:19*8?\n", 0, true}, // the budget ended the episode unanswered
	} {
		n, right := acceptedReplies(tc.text)
		if n != tc.accepted || right != tc.allRight {
			t.Errorf("%q: %d accepted, all right %v; want %d, %v", tc.text, n, right, tc.accepted, tc.allRight)
		}
	}
}

// TestConfigValidate names every field out of range at once.
func TestConfigValidate(t *testing.T) {
	good := Config{Levels: []int{5, 6}, Problems: 10, K: 8, Temperature: 1, MaxTokens: 256}
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	bad := Config{Levels: []int{9}, Problems: 0, K: 1, Temperature: -1, MaxTokens: 0}
	err := bad.Validate()
	for _, want := range []string{"problems 0", "k 1", "max-tokens 0", "temperature -1", "no world level 9"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v, want it to name %q", err, want)
		}
	}
}
