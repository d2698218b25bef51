// Package part is the registry of guidance parts: the pieces a run lists
// under parts: in its config that compose on the GRPO core (method.RL),
// such as MEML-GRPO's expert prompts or EAPO's consultation.
//
// A part is a package. It registers a Part in its init function, with the
// name that is both its entry in parts: and the key of its config
// section, and a constructor of that section: a pointer to a struct with
// yaml tags whose zero value means "the defaults". The section resolves
// its defaults against the run (Resolve) and joins the method being built
// (Join): prompt variants, a rollout, reward shapers, a filter, extra loss
// terms, the grant of a chat prompt, evaluators, and resources it opens
// and closes. A run's config resolves once into a Recipe (the objective,
// the run and the resolved sections), whose Assemble joins the parts into
// the method. The training loop knows parts only through this package,
// and a program that trains imports the parts it offers for their side
// effect, as database/sql drivers are (rlvr/method/part/all has every
// part that comes with rlvr).
//
// Parts are resolved and joined in registry order, by their Order,
// whatever order a config lists them in or their packages register them
// in: reward shapers apply, and extra loss terms are added, in that order.
package part

import (
	"cmp"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"

	"rlvr/backend"
	"rlvr/method"
	"rlvr/rundir"
)

// Part describes one guidance part.
type Part struct {
	// Name is the part's entry in parts: and its section's key, in
	// snake_case: "hard_buffer".
	Name string
	// Order places the part among the others, lowest first (a tie goes
	// by name). The parts that come with rlvr are 10 apart, in the order
	// of a step: expert_prompts 10, dynamic_sampling 20,
	// overlong_penalty 30, mutual_learning 40, hard_buffer 50,
	// consultation 60, meta_experience 70.
	Order int
	// New returns the section a listed part takes when the config has
	// none: its defaults, usually the zero section, which Resolve fills.
	New func() Section
	// Rollouts says the part works on sampled groups, which an sft run
	// does not have.
	Rollouts bool
	// DefaultFor lists the algorithms that run the part when a config
	// lists no parts at all (DAPO's own parts for algorithm dapo).
	DefaultFor []method.Algorithm
	// AdvantageNorm, when set, is the advantage normalization a run with
	// this part takes by default, given the algorithm's own; a config
	// that sets advantage_norm keeps its own.
	AdvantageNorm func(algorithm method.AdvantageNorm) method.AdvantageNorm
	// Acted reports whether a step's metrics show the part at work (a
	// consultation made, a pair reflected on): the recipes' test requires
	// it of every part a recipe lists, at some step, so that a part that
	// silently stops acting fails it.
	Acted func(metrics method.Metrics) bool
	// Columns are what the part adds to rlvr report's table of rows
	// across seeds, from the metrics it logs; Register declares them to
	// rundir, where the report reads them.
	Columns []rundir.Column
	// Records are the records its evaluators write on eval.jsonl's lines
	// (Build.Evaluators); Register declares them to rundir, where Load and
	// the report read them.
	Records []rundir.EvalRecord
}

// Section is a part's section of a run's config.
type Section interface {
	// Resolve fills the defaults that depend on the run and reports every
	// inconsistent setting through add, naming the keys as the config
	// writes them ("hard_buffer.k = 9 must be in [0, group_size)").
	Resolve(run *Run, add func(format string, args ...any))
	// Join adds the part to the method being built. It is called on a
	// resolved section.
	Join(b *Build) error
}

// Run is what a section's defaults and checks may depend on: the run's
// own knobs, resolved or as written.
type Run struct {
	Algorithm   method.Algorithm
	Steps       int // the run's length, in steps
	GroupSize   int // G
	MaxTokens   int // the response budget
	Temperature float32
	Seed        uint64
	World       bool // the built-in world, not a dataset
	Remote      bool // a remote backend, which keeps one optimizer state
	// CheckLoss reports why the backend cannot train a loss (a Tinker
	// loss_fn expresses no teacher KL); nil trains every loss.
	CheckLoss func(backend.Loss) error
	// DMEExperts is data.dme_experts: the experts of a D_ME file trained
	// behind the plain prompt, which expert prompts replace.
	DMEExperts []int
	Parts      []string // the parts listed
}

// Has says the run lists part name.
func (r *Run) Has(name string) bool { return slices.Contains(r.Parts, name) }

var registry []Part

// Register adds a part to the registry. It panics on a name already
// registered or a part without a name or constructor: a programming
// error, found at start-up.
func Register(p Part) {
	if p.Name == "" || p.New == nil {
		panic("part: Register needs a name and a constructor")
	}
	if _, ok := Lookup(p.Name); ok {
		panic("part: " + p.Name + " is registered twice")
	}
	i, _ := slices.BinarySearchFunc(registry, p, func(a, b Part) int { return cmp.Or(cmp.Compare(a.Order, b.Order), cmp.Compare(a.Name, b.Name)) })
	registry = slices.Insert(registry, i, p)
	for _, c := range p.Columns {
		c.Part = p.Name
		rundir.DeclareColumns(c)
	}
	for _, r := range p.Records {
		r.Part = p.Name
		rundir.DeclareEvalRecords(r)
	}
}

// Lookup returns the registered part of a name.
func Lookup(name string) (Part, bool) {
	for _, p := range registry {
		if p.Name == name {
			return p, true
		}
	}
	return Part{}, false
}

// Names lists the registered parts in registry order.
func Names() []string {
	out := make([]string, len(registry))
	for i, p := range registry {
		out[i] = p.Name
	}
	return out
}

// Defaults lists the parts an algorithm runs when a config lists none,
// in registry order; nil for most algorithms.
func Defaults(a method.Algorithm) []string {
	var out []string
	for _, p := range registry {
		if slices.Contains(p.DefaultFor, a) {
			out = append(out, p.Name)
		}
	}
	return out
}

// DefaultAdvantageNorm is the advantage normalization a run with parts
// takes when its config sets none: the algorithm's own, norm, as each
// listed part with an opinion changes it.
func DefaultAdvantageNorm(parts []string, norm method.AdvantageNorm) method.AdvantageNorm {
	for _, p := range registry {
		if p.AdvantageNorm != nil && slices.Contains(parts, p.Name) {
			norm = p.AdvantageNorm(norm)
		}
	}
	return norm
}

// Sections are a config's part sections by part name. A Sections value
// is shared by the copies of the config it is in: Set and Resolve return
// or store a fresh map rather than changing a shared one, as assigning a
// field of a copied struct would not change the original.
type Sections map[string]Section

// nameOf is the name of the part whose sections have the type of s.
func nameOf(s Section) (string, bool) {
	t := reflect.TypeOf(s)
	for _, p := range registry {
		if reflect.TypeOf(p.New()) == t {
			return p.Name, true
		}
	}
	return "", false
}

// Get returns the section of type S, or S's zero value (a nil pointer)
// when there is none: part.Get[*meml.HardBufferConfig](cfg.Sections).
func Get[S Section](s Sections) S {
	for _, sec := range s {
		if v, ok := sec.(S); ok {
			return v
		}
	}
	var zero S
	return zero
}

// Set stores sec under its part's name, in a fresh map. It panics on a
// section of no registered part.
func (s *Sections) Set(sec Section) {
	name, ok := nameOf(sec)
	if !ok {
		panic(fmt.Sprintf("part: %T is the section of no registered part", sec))
	}
	out := make(Sections, len(*s)+1)
	for k, v := range *s {
		out[k] = v
	}
	out[name] = sec
	*s = out
}

// Resolve checks the parts a run lists and resolves their sections: each
// listed part without a section gets its part's new one, every section
// resolves against run, and a section of a part not listed, a part not
// registered and a part that needs rollouts in an sft run are reported
// through add. It returns the resolved sections in a fresh map; they are
// copies, so that the defaults they fill stay out of the config's.
func Resolve(run *Run, sections Sections, add func(format string, args ...any)) Sections {
	for _, name := range run.Parts {
		if _, ok := Lookup(name); !ok {
			add("parts: %q is not one of %v", name, Names())
		}
	}
	out := Sections{}
	for _, p := range registry {
		sec, set := sections[p.Name]
		if !run.Has(p.Name) {
			if set {
				add("section %s is set but %s is not in parts %v", p.Name, p.Name, run.Parts)
			}
			continue
		}
		if !set || sec == nil {
			sec = p.New()
		} else {
			sec = deepCopy(reflect.ValueOf(sec)).Interface().(Section)
		}
		sec.Resolve(run, add)
		if p.Rollouts && run.Algorithm == method.SFT {
			add("part %s needs rollouts, which sft does not sample", p.Name)
		}
		out[p.Name] = sec
	}
	for name := range sections {
		if _, ok := Lookup(name); !ok {
			add("section %s: no such part (parts are %v)", name, Names())
		}
	}
	return out
}

// deepCopy returns a copy of v that shares no pointer, slice or map with
// it through exported fields.
func deepCopy(v reflect.Value) reflect.Value {
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			return v
		}
		c := reflect.New(v.Type().Elem())
		c.Elem().Set(deepCopy(v.Elem()))
		return c
	case reflect.Slice:
		if v.IsNil() {
			return v
		}
		c := reflect.MakeSlice(v.Type(), v.Len(), v.Len())
		for i := range v.Len() {
			c.Index(i).Set(deepCopy(v.Index(i)))
		}
		return c
	case reflect.Map:
		if v.IsNil() {
			return v
		}
		c := reflect.MakeMapWithSize(v.Type(), v.Len())
		for it := v.MapRange(); it.Next(); {
			c.SetMapIndex(it.Key(), deepCopy(it.Value()))
		}
		return c
	case reflect.Struct:
		c := reflect.New(v.Type()).Elem()
		c.Set(v)
		for i := range v.NumField() {
			if f := c.Field(i); f.CanSet() {
				f.Set(deepCopy(v.Field(i)))
			}
		}
		return c
	}
	return v
}

// OneOf resolves a setting, *v, that takes one of options: unset, it
// takes the first (the default); another value is reported through add,
// naming field and the options.
func OneOf(add func(string, ...any), field string, v *string, options ...string) {
	if *v == "" {
		*v = options[0]
		return
	}
	if slices.Contains(options, *v) {
		return
	}
	list := options[len(options)-1]
	if len(options) > 1 {
		list = strings.Join(options[:len(options)-1], ", ") + " or " + list
	}
	add("%s %q is not %s", field, *v, list)
}

// Real checks a real-valued setting: finite and not negative, and not zero
// unless zeroOK.
func Real(add func(string, ...any), field string, v float64, zeroOK bool) {
	if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 || v == 0 && !zeroOK {
		if zeroOK {
			add("%s = %v must be finite and not negative", field, v)
		} else {
			add("%s = %v must be finite and positive", field, v)
		}
	}
}
