package tinkerserver

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"rlvr/api/tinker"
	"rlvr/engine/model"
	"rlvr/format/hf"
	"rlvr/format/safetensors"
	"rlvr/format/tokenizer"
)

// testBase is the base model's name in the tests.
const testBase = "tiny"

// testModelConfig is a model of the byte tokenizer small enough for every
// test to train and sample in milliseconds.
var testModelConfig = model.Config{Vocab: tokenizer.NewByteTokenizer().VocabSize(), Dim: 16, Layers: 2, Heads: 2, Hidden: 32, MaxSeq: 64}

var (
	modelOnce sync.Once
	modelDir  string
	modelErr  error
)

// testModelDir writes the test model once, as a Hugging Face directory
// without tokenizer files (checkpoint.Open gives it the byte tokenizer).
func testModelDir(t testing.TB) string {
	t.Helper()
	modelOnce.Do(func() {
		modelDir, modelErr = os.MkdirTemp("", "tinkerserver-model-")
		if modelErr != nil {
			return
		}
		var m *model.Model
		if m, modelErr = model.New(testModelConfig, 3); modelErr != nil {
			return
		}
		modelErr = hf.Save(filepath.Join(modelDir, "tiny"), m, nil, safetensors.F32)
		modelDir = filepath.Join(modelDir, "tiny")
	})
	if modelErr != nil {
		t.Fatal(modelErr)
	}
	return modelDir
}

func TestMain(m *testing.M) {
	code := m.Run()
	if modelDir != "" {
		os.RemoveAll(filepath.Dir(modelDir))
	}
	os.Exit(code)
}

// harness is a server over loopback HTTP and a client of it.
type harness struct {
	t   testing.TB
	srv *Server
	url string
	key string
}

// newHarness serves the test model with cfg (Models and StateDir filled
// in when empty) on a loopback port.
func newHarness(t testing.TB, cfg Config) *harness {
	t.Helper()
	if cfg.Models == nil {
		cfg.Models = map[string]string{testBase: testModelDir(t)}
	}
	if cfg.StateDir == "" {
		cfg.StateDir = t.TempDir()
	}
	if cfg.Logger == nil {
		cfg.Logger = discard()
	}
	srv, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(func() {
		hs.Close()
		srv.Close()
	})
	return &harness{t: t, srv: srv, url: hs.URL, key: cfg.APIKey}
}

// do sends a request and returns the status and body.
func (h *harness) do(method, path string, body any, header ...string) (int, []byte) {
	h.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			h.t.Fatal(err)
		}
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, h.url+path, rd)
	if err != nil {
		h.t.Fatal(err)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if h.key != "" {
		req.Header.Set(tinker.HeaderAPIKey, h.key)
	}
	for i := 0; i+1 < len(header); i += 2 {
		if header[i+1] == "" {
			req.Header.Del(header[i])
		} else {
			req.Header.Set(header[i], header[i+1])
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		h.t.Fatal(err)
	}
	return resp.StatusCode, b
}

// post sends a POST and requires status 200.
func (h *harness) post(path string, body any) []byte {
	h.t.Helper()
	status, b := h.do(http.MethodPost, path, body)
	if status != http.StatusOK {
		h.t.Fatalf("POST %s: status %d: %s", path, status, b)
	}
	return b
}

// strict decodes b into v, refusing fields v lacks.
func strict(t testing.TB, b []byte, v any) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("decoding %s strictly into %T: %v", b, v, err)
	}
}

// submit posts a training or sampling call and returns its future.
func (h *harness) submit(path string, body any) tinker.Future {
	h.t.Helper()
	var f tinker.Future
	strict(h.t, h.post(path, body), &f)
	if f.RequestID == "" {
		h.t.Fatalf("POST %s: no request_id", path)
	}
	return f
}

// wait retrieves a future's result body, polling again on 408.
func (h *harness) wait(id string) []byte {
	h.t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); {
		status, b := h.do(http.MethodPost, tinker.PathRetrieveFuture, tinker.RetrieveFutureRequest{RequestID: id})
		switch status {
		case http.StatusOK:
			return b
		case http.StatusRequestTimeout:
			continue
		default:
			h.t.Fatalf("retrieve_future %s: status %d: %s", id, status, b)
		}
	}
	h.t.Fatalf("retrieve_future %s: no result", id)
	return nil
}

// call submits a call and decodes its result strictly into out; a failed
// call is a test failure.
func (h *harness) call(path string, body, out any) {
	h.t.Helper()
	f := h.submit(path, body)
	b := h.wait(f.RequestID)
	if bytes.Contains(b, []byte(`"error"`)) {
		h.t.Fatalf("POST %s failed: %s", path, b)
	}
	strict(h.t, b, out)
}

// failure submits a call that must fail and returns its failure.
func (h *harness) failure(path string, body any) tinker.RequestFailed {
	h.t.Helper()
	f := h.submit(path, body)
	b := h.wait(f.RequestID)
	var rf tinker.RequestFailed
	strict(h.t, b, &rf)
	if rf.Message == "" {
		h.t.Fatalf("POST %s: result %s is not a failure", path, b)
	}
	return rf
}

// session creates a session.
func (h *harness) session() string {
	h.t.Helper()
	var s tinker.CreateSessionResponse
	strict(h.t, h.post(tinker.PathCreateSession, tinker.CreateSessionRequest{Tags: []string{"test"}, SDKVersion: "test", Type: "create_session"}), &s)
	return s.SessionID
}

// newModel creates a session and a model of the test base.
func (h *harness) newModel() (session, modelID string) {
	h.t.Helper()
	session = h.session()
	var m tinker.CreateModelResponse
	strict(h.t, h.post(tinker.PathCreateModel, tinker.CreateModelRequest{SessionID: session, BaseModel: testBase, Type: "create_model"}), &m)
	return session, m.ModelID
}

// detail decodes an HTTP error body strictly.
func detail(t testing.TB, b []byte) string {
	t.Helper()
	var d tinker.ErrorDetail
	strict(t, b, &d)
	return d.Detail
}

// expectDetail checks an HTTP error's status and that its detail holds
// every want.
func expectDetail(t testing.TB, status int, body []byte, wantStatus int, want ...string) {
	t.Helper()
	if status != wantStatus {
		t.Errorf("status %d, want %d: %s", status, wantStatus, body)
		return
	}
	d := detail(t, body)
	for _, w := range want {
		if !strings.Contains(d, w) {
			t.Errorf("detail %q does not mention %q", d, w)
		}
	}
}

// blocker holds the server's workers at their next call until released.
type blocker struct {
	entered chan string
	release chan struct{}
}

func block(s *Server) *blocker {
	b := &blocker{entered: make(chan string, 64), release: make(chan struct{})}
	hook := func(kind string) {
		b.entered <- kind
		<-b.release
	}
	s.hook.Store(&hook)
	return b
}

// waitEntered waits until a worker is held at a call of kind.
func (b *blocker) waitEntered(t testing.TB, kind string) {
	t.Helper()
	select {
	case k := <-b.entered:
		if k != kind {
			t.Fatalf("a worker entered %s, want %s", k, kind)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("no worker entered %s", kind)
	}
}

// unblock lets every held and later call run.
func (b *blocker) unblock(s *Server) {
	s.hook.Store(nil)
	close(b.release)
}

// sft is a datum of a sequence trained on by cross-entropy.
func sft(seq []int32) tinker.Datum {
	w := make([]float32, len(seq)-1)
	for i := range w {
		w[i] = 1
	}
	return tinker.Datum{ModelInput: tinker.Text(seq[:len(seq)-1]), LossFnInputs: map[string]tinker.TensorData{
		"target_tokens": tinker.Ints(seq[1:]), "weights": tinker.Floats(w)}}
}

func discard() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
