package report

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"rlvr/rundir"
)

func TestBlocksAveragesEachSeedThenTheSeeds(t *testing.T) {
	root := t.TempDir()
	// Accuracy at step s is offset + s/100: seed 1's blocks of 10 steps
	// average 0.055 and 0.155, seed 2's 0.155 and 0.255.
	runs := loadRuns(t,
		writeSeedRun(t, root, seedRun{name: "a-seed1", seed: "1"}),
		writeSeedRun(t, root, seedRun{name: "a-seed2", seed: "2", offset: 0.1}))
	// A row whose one seed logs the metric only on steps 3 and 15, and
	// whose other seed never does.
	for name, metrics := range map[string]string{
		"b-seed1": `{"step":3,"accuracy":0.4}` + "\n" + `{"step":7}` + "\n" + `{"step":15,"accuracy":0.8}` + "\n" + `{"step":20}` + "\n",
		"b-seed2": `{"step":20,"grad_norm":1}` + "\n",
	} {
		runs = append(runs, metricsRun(t, root, name, metrics))
	}

	got, err := Blocks(runs, []string{"accuracy"}, 10, "")
	if err != nil {
		t.Fatal(err)
	}
	// t(0.975, 1) = 12.706 times the standard error 0.05 of two block
	// means 0.1 apart: ±0.635.
	for _, want := range []string{
		"| accuracy | steps 1–10 | steps 11–20 |",
		"| a | 0.105 [−0.53, 0.74] | 0.205 [−0.43, 0.84] |",
		"| b | 0.4 (1 of 2 seeds) | 0.8 (1 of 2 seeds) |",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the table lacks %q:\n%s", want, got)
		}
	}

	// The last block ends at the last step logged.
	got, err = Blocks(runs, []string{"accuracy"}, 15, "")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(got, "| accuracy | steps 1–15 | steps 16–20 |") {
		t.Errorf("blocks of 15 over 20 steps:\n%s", got)
	}
}

func TestBlocksPairsDifferencesBySeed(t *testing.T) {
	root := t.TempDir()
	var runs []*rundir.Run
	for _, r := range []seedRun{
		// The baseline's seeds 1 and 2, and a row 0.1 and 0.3 above them
		// on the same seeds, given in the other order; its seed 3 has no
		// baseline to pair with.
		{name: "base-seed1", seed: "1"},
		{name: "base-seed2", seed: "2", offset: 0.5},
		{name: "row-seed3", seed: "3", offset: 9},
		{name: "row-seed2", seed: "2", offset: 0.8},
		{name: "row-seed1", seed: "1", offset: 0.1},
	} {
		runs = append(runs, load(t, writeSeedRun(t, root, r)))
	}
	got, err := Blocks(runs, []string{"accuracy"}, 20, "base")
	if err != nil {
		t.Fatal(err)
	}
	// Differences 0.1 and 0.3: mean 0.2, t(0.975, 1) × 0.1 = ±1.27.
	for _, want := range []string{
		"| Δ accuracy vs base | steps 1–20 |",
		"| row | +0.2 [−1.07, +1.47] (2 of 3 seeds) |",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the table lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "| base | +") {
		t.Errorf("the baseline is compared with itself:\n%s", got)
	}
}

func TestBlocksRefusesWhatItCannotTable(t *testing.T) {
	runs := loadRuns(t, writeSeedRun(t, t.TempDir(), seedRun{name: "a-seed1", seed: "1"}))
	for _, c := range []struct {
		metrics  []string
		every    int
		baseline string
		want     string
	}{
		{[]string{"accuracy"}, 0, "", "blocks of 0 steps"},
		{nil, 10, "", "no metric named"},
		{[]string{"acuracy"}, 10, "", `no run logs the metric "acuracy"; the runs log accuracy, step_s, zero_variance_frac`},
		{[]string{"accuracy"}, 10, "b", `no row named "b"; the rows are "a"`},
	} {
		_, err := Blocks(runs, c.metrics, c.every, c.baseline)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Blocks(%v, %d): error %v, want one containing %q", c.metrics, c.every, err, c.want)
		}
	}
}

// TestBlocksDifferenceOfTwoMetrics: A-B is A − B at each step that logs
// both, averaged per seed and then over seeds, as a write-up compares
// consulting episodes with the others.
func TestBlocksDifferenceOfTwoMetrics(t *testing.T) {
	root := t.TempDir()
	var runs []*rundir.Run
	for name, metrics := range map[string]string{
		// Seed 1: with − without is 0.1 at step 1 and 0.3 at step 2;
		// step 3 logs only one of them and does not count.
		"eapo-seed1": `{"step":1,"with":0.2,"without":0.1}` + "\n" + `{"step":2,"with":0.5,"without":0.2}` + "\n" + `{"step":3,"without":0.9}` + "\n",
		// Seed 2: −0.1 at step 1.
		"eapo-seed2": `{"step":1,"with":0.1,"without":0.2}` + "\n" + `{"step":3,"with":0.4}` + "\n",
	} {
		runs = append(runs, metricsRun(t, root, name, metrics))
	}
	got, err := Blocks(runs, []string{"with-without"}, 3, "")
	if err != nil {
		t.Fatal(err)
	}
	// Seed means 0.2 and −0.1: mean 0.05, t(0.975, 1)·0.15 = ±1.91.
	for _, want := range []string{"| with-without | steps 1–3 |", "| eapo | 0.05 [−1.86, 1.96] |"} {
		if !strings.Contains(got, want) {
			t.Errorf("the table lacks %q:\n%s", want, got)
		}
	}
	// A difference of a metric no run logs is refused by its name.
	if _, err := Blocks(runs, []string{"with-witout"}, 3, ""); err == nil || !strings.Contains(err.Error(), `"with-witout"`) {
		t.Errorf("with-witout: %v", err)
	}
}

// metricsRun loads a run named name under root whose metrics.jsonl is
// metrics, and which has nothing else.
func metricsRun(t *testing.T, root, name, metrics string) *rundir.Run {
	t.Helper()
	dir := filepath.Join(root, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, rundir.MetricsFile), metrics)
	return load(t, dir)
}
