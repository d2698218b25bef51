package serve

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	api "rlvr/api/openai"
	"rlvr/internal/secret"
	"rlvr/sample"
)

// apiError is an error response: a status and an OpenAI error envelope.
type apiError struct {
	status int
	typ    string
	code   string
	param  string
	msg    string
}

func badRequest(param, format string, args ...any) *apiError {
	return &apiError{status: http.StatusBadRequest, typ: api.ErrorTypeInvalidRequest, param: param, msg: fmt.Sprintf(format, args...)}
}

func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/health", s.method(http.MethodGet, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		io.WriteString(w, "ok\n")
	}))
	mux.Handle("/v1/models", s.auth(s.method(http.MethodGet, s.listModels)))
	mux.Handle("/v1/models/{model...}", s.auth(s.method(http.MethodGet, s.getModel)))
	mux.Handle("/v1/chat/completions", s.auth(s.method(http.MethodPost, s.chat)))
	mux.Handle("/v1/completions", s.auth(s.method(http.MethodPost, s.complete)))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		s.fail(w, &apiError{status: http.StatusNotFound, typ: api.ErrorTypeInvalidRequest, code: "not_found",
			msg: fmt.Sprintf("no endpoint %s; this server has /v1/models, /v1/chat/completions and /v1/completions", r.URL.Path)})
	})
	return s.logRequests(mux)
}

// statusWriter remembers the status for the request log.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (s *Server) logRequests(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w}
		h.ServeHTTP(sw, r)
		s.log.Debug("serve: request", "method", r.Method, "path", r.URL.Path, "status", sw.status,
			"duration", time.Since(start), "remote", r.RemoteAddr)
	})
}

func (s *Server) method(method string, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Method != method && !(method == http.MethodGet && r.Method == http.MethodHead) {
			w.Header().Set("Allow", method)
			s.fail(w, &apiError{status: http.StatusMethodNotAllowed, typ: api.ErrorTypeInvalidRequest, code: "method_not_allowed",
				msg: fmt.Sprintf("%s %s is not allowed; use %s", r.Method, r.URL.Path, method)})
			return
		}
		h(w, r)
	}
}

func (s *Server) auth(h http.Handler) http.Handler {
	if s.cfg.Token == "" {
		return h
	}
	want := secret.NewKey(s.cfg.Token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		header := r.Header.Get("Authorization")
		scheme, token, _ := strings.Cut(header, " ")
		if strings.EqualFold(scheme, "Bearer") && want.Matches(strings.TrimSpace(token)) {
			h.ServeHTTP(w, r)
			return
		}
		msg := "invalid bearer token"
		if header == "" {
			msg = "missing bearer token: send the header Authorization: Bearer <token>"
		}
		w.Header().Set("WWW-Authenticate", `Bearer realm="rlvr"`)
		s.fail(w, &apiError{status: http.StatusUnauthorized, typ: api.ErrorTypeInvalidRequest, code: api.CodeInvalidAPIKey, msg: msg})
	})
}

// fail writes e as an error envelope.
func (s *Server) fail(w http.ResponseWriter, e *apiError) {
	switch e.status {
	case http.StatusServiceUnavailable:
		w.Header().Set("Retry-After", "1")
	case http.StatusInternalServerError:
		s.log.Warn("serve: request failed", "err", e.msg)
	}
	s.writeJSON(w, e.status, api.NewError(e.typ, e.code, e.param, e.msg))
}

func (s *Server) writeJSON(w http.ResponseWriter, status int, v any) {
	data, err := json.Marshal(v)
	if err != nil {
		s.log.Warn("serve: encoding a response", "err", err)
		status = http.StatusInternalServerError
		data, _ = json.Marshal(api.NewError(api.ErrorTypeServer, "", "", "serve: encoding the response failed"))
	}
	w.Header().Set("Content-Type", "application/json")
	s.setWriteDeadline(w)
	w.WriteHeader(status)
	w.Write(append(data, '\n'))
}

func (s *Server) setWriteDeadline(w http.ResponseWriter) {
	if s.cfg.WriteTimeout > 0 {
		// Fails only where deadlines are unsupported (a ResponseRecorder).
		_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(s.cfg.WriteTimeout))
	}
}

// decode reads the JSON request body into v.
func (s *Server) decode(w http.ResponseWriter, r *http.Request, v any) *apiError {
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes))
	if err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			return &apiError{status: http.StatusRequestEntityTooLarge, typ: api.ErrorTypeInvalidRequest, code: "request_too_large",
				msg: fmt.Sprintf("the request body exceeds this server's limit of %d bytes", s.cfg.MaxBodyBytes)}
		}
		return badRequest("", "reading the request body: %v", err)
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return badRequest("", "the request body is empty; want a JSON object")
	}
	err = json.Unmarshal(data, v)
	if err == nil {
		return nil
	}
	if e, ok := errors.AsType[*json.SyntaxError](err); ok {
		return badRequest("", "malformed JSON at byte offset %d: %v", e.Offset, err)
	}
	if e, ok := errors.AsType[*json.UnmarshalTypeError](err); ok {
		if e.Field == "" {
			return badRequest("", "the request body must be a JSON object, not %s", e.Value)
		}
		return badRequest(e.Field, "%s: cannot use a JSON %s as %s", e.Field, e.Value, e.Type)
	}
	if e, ok := errors.AsType[*api.FieldError](err); ok {
		return badRequest(e.Param, "%s: %s", e.Param, e.Message)
	}
	return badRequest("", "malformed request: %v", err)
}

// lookup finds the named model; an empty name means the only one.
func (s *Server) lookup(name string) (*model, *apiError) {
	if name == "" {
		if len(s.names) == 1 {
			return s.models[s.names[0]], nil
		}
		return nil, badRequest("model", "model is required; this server has %s", strings.Join(s.names, ", "))
	}
	if m := s.models[name]; m != nil {
		return m, nil
	}
	return nil, &apiError{status: http.StatusNotFound, typ: api.ErrorTypeInvalidRequest, code: api.CodeModelNotFound, param: "model",
		msg: fmt.Sprintf("the model %q does not exist; this server has %s", name, strings.Join(s.names, ", "))}
}

// validate joins a request's own validation with this server's limits.
func (s *Server) validate(err error, n *int, prompts, maxNew int, maxParam string) *apiError {
	var fields []api.FieldError
	if ve, ok := errors.AsType[*api.ValidationError](err); ok {
		fields = ve.Fields
	} else if err != nil {
		return badRequest("", "%v", err)
	}
	has := func(param string) bool {
		for _, f := range fields {
			if f.Param == param {
				return true
			}
		}
		return false
	}
	nn := 1
	if n != nil {
		nn = *n
	}
	// n's bound is this server's, which may be tighter than the one
	// Validate states (api.MaxN): the message says the server's.
	nMsg := ""
	switch {
	case nn < 1:
		nMsg = fmt.Sprintf("%d is outside [1, %d]", nn, s.cfg.MaxN)
	case nn > s.cfg.MaxN:
		nMsg = fmt.Sprintf("%d is above this server's limit of %d", nn, s.cfg.MaxN)
	}
	if i := slices.IndexFunc(fields, func(f api.FieldError) bool { return f.Param == "n" }); i >= 0 && nMsg != "" {
		fields[i].Message = nMsg
	} else if nMsg != "" {
		fields = append(fields, api.FieldError{Param: "n", Message: nMsg})
	}
	if maxNew > s.cfg.MaxTokens && !has(maxParam) {
		fields = append(fields, api.FieldError{Param: maxParam, Message: fmt.Sprintf("%d is above this server's limit of %d", maxNew, s.cfg.MaxTokens)})
	}
	if seqs := prompts * nn; nn >= 1 && nn <= s.cfg.MaxN && seqs > s.cfg.MaxBatch {
		param := "prompt"
		if prompts == 1 {
			param = "n"
		}
		fields = append(fields, api.FieldError{Param: param, Message: fmt.Sprintf("%d prompts × n=%d ask for %d sequences; this server samples at most %d per request", prompts, nn, seqs, s.cfg.MaxBatch)})
	}
	if len(fields) == 0 {
		return nil
	}
	ve := &api.ValidationError{Fields: fields}
	return &apiError{status: http.StatusBadRequest, typ: api.ErrorTypeInvalidRequest, code: ve.Code(), param: ve.Param(),
		msg: strings.TrimPrefix(ve.Error(), "openai: ")}
}

// budget returns how many tokens each sample may generate: what the
// request asked for, or def cut to the context, and checks the context.
func (s *Server) budget(m *model, promptLen, asked int, param string, def int, promptParam string) (int, *apiError) {
	ctxLen := m.ContextLength
	if ctxLen > 0 && promptLen >= ctxLen {
		return 0, &apiError{status: http.StatusBadRequest, typ: api.ErrorTypeInvalidRequest, code: api.CodeContextLengthExceeded, param: promptParam,
			msg: fmt.Sprintf("the prompt has %d tokens; model %q has a context length of %d", promptLen, m.Name, ctxLen)}
	}
	if asked > 0 {
		if ctxLen > 0 && promptLen+asked > ctxLen {
			return 0, &apiError{status: http.StatusBadRequest, typ: api.ErrorTypeInvalidRequest, code: api.CodeContextLengthExceeded, param: param,
				msg: fmt.Sprintf("the prompt (%d tokens) plus %s (%d) exceed model %q's context length of %d", promptLen, param, asked, m.Name, ctxLen)}
		}
		return asked, nil
	}
	n := min(def, s.cfg.MaxTokens)
	if ctxLen > 0 {
		n = min(n, ctxLen-promptLen)
	}
	return n, nil
}

func (s *Server) modelInfo(m *model) api.Model {
	return api.Model{ID: m.Name, Object: api.ObjectModel, Created: s.created, OwnedBy: "rlvr", MaxModelLen: m.ContextLength}
}

func (s *Server) listModels(w http.ResponseWriter, r *http.Request) {
	list := api.ModelList{Object: api.ObjectList, Data: []api.Model{}}
	for _, name := range s.names {
		list.Data = append(list.Data, s.modelInfo(s.models[name]))
	}
	s.writeJSON(w, http.StatusOK, list)
}

func (s *Server) getModel(w http.ResponseWriter, r *http.Request) {
	m, e := s.lookup(r.PathValue("model"))
	if e != nil {
		s.fail(w, e)
		return
	}
	s.writeJSON(w, http.StatusOK, s.modelInfo(m))
}

func (s *Server) chat(w http.ResponseWriter, r *http.Request) {
	var req api.ChatCompletionRequest
	if e := s.decode(w, r, &req); e != nil {
		s.fail(w, e)
		return
	}
	m, e := s.lookup(req.Model)
	if e != nil {
		s.fail(w, e)
		return
	}
	maxNew, maxParam := req.MaxNewTokens()
	if maxParam == "" {
		maxParam = "max_tokens"
	}
	if e := s.validate(req.Validate(), req.N, 1, maxNew, maxParam); e != nil {
		s.fail(w, e)
		return
	}
	if m.Chat == nil {
		s.fail(w, &apiError{status: http.StatusBadRequest, typ: api.ErrorTypeInvalidRequest, code: api.CodeUnsupported, param: "model",
			msg: fmt.Sprintf("model %q has no chat template; use /v1/completions", m.Name)})
		return
	}
	text, err := m.Chat(req.ChatMessages())
	if err != nil {
		s.fail(w, badRequest("messages", "cannot render the conversation with model %q's chat template: %v", m.Name, err))
		return
	}
	prompt := m.encode(text)
	p := req.SampleParams()
	if p.MaxTokens, e = s.budget(m, len(prompt), maxNew, maxParam, s.cfg.MaxTokens, "messages"); e != nil {
		s.fail(w, e)
		return
	}
	g := &generation{
		chat:     true,
		id:       "chatcmpl-" + newID(),
		m:        m,
		prompts:  [][]int32{prompt},
		params:   p,
		logprobs: req.Logprobs != nil && *req.Logprobs,
		stream:   req.Stream,
		usage:    req.StreamOptions != nil && req.StreamOptions.IncludeUsage,
	}
	s.generate(w, r, g, req.Seed == nil)
}

func (s *Server) complete(w http.ResponseWriter, r *http.Request) {
	var req api.CompletionRequest
	if e := s.decode(w, r, &req); e != nil {
		s.fail(w, e)
		return
	}
	m, e := s.lookup(req.Model)
	if e != nil {
		s.fail(w, e)
		return
	}
	maxNew := 0
	if req.MaxTokens != nil {
		maxNew = *req.MaxTokens
	}
	if e := s.validate(req.Validate(), req.N, req.Prompt.Len(), maxNew, "max_tokens"); e != nil {
		s.fail(w, e)
		return
	}
	var prompts [][]int32
	for _, t := range req.Prompt.Texts {
		prompts = append(prompts, m.encode(t))
	}
	vocab := m.Tokenizer.VocabSize()
	for i, ids := range req.Prompt.Tokens {
		for _, id := range ids {
			if int(id) >= vocab {
				s.fail(w, badRequest(promptParam(i, req.Prompt.Len()), "token id %d is outside model %q's vocabulary of %d", id, m.Name, vocab))
				return
			}
		}
		prompts = append(prompts, ids)
	}
	longest := 0
	for _, p := range prompts {
		longest = max(longest, len(p))
	}
	p := req.SampleParams()
	if p.MaxTokens, e = s.budget(m, longest, maxNew, "max_tokens", api.DefaultCompletionMaxTokens, "prompt"); e != nil {
		s.fail(w, e)
		return
	}
	g := &generation{
		id:       "cmpl-" + newID(),
		m:        m,
		prompts:  prompts,
		params:   p,
		logprobs: req.Logprobs != nil,
		stream:   req.Stream,
		usage:    req.StreamOptions != nil && req.StreamOptions.IncludeUsage,
	}
	s.generate(w, r, g, req.Seed == nil)
}

func promptParam(i, n int) string {
	if n == 1 {
		return "prompt"
	}
	return "prompt[" + strconv.Itoa(i) + "]"
}

func newID() string {
	return fmt.Sprintf("%016x%08x", rand.Uint64(), rand.Uint32())
}

// generate queues g's requests with the model's scheduler and answers
// with the results, streamed or whole.
func (s *Server) generate(w http.ResponseWriter, r *http.Request, g *generation, randomSeed bool) {
	g.params.StopTokens = g.m.stop
	if randomSeed {
		g.params.Seed = rand.Uint64()
	}
	g.created = time.Now().Unix()
	n := g.params.N
	j := &job{ctx: r.Context(), seqs: len(g.prompts) * n, done: make(chan result, 1)}
	if g.stream {
		j.events = newMailbox()
		defer j.events.close()
	}
	for i, prompt := range g.prompts {
		req := sample.Request{Prompt: prompt, Params: g.params}
		if g.stream {
			mb, first := j.events, i*n
			req.OnToken = func(k int, token int32, logprob float32) {
				if k >= 0 && k < n {
					mb.push(event{choice: first + k, token: token, logprob: logprob})
				}
			}
		}
		j.reqs = append(j.reqs, req)
	}
	err := errShuttingDown
	if !s.closing.Load() {
		err = g.m.sched.submit(j)
	}
	if err != nil {
		s.fail(w, &apiError{status: http.StatusServiceUnavailable, typ: api.ErrorTypeServer, code: api.CodeOverloaded, msg: err.Error()})
		return
	}
	start := time.Now()
	defer func() {
		s.log.Debug("serve: generation", "id", g.id, "model", g.m.Name, "prompts", len(g.prompts), "n", n,
			"stream", g.stream, "prompt_tokens", g.used.PromptTokens, "completion_tokens", g.used.CompletionTokens,
			"duration", time.Since(start))
	}()
	if g.stream {
		s.stream(w, r, g, j)
		return
	}
	select {
	case res := <-j.done:
		if res.err != nil {
			s.fail(w, s.sampleError(res.err))
			return
		}
		s.writeJSON(w, http.StatusOK, g.response(res.out))
	case <-r.Context().Done():
		// The client left; the scheduler discards the results.
	}
}

func (s *Server) sampleError(err error) *apiError {
	if errors.Is(err, errShuttingDown) || s.base.Err() != nil {
		return &apiError{status: http.StatusServiceUnavailable, typ: api.ErrorTypeServer, code: api.CodeOverloaded, msg: errShuttingDown.Error()}
	}
	return &apiError{status: http.StatusInternalServerError, typ: api.ErrorTypeServer, msg: fmt.Sprintf("sampling failed: %v", err)}
}
