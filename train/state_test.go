package train

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	"rlvr/method"
	"rlvr/method/eapo"
	"rlvr/method/mel"
	"rlvr/method/meml"
	"rlvr/method/part"
)

// TestStateUnderEarlierNames: a checkpoint's method state keys each part's
// state by the name it has had since its parts lived in package method
// ("*method.HardBuffer"), so that the checkpoints of runs from before the
// parts had packages of their own still resume; and the parts write their
// state under those names.
func TestStateUnderEarlierNames(t *testing.T) {
	cfg, err := LoadRLConfig("../configs/world-meml-eapo-mel.yaml", "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cfg.Resolve(); err != nil {
		t.Fatal(err)
	}
	m, _ := newMethod(t, &cfg, part.Setup{MaxLen: 512})
	rl := m.(*method.RL)
	// As a run of the recipe wrote it at step 50.
	const saved = `{"*method.Consultation":{"calls":41,"accepted":17},` +
		`"*method.HardBuffer":{"entries":[{"Example":{"ID":"world/6/1","Prompt":"Q:(3+4)*5\n","Answer":"35","Solution":"3+4=7\n7*5=35\n####35\n"},"Variant":{"Name":"E2","System":"","Suffix":"@E2\n","SingleTurn":false}}],"passes":3},` +
		`"*method.MetaExperience":{"step":50,"question":"Q:2+2\n","correct":"####4","wrong":"####5","reflection":"S:2+2=4","replay":"####4"}}`
	if err := rl.Restore(json.RawMessage(saved)); err != nil {
		t.Fatal(err)
	}
	var buf *meml.HardBuffer
	var me *mel.MetaExperience
	for _, x := range rl.Extras {
		switch x := x.(type) {
		case *meml.HardBuffer:
			buf = x
		case *mel.MetaExperience:
			me = x
		}
	}
	if buf == nil || buf.Passes != 3 || len(buf.Entries) != 1 || buf.Entries[0].Variant.Name != "E2" || buf.Entries[0].Example.Answer != "35" {
		t.Errorf("hard-example buffer %+v", buf)
	}
	if x := me.Exhibits(); len(x) != 1 || !strings.HasPrefix(x[0].Text, "step 50\n") {
		t.Errorf("meta-experience exhibits %+v", x)
	}
	if _, ok := rl.Rollout.(*eapo.Consultation); !ok {
		t.Fatalf("rollout %T", rl.Rollout)
	}
	st, err := rl.State()
	if err != nil {
		t.Fatal(err)
	}
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(st, &keys); err != nil {
		t.Fatal(err)
	}
	var names []string
	for k := range keys {
		names = append(names, k)
	}
	slices.Sort(names)
	if want := []string{"*method.Consultation", "*method.HardBuffer", "*method.MetaExperience"}; !reflect.DeepEqual(names, want) {
		t.Errorf("state keys %v, want %v", names, want)
	}
	if string(keys["*method.Consultation"]) != `{"calls":41,"accepted":17}` {
		t.Errorf("consultation totals %s", keys["*method.Consultation"])
	}
}
