package httpurl

import "testing"

func TestValid(t *testing.T) {
	for s, want := range map[string]bool{
		"http://127.0.0.1:8000/v1": true, "https://api.example.com": true,
		"": false, "http://": false, "ftp://host/x": false, "localhost:8000": false, "http//host": false, "://x": false,
	} {
		if got := Valid(s); got != want {
			t.Errorf("Valid(%q) = %v, want %v", s, got, want)
		}
	}
}
