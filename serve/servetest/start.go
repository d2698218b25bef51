package servetest

import (
	"testing"

	"rlvr/serve"
)

// Start serves models with cfg on a loopback port for the rest of the test
// and returns the API's base URL ("http://127.0.0.1:PORT/v1").
func Start(t testing.TB, cfg serve.Config, models ...serve.Model) string {
	t.Helper()
	base, stop, err := serve.Loopback(cfg, models...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	return base
}
