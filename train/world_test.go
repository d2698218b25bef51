package train

import (
	"strings"
	"testing"

	"rlvr/task/world"
)

// TestWorldPretrain gives each world version its own corpus, and so its
// own cached model, and refuses a version there is not.
func TestWorldPretrain(t *testing.T) {
	v1, err := WorldPretrain(1)
	if err != nil || ConfigHash(v1) != ConfigHash(DefaultPretrain()) {
		t.Fatalf("version 1 is not the default pretraining: %v", err)
	}
	v2, err := WorldPretrain(2)
	if err != nil || v2.Corpus.Version != 2 || v2.Corpus.Habit != 0.6 || ConfigHash(v2) == ConfigHash(v1) {
		t.Fatalf("version 2: %+v, %v", v2.Corpus, err)
	}
	if v2.Steps != Version2Steps || v2.Schedule.TotalSteps != Version2Steps || v2.Schedule.WarmupSteps != v1.Schedule.WarmupSteps {
		t.Errorf("version 2 pretrains %d steps, its schedule %+v", v2.Steps, v2.Schedule)
	}
	if _, err := WorldPretrain(3); err == nil || !strings.Contains(err.Error(), "no world version 3") {
		t.Errorf("version 3: %v", err)
	}
}

// TestProblemSet fingerprints the problems and their order.
func TestProblemSet(t *testing.T) {
	a := world.Examples(1, 20, []int{5, 6})
	b := append(a[1:2:2], a[0])
	if ProblemSet(a) != ProblemSet(world.Examples(1, 20, []int{5, 6})) || ProblemSet(a[:2]) == ProblemSet(b) || ProblemSet(a) == ProblemSet(a[:19]) {
		t.Error("the fingerprint does not follow the problems")
	}
}

// TestDataWorldVersion checks data.world in a config: version 2 is
// accepted for the world and refused for a dataset, an unknown version is
// refused, and a model named beside a later version is a conflict.
func TestDataWorldVersion(t *testing.T) {
	for _, tc := range []struct {
		mod  func(*RLConfig)
		want string
	}{
		{func(c *RLConfig) { c.Data.World = 2 }, ""},
		{func(c *RLConfig) { c.Data.World = 7 }, "data.world: no world version 7"},
		{func(c *RLConfig) { c.Data.World, c.Model = 2, "some/model" }, "data.world 2 names the model"},
		{func(c *RLConfig) { c.Data = DataConfig{Name: "gsm8k", Train: "x.jsonl", World: 2} }, "data.levels and data.world are the world's"},
	} {
		c := DefaultRL()
		tc.mod(&c)
		_, err := c.Resolve()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%+v: %v", c.Data, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%+v: error %v, want %q", c.Data, err, tc.want)
		}
	}
}
