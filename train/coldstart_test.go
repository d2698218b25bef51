package train

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"rlvr/checkpoint"
	"rlvr/expert"
	"rlvr/internal/datatest"
	"rlvr/method/eapo"
	"rlvr/method/mel"
	"rlvr/rundir"
)

// additionData writes a GSM8K-format training and test file of short
// additions with worked solutions, and returns their paths.
func additionData(t *testing.T, train, test int) (string, string) {
	t.Helper()
	dir := t.TempDir()
	return datatest.Additions(t, filepath.Join(dir, "train.jsonl"), train, 0), datatest.Additions(t, filepath.Join(dir, "test.jsonl"), test, 1000)
}

// readColdStart reads a run's cold_start.json, as a record and as text.
func readColdStart(t *testing.T, run string) (ColdStartRecord, []byte) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(run, rundir.ColdStartFile))
	if err != nil {
		t.Fatal(err)
	}
	var rec ColdStartRecord
	if err := json.Unmarshal(b, &rec); err != nil {
		t.Fatal(err)
	}
	return rec, b
}

// consultColdStartRun is an EAPO run of a tiny random chat model on
// additions, asking a reference expert, with a cold start.
func consultColdStartRun(t *testing.T) RLConfig {
	t.Helper()
	cfg := smallRL(t)
	trainPath, testPath := additionData(t, 35, 12)
	cfg.Model, cfg.Chat = byteChatModel(t, 1024), ChatConfig{Template: "on", System: "Answer after ####."}
	cfg.Data = DataConfig{Name: "gsm8k", Train: trainPath, Test: testPath}
	cfg.Steps, cfg.PromptsPerStep, cfg.GroupSize, cfg.MaxTokens, cfg.CheckpointEvery = 1, 2, 2, 96, 0
	cfg.EvalProblems = 12
	cfg.Parts = []string{eapo.PartConsultation}
	cfg.Sections.Set(&eapo.ConsultationConfig{
		Experts: []expert.Config{{Name: "E1", Kind: expert.KindReference}},
		System:  "Consult E1 as <consult>[{\"expert\": \"E1\", \"question\": \"...\"}]</consult>.",
	})
	cfg.ColdStart = &ColdStartConfig{Examples: 32, Epochs: 150, Batch: 32, LR: 1e-2, Probe: 12}
	return cfg
}

// TestColdStartTeachesConsultAction: a model that never writes a consult
// action writes well-formed ones after a cold start on demonstrations
// written from training examples, each an action asking the reference
// expert, its reply and a closing answer; the record holds the rates,
// the loss and the paired validation accuracy, and the RL steps follow.
func TestColdStartTeachesConsultAction(t *testing.T) {
	cfg := consultColdStartRun(t)
	run := filepath.Join(t.TempDir(), "run")
	var log strings.Builder
	if err := Run(context.Background(), cfg, run, Options{Log: func(f string, a ...any) { fmt.Fprintf(&log, f+"\n", a...) }}); err != nil {
		t.Fatal(err)
	}
	rec, b := readColdStart(t, run)
	if rec.Demonstrations != 32 || rec.Steps != 150 || len(rec.Loss) != 150 || rec.Problems != 12 {
		t.Fatalf("record %s", b)
	}
	if !(rec.Loss[len(rec.Loss)-1] < rec.Loss[0]/4) {
		t.Errorf("the demonstrations' loss went from %g to %g", rec.Loss[0], rec.Loss[len(rec.Loss)-1])
	}
	if len(rec.Protocol) != 1 || rec.Protocol[0].Part != eapo.PartConsultation || rec.Protocol[0].Protocol != "consult" {
		t.Fatalf("protocol rates %+v", rec.Protocol)
	}
	before, after := rec.Protocol[0].Before, rec.Protocol[0].After
	if before.N != 12 || after.N != 12 || before.Mean != 0 || after.Mean < 0.75 {
		t.Fatalf("consult rate before %+v, after %+v: want 0 of 12, then at least 9 of 12", before, after)
	}
	if !strings.Contains(log.String(), "cold start: consultation consult rate after:") || !strings.Contains(log.String(), "cold start: step 150 of 150, loss ") {
		t.Errorf("log:\n%s", log.String())
	}
	if ms := stable(t, filepath.Join(run, "metrics.jsonl")); len(ms) != 1 || ms[0][eapo.MetricCallRate] == 0 {
		t.Errorf("the RL step after the cold start consulted in none of its episodes: %v", ms)
	}
}

// TestColdStartActionAlone: an expert whose replies give no answer to
// close from still has its action demonstrated, alone, and the record
// counts those demonstrations.
func TestColdStartActionAlone(t *testing.T) {
	cfg := consultColdStartRun(t)
	cfg.Sections.Set(&eapo.ConsultationConfig{Experts: []expert.Config{{Name: "E1", Reply: "I am not sure."}}})
	cfg.ColdStart = &ColdStartConfig{Examples: 4, Epochs: 1, Batch: 4, LR: 1e-3, Probe: 2}
	run := filepath.Join(t.TempDir(), "run")
	if err := Run(context.Background(), cfg, run, Options{}); err != nil {
		t.Fatal(err)
	}
	rec, b := readColdStart(t, run)
	if rec.Demonstrations != 4 || rec.Partial["reply_without_answer"] != 4 || len(rec.Skipped) != 0 {
		t.Fatalf("record %s: want 4 demonstrations, each the action alone", b)
	}
}

// TestColdStartRefused: a cold start with nothing to teach, on the world,
// with a base algorithm of sft, or on a dataset without the reference
// solutions its demonstrations are written from, is an error naming what
// is wrong, before the run directory is touched.
func TestColdStartRefused(t *testing.T) {
	world := smallRL(t)
	world.ColdStart = &ColdStartConfig{}
	if _, err := world.Resolve(); err == nil || !strings.Contains(err.Error(), "cold_start is for a chat model on a dataset") {
		t.Errorf("world: %v", err)
	}
	bad := smallRL(t)
	bad.ColdStart = &ColdStartConfig{Epochs: -1, LR: 2}
	if _, err := bad.Resolve(); err == nil || !strings.Contains(err.Error(), "cold_start.epochs = -1") || !strings.Contains(err.Error(), "cold_start.lr = 2") {
		t.Errorf("bounds: %v", err)
	}

	none := consultColdStartRun(t)
	none.Parts = nil
	none.Sections = nil
	run := filepath.Join(t.TempDir(), "run")
	if err := Run(context.Background(), none, run, Options{}); err == nil || !strings.Contains(err.Error(), "none of the listed parts") {
		t.Errorf("no part: %v", err)
	}
	if _, err := os.Stat(run); !os.IsNotExist(err) {
		t.Errorf("the refused run made its directory: %v", err)
	}

	// Questions and answers without a solution field: MEL's
	// demonstrations have nothing to be written from.
	noSolution := consultColdStartRun(t)
	dir := t.TempDir()
	var lines []string
	for i := range 30 {
		lines = append(lines, fmt.Sprintf(`{"q": "%d+1?", "a": "%d"}`, i, i+1))
	}
	path := filepath.Join(dir, "plain.jsonl")
	os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644)
	noSolution.Data = DataConfig{Name: "plain", Train: path, Fields: &FieldsConfig{Question: "q", Answer: "a"}}
	noSolution.Parts = []string{mel.PartMetaExperience}
	noSolution.Sections = nil
	noSolution.Sections.Set(&mel.MetaExperienceConfig{})
	err := Run(context.Background(), noSolution, run, Options{})
	if err == nil || !strings.Contains(err.Error(), "meta_experience writes its demonstrations from reference solutions") || !strings.Contains(err.Error(), "plain.jsonl") {
		t.Errorf("no solutions: %v", err)
	}
	if _, err := os.Stat(run); !os.IsNotExist(err) {
		t.Errorf("the refused run made its directory: %v", err)
	}
}

// TestColdStartResumes: a run stopped in its cold start resumes it at the
// step it reached, from the step-0 checkpoint, and ends as the run that
// was never stopped: the same record (its timing aside), the same RL
// step's metrics and the same final weights, bit for bit. A run stopped
// after the stage does not run it again.
func TestColdStartResumes(t *testing.T) {
	cfg := consultColdStartRun(t)
	cfg.ColdStart = &ColdStartConfig{Examples: 8, Epochs: 3, Batch: 4, LR: 1e-3, Probe: 4}
	straight := filepath.Join(t.TempDir(), "straight")
	if err := Run(context.Background(), cfg, straight, Options{}); err != nil {
		t.Fatal(err)
	}
	stopped := filepath.Join(t.TempDir(), "stopped")
	stop := make(chan struct{})
	var log strings.Builder
	err := Run(context.Background(), cfg, stopped, Options{Stop: stop, Log: func(f string, a ...any) {
		line := fmt.Sprintf(f, a...)
		fmt.Fprintln(&log, line)
		if strings.HasPrefix(line, "cold start: step 2 of 6,") {
			close(stop)
		}
	}})
	if !errors.Is(err, ErrStopped) {
		t.Fatalf("stopped in the cold start: %v, want ErrStopped", err)
	}
	if _, err := os.Stat(filepath.Join(stopped, ColdStartDemonstrationsFile)); err != nil {
		t.Fatalf("the stopped stage kept no demonstrations: %v", err)
	}
	log.Reset()
	if err := Run(context.Background(), cfg, stopped, Options{Resume: true, Log: func(f string, a ...any) { fmt.Fprintf(&log, f+"\n", a...) }}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(log.String(), "cold start: resumed after step 2, 8 demonstrations") || strings.Contains(log.String(), "cold start: step 2 of 6") ||
		strings.Contains(log.String(), "demonstrations from 8 training questions") {
		t.Errorf("the resumed run's log:\n%s", log.String())
	}
	want, _ := readColdStart(t, straight)
	got, b := readColdStart(t, stopped)
	want.Seconds, got.Seconds = 0, 0
	if !reflect.DeepEqual(got, want) {
		wb, _ := json.Marshal(want)
		t.Errorf("resumed record\n%s\nwant\n%s", b, wb)
	}
	if g, w := stable(t, filepath.Join(stopped, "metrics.jsonl")), stable(t, filepath.Join(straight, "metrics.jsonl")); !reflect.DeepEqual(g, w) {
		t.Errorf("RL metrics after the resumed stage %v, want %v", g, w)
	}
	if !bytes.Equal(finalWeights(t, stopped, cfg.Steps), finalWeights(t, straight, cfg.Steps)) {
		t.Error("the final weights differ from the straight run's")
	}
	if _, err := os.Stat(filepath.Join(stopped, ColdStartDemonstrationsFile)); !os.IsNotExist(err) {
		t.Errorf("the finished stage left its demonstrations: %v", err)
	}

	// Stopped once the stage is done: the step-0 checkpoint says so, and
	// the resumed run goes straight to the RL steps.
	done := filepath.Join(t.TempDir(), "done")
	stop = make(chan struct{})
	err = Run(context.Background(), cfg, done, Options{Stop: stop, Log: func(f string, a ...any) {
		if strings.HasPrefix(fmt.Sprintf(f, a...), "cold start: greedy validation accuracy") {
			close(stop)
		}
	}})
	if !errors.Is(err, ErrStopped) {
		t.Fatalf("stopped at the end of the cold start: %v, want ErrStopped", err)
	}
	log.Reset()
	if err := Run(context.Background(), cfg, done, Options{Resume: true, Log: func(f string, a ...any) { fmt.Fprintf(&log, f+"\n", a...) }}); err != nil {
		t.Fatal(err)
	}
	if g, w := stable(t, filepath.Join(done, "metrics.jsonl")), stable(t, filepath.Join(straight, "metrics.jsonl")); !reflect.DeepEqual(g, w) {
		t.Errorf("RL metrics after a stop at the stage's end %v, want %v", g, w)
	}
	if strings.Contains(log.String(), "cold start:") {
		t.Errorf("a run resumed after its cold start ran it again:\n%s", log.String())
	}
}

// TestColdStartUnaided: with cold_start.unaided, a share of the drawn
// questions also demonstrates answering alone: the starting policy's own
// greedy answer behind the evaluation prompt (no grant), and the same
// answer after a declined consult action. The record counts them and
// measures consult actions written without the grant, before and after.
func TestColdStartUnaided(t *testing.T) {
	cfg := consultColdStartRun(t)
	cfg.ColdStart = &ColdStartConfig{Examples: 8, Epochs: 1, Batch: 4, LR: 1e-3, Probe: 4, Unaided: 0.5}
	run := filepath.Join(t.TempDir(), "run")
	stop := make(chan struct{})
	err := Run(context.Background(), cfg, run, Options{Stop: stop, Log: func(f string, a ...any) {
		if strings.HasPrefix(fmt.Sprintf(f, a...), "cold start: step 1 of") {
			close(stop)
		}
	}})
	if !errors.Is(err, ErrStopped) {
		t.Fatalf("%v, want ErrStopped", err)
	}
	f, err := os.Open(filepath.Join(run, ColdStartDemonstrationsFile))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	demos, err := readDemonstrations(f.Name(), 16)
	if err != nil {
		t.Fatal(err)
	}
	l, err := checkpoint.OpenText(cfg.Model)
	if err != nil {
		t.Fatal(err)
	}
	decode := func(d []int32) string { return l.Decode(d) }
	grant := "Consult E1 as"
	// 8 protocol demonstrations, then 4 answers behind the evaluation
	// prompt, then the same 4 answers after a declined action.
	for i := range 4 {
		anchor, declined := demos[8+i], demos[12+i]
		var answer []int32
		for k, w := range anchor.Weights {
			if w == 1 {
				answer = append(answer, anchor.Targets[k])
			}
		}
		prompt := decode(anchor.Tokens[:len(anchor.Tokens)-len(answer)+1])
		seq := decode(append(declined.Tokens, declined.Targets[len(declined.Targets)-1]))
		if len(answer) == 0 || strings.Contains(prompt, grant) || !strings.Contains(seq, grant) ||
			!strings.Contains(seq, "<consult>") || !strings.Contains(seq, eapo.Unavailable) || !strings.HasSuffix(seq, decode(answer)) {
			t.Errorf("answer alone %d: prompt %q, answer %q; after a decline %q", i, prompt, decode(answer), seq)
		}
	}
	if err := Run(context.Background(), cfg, run, Options{Resume: true}); err != nil {
		t.Fatal(err)
	}
	rec, b := readColdStart(t, run)
	p := rec.Protocol[0]
	if rec.Demonstrations != 16 || rec.Unaided != 8 || p.UnaskedBefore == nil || p.UnaskedAfter == nil || p.UnaskedBefore.N != 12 {
		t.Fatalf("record %s", b)
	}

	bad := consultColdStartRun(t)
	bad.ColdStart.Unaided = 1.5
	if _, err := bad.Resolve(); err == nil || !strings.Contains(err.Error(), "cold_start.unaided = 1.5") {
		t.Errorf("unaided 1.5: %v", err)
	}
}
