package servetest

import (
	"context"
	"net"
	"testing"

	"rlvr/serve"
)

// Start serves models with cfg on a loopback port for the rest of the test
// and returns the API's base URL ("http://127.0.0.1:PORT/v1").
func Start(t testing.TB, cfg serve.Config, models ...serve.Model) string {
	t.Helper()
	srv, err := serve.New(cfg, models...)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Shutdown(context.Background()) })
	return "http://" + ln.Addr().String() + "/v1"
}
