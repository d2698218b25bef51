package task

import (
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"

	"rlvr/internal/shareddata"
)

// TestLoadSharedData loads every dataset file of the shared data folder and
// checks its count, what every example has, and a few fields.
func TestLoadSharedData(t *testing.T) {
	tests := []struct {
		name, file string
		n          int
		kind       AnswerKind
		noAnswer   []int // indexes of examples the file gives no answer
		check      func(t *testing.T, ex []Example)
	}{
		{"gsm8k", "gsm8k/train.jsonl", 7473, Math, nil, func(t *testing.T, ex []Example) {
			want(t, "answer 345", ex[345].Answer, "1,080")
			want(t, "answer 0", ex[0].Answer, "72")
			want(t, "solution 0", ex[0].Solution, "Natalia sold 48/2 = 24 clips in May.\nNatalia sold 48+24 = 72 clips altogether in April and May.")
			want(t, "raw solution 0", ex[0].Meta["raw_solution"], "Natalia sold 48/2 = <<48/2=24>>24 clips in May.\nNatalia sold 48+24 = <<48+24=72>>72 clips altogether in April and May.")
		}},
		{"gsm8k", "gsm8k/test.jsonl", 1319, Math, nil, func(t *testing.T, ex []Example) {
			want(t, "id", ex[0].ID, "gsm8k/0")
			want(t, "id last", ex[1318].ID, "gsm8k/1318")
			if !strings.HasPrefix(ex[0].Prompt, "Janet\u2019s ducks lay 16 eggs per day.") {
				t.Errorf("prompt 0 = %q", ex[0].Prompt)
			}
			want(t, "answer 0", ex[0].Answer, "18")
			want(t, "solution 0", ex[0].Solution, "Janet sells 16 - 3 - 4 = 9 duck eggs a day.\nShe makes 9 * 2 = $18 every day at the farmer\u2019s market.")
			for _, e := range ex {
				if strings.Contains(e.Solution, "<<") || strings.Contains(e.Solution, "####") {
					t.Fatalf("%s: solution %q", e.ID, e.Solution)
				}
			}
		}},
		{"gsm8k", "gsm8k/test_socratic.jsonl", 1319, Math, nil, func(t *testing.T, ex []Example) {
			want(t, "answer 0", ex[0].Answer, "18")
		}},
		{"math500", "math500/test.jsonl", 500, Math, nil, func(t *testing.T, ex []Example) {
			want(t, "id", ex[0].ID, "math500/test/precalculus/807.json")
			want(t, "answer", ex[0].Answer, `\left( 3, \frac{\pi}{2} \right)`)
			want(t, "subject", ex[0].Meta["subject"], "Precalculus")
			want(t, "level", ex[0].Meta["level"], "2")
			if !strings.HasSuffix(ex[0].Solution, `$\boxed{\left( 3, \frac{\pi}{2} \right)}.$`) {
				t.Errorf("solution = %q", ex[0].Solution)
			}
			levels := map[string]int{}
			for _, e := range ex {
				levels[e.Meta["level"]]++
			}
			want(t, "levels", levels, map[string]int{"1": 43, "2": 90, "3": 105, "4": 128, "5": 134})
		}},
		{"aime24", "aime24/test.jsonl", 30, Math, nil, func(t *testing.T, ex []Example) {
			want(t, "id", ex[0].ID, "aime24/60")
			want(t, "answer 0", ex[0].Answer, "204")
			want(t, "answer 7", ex[7].Answer, "025")
			want(t, "id 7", ex[7].ID, "aime24/67")
			if _, ok := ex[0].Meta["question"]; ok {
				t.Error(`Meta has "question", a copy of the problem`)
			}
			if !strings.HasPrefix(ex[0].Meta["url"], "https://artofproblemsolving.com/") {
				t.Errorf("url = %q", ex[0].Meta["url"])
			}
		}},
		{"amc23", "amc23/test.jsonl", 40, Math, nil, func(t *testing.T, ex []Example) {
			want(t, "id", ex[0].ID, "amc23/0")
			want(t, "answer 0", ex[0].Answer, "27.0")
			want(t, "answer 1", ex[1].Answer, "36.0")
			want(t, "solution", ex[0].Solution, "")
		}},
		{"mathqa", "mathqa/test.jsonl", 1000, MultipleChoice, nil, func(t *testing.T, ex []Example) {
			e := ex[0]
			want(t, "choices", e.Choices, []string{"12", "16", "18", "24", "26"})
			want(t, "answer", e.Answer, "a")
			want(t, "prompt", e.Prompt, "if log 8 x + log 8 1 / 6 = 1 / 3 , then the value of x is :\na) 12\nb) 16\nc) 18\nd) 24\ne) 26")
			want(t, "problem", e.Meta["problem"], "if log 8 x + log 8 1 / 6 = 1 / 3 , then the value of x is :")
			want(t, "type", e.Meta["type"], "general")
			if !strings.HasPrefix(e.Solution, "log 8 x + log 8 ( 1 / 6 )") || !strings.HasSuffix(e.Solution, "answer : a") {
				t.Errorf("solution = %q", e.Solution)
			}
			want(t, "list-form choices", ex[12].Choices, []string{"462 cm ²", "530 cm ²", "1345 cm ²", "1788 cm ²", "none"})
			want(t, "doubled-letter choices", ex[6].Choices, []string{"1055", "1215", "1065", "1070", "1080"})
			for _, e := range ex {
				if len(e.Choices) != 5 {
					t.Fatalf("%s: %d choices %q", e.ID, len(e.Choices), e.Choices)
				}
				for _, c := range e.Choices {
					if c == "" || strings.Contains(c, " ) ") || strings.HasPrefix(c, "'") {
						t.Fatalf("%s: choices %q", e.ID, e.Choices)
					}
				}
				if _, ok := e.Choice(); !ok {
					t.Fatalf("%s: answer %q is no choice", e.ID, e.Answer)
				}
			}
		}},
		{"strategyqa", "strategyqa/train.json", 2061, YesNo, nil, func(t *testing.T, ex []Example) {
			want(t, "yes answers", count(ex, func(e Example) bool { return e.Answer == "yes" }), 964)
		}},
		{"strategyqa", "strategyqa/dev.json", 229, YesNo, nil, func(t *testing.T, ex []Example) {
			e := ex[0]
			want(t, "id", e.ID, "strategyqa/e0044a7b4d146d611e73")
			want(t, "answer", e.Answer, "no")
			want(t, "solution", e.Solution, "Albany, GA has around 75,000 people Albany, NY has almost 100,000 people")
			want(t, "term", e.Meta["term"], "Albany, Georgia")
			want(t, "decomposition", strings.Split(e.Meta["decomposition"], "\n")[0], "What is the population of Albany, Georgia?")
			want(t, "yes answers", count(ex, func(e Example) bool { return e.Answer == "yes" }), 107)
		}},
		{"deepscaler", "deepscaler/test_aime.json", 30, Math, nil, func(t *testing.T, ex []Example) {
			want(t, "answer", ex[0].Answer, "204")
			want(t, "year", ex[0].Meta["year"], "2024")
			want(t, "difficulty", ex[0].Meta["difficulty"], "2.0")
		}},
		{"deepscaler", "deepscaler/test_amc.json", 83, Math, nil, func(t *testing.T, ex []Example) {
			want(t, "answer", ex[0].Answer, "142.0")
		}},
		{"deepscaler", "deepscaler/test_math.json", 500, Math, nil, func(t *testing.T, ex []Example) {
			want(t, "unique_id", ex[0].Meta["unique_id"], "test/precalculus/807.json")
		}},
		{"deepscaler", "deepscaler/train_aime.json", 975, Math, nil, func(t *testing.T, ex []Example) {
			want(t, "answer", ex[0].Answer, "60")
			want(t, "year", ex[0].Meta["year"], "1983")
			if !strings.Contains(ex[0].Solution, `\boxed{60}`) {
				t.Errorf("solution = %q", ex[0].Solution)
			}
		}},
		{"deepscaler", "deepscaler/train_math.json", 7474, Math, []int{886, 1009, 5328, 5330}, func(t *testing.T, ex []Example) {
			want(t, "answer", ex[0].Answer, "0")
			want(t, "type", ex[0].Meta["type"], "Algebra")
		}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			path := shareddata.Path(t, tt.file)
			ex, err := Load(tt.name, path)
			if err != nil {
				t.Fatal(err)
			}
			if len(ex) != tt.n {
				t.Fatalf("%d examples, want %d", len(ex), tt.n)
			}
			last := path + ":" + strconv.Itoa(len(ex)) // JSON Lines without blank lines
			if strings.HasSuffix(path, ".json") {
				last = path + ":element " + strconv.Itoa(len(ex)-1)
			}
			want(t, "source of the last example", ex[len(ex)-1].Source, last)
			ids := make(map[string]bool, len(ex))
			for i, e := range ex {
				if ids[e.ID] {
					t.Fatalf("example %d: duplicate ID %q", i, e.ID)
				}
				ids[e.ID] = true
				if !strings.HasPrefix(e.ID, tt.name+"/") || e.Prompt == "" || e.Kind != tt.kind || e.Meta["dataset"] != tt.name {
					t.Fatalf("example %d: %+v", i, e)
				}
				if (e.Answer == "") != slices.Contains(tt.noAnswer, i) {
					t.Fatalf("example %d: answer %q", i, e.Answer)
				}
			}
			tt.check(t, ex)
		})
	}
}

// TestStreamMatchesLoad reads a file through Stream, one byte at a time,
// and through the iterator, and compares with Load.
func TestStreamMatchesLoad(t *testing.T) {
	for _, c := range []struct{ name, file string }{
		{"gsm8k", "gsm8k/test.jsonl"},
		{"strategyqa", "strategyqa/dev.json"},
	} {
		t.Run(c.file, func(t *testing.T) {
			path := shareddata.Path(t, c.file)
			all, err := Load(c.name, path)
			if err != nil {
				t.Fatal(err)
			}
			f, err := os.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			var streamed []Example
			err = Stream(iotest.OneByteReader(f), c.name, func(e Example) error {
				streamed = append(streamed, e)
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			// Stream names the input by the dataset, Load by the path.
			for i := range streamed {
				if want := c.name + strings.TrimPrefix(all[i].Source, path); streamed[i].Source != want {
					t.Fatalf("example %d: source %q, want %q", i, streamed[i].Source, want)
				}
				streamed[i].Source = all[i].Source
			}
			if !reflect.DeepEqual(streamed, all) {
				t.Error("Stream and Load differ")
			}

			if _, err := f.Seek(0, 0); err != nil {
				t.Fatal(err)
			}
			r, err := NewReader(iotest.HalfReader(f), c.name)
			if err != nil {
				t.Fatal(err)
			}
			i := 0
			for e, err := range r.All() {
				if err != nil {
					t.Fatal(err)
				}
				e.Source = all[i].Source
				if !reflect.DeepEqual(e, all[i]) {
					t.Fatalf("example %d differs", i)
				}
				i++
			}
			want(t, "iterated", i, len(all))
		})
	}
}

// TestTypedLoaders checks that each typed loader reads its dataset.
func TestTypedLoaders(t *testing.T) {
	tests := []struct {
		load func(string) ([]Example, error)
		file string
		n    int
	}{
		{LoadGSM8K, "gsm8k/test.jsonl", 1319},
		{LoadMATH500, "math500/test.jsonl", 500},
		{LoadAIME24, "aime24/test.jsonl", 30},
		{LoadAMC23, "amc23/test.jsonl", 40},
		{LoadMathQA, "mathqa/test.jsonl", 1000},
		{LoadStrategyQA, "strategyqa/dev.json", 229},
		{LoadDeepScaleR, "deepscaler/test_amc.json", 83},
	}
	for _, tt := range tests {
		ex, err := tt.load(shareddata.Path(t, tt.file))
		if err != nil || len(ex) != tt.n {
			t.Errorf("%s: %d examples, %v; want %d", tt.file, len(ex), err, tt.n)
		}
	}
}

func count(ex []Example, f func(Example) bool) int {
	n := 0
	for _, e := range ex {
		if f(e) {
			n++
		}
	}
	return n
}

// want reports got != wanted.
func want[T any](t *testing.T, what string, got, wanted T) {
	t.Helper()
	if !reflect.DeepEqual(got, wanted) {
		t.Errorf("%s = %#v, want %#v", what, got, wanted)
	}
}
