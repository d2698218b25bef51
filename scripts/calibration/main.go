// Command calibration prints the real models' calibration table from the
// completions rlvr eval --samples keeps (scripts/calibrate.sh): one
// markdown row per MODEL.TASK, pooling the parts MODEL.TASK.FROM-TO of a
// run in parts, with greedy accuracy and pass@k as proportions of
// problems (95% Wilson intervals), avg@k with its Student-t interval over
// problems, the share of problems with a signal for GRPO (some but not all
// of the k samples right), and how many of the right samples of a
// free-form task state their answer (####, \boxed, "the answer is", or the
// answer alone) rather than end on it (verify's last-number rule). A
// world row is followed by one row per level. A samples file may be
// gzip-compressed (.samples.jsonl.gz), as scripts/calibrate.sh keeps them.
//
//	go run ./scripts/calibration results/calibration/*.samples.jsonl.gz
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"rlvr/eval"
	"rlvr/internal/jsonl"
	"rlvr/internal/stats"
	"rlvr/task/world"
	"rlvr/verify"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: calibration MODEL.TASK[.FROM-TO].samples.jsonl[.gz]...")
		os.Exit(2)
	}
	fmt.Println("| model | task | problems | greedy | k | pass@k | avg@k | problems with signal | right samples stating their answer |")
	fmt.Println("| --- | --- | ---: | --- | ---: | --- | --- | ---: | ---: |")
	rows := map[string][]problem{}
	var order []string
	for _, path := range os.Args[1:] {
		key, err := rowKey(path)
		if err == nil {
			var ps []problem
			ps, err = read(path)
			if _, seen := rows[key]; !seen {
				order = append(order, key)
			}
			rows[key] = append(rows[key], ps...)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "calibration:", err)
			os.Exit(1)
		}
	}
	for _, key := range order {
		dot := strings.LastIndex(key, ".")
		model, task := key[:dot], key[dot+1:]
		err := printRow(model, task, task, rows[key])
		if err == nil && task == "world" {
			err = printLevels(model, rows[key])
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "calibration:", err)
			os.Exit(1)
		}
	}
}

// problem is what one problem's completions scored.
type problem struct {
	id             string
	greedy         bool
	sampled, right int
	stated         int // right samples whose answer is stated, not the last number
}

// rowKey is the MODEL.TASK a samples file belongs to: the parts of one
// evaluation run with --skip (named MODEL.TASK.FROM-TO) share a row.
func rowKey(path string) (string, error) {
	name := strings.TrimSuffix(strings.TrimSuffix(filepath.Base(path), jsonl.Compressed), ".samples.jsonl")
	if dot := strings.LastIndex(name, "."); dot >= 0 {
		from, to, ok := strings.Cut(name[dot+1:], "-")
		if _, err := strconv.Atoi(from); err == nil && ok {
			if _, err := strconv.Atoi(to); err == nil {
				name = name[:dot]
			}
		}
	}
	if !strings.Contains(name, ".") {
		return "", fmt.Errorf("%s: want MODEL.TASK[.FROM-TO].samples.jsonl[.gz]", path)
	}
	return name, nil
}

// read returns the problems of one samples file in their order. Problems
// are told apart by position, not ID: a file lists every problem's greedy
// completion, then each problem's k samples from index 0, in one order
// (two world problems may ask the same question).
func read(path string) ([]problem, error) {
	f, err := jsonl.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var ps []problem
	next := 0 // the problem the next sampled index 0 starts
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<24)
	for line := 1; sc.Scan(); line++ {
		var s eval.Sample
		if err := json.Unmarshal(sc.Bytes(), &s); err != nil {
			return nil, fmt.Errorf("%s:%d: %v", path, line, err)
		}
		switch s.Pass {
		case "greedy":
			if next > 0 {
				return nil, fmt.Errorf("%s:%d: a greedy completion after the samples", path, line)
			}
			ps = append(ps, problem{id: s.ID, greedy: s.Reward > 0})
		case "sampled":
			if s.Index == 0 {
				next++
			}
			if next == 0 || next > len(ps) || ps[next-1].id != s.ID {
				return nil, fmt.Errorf("%s:%d: sample of %s out of the greedy pass's order", path, line, s.ID)
			}
			p := &ps[next-1]
			p.sampled++
			if s.Reward > 0 {
				p.right++
				if stated(s.Text) {
					p.stated++
				}
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	return ps, nil
}

// stated reports whether a completion states its answer: by a marker
// verify reads, or as the whole completion (a base model's " 18" after
// "Answer:"), rather than as the last number of a text.
func stated(text string) bool {
	answer, rule := verify.Extract(text)
	switch rule {
	case verify.RuleHashes, verify.RuleBoxed, verify.RuleAnswerPhrase:
		return true
	case verify.RuleLastNumber:
		return strings.Trim(text, " \t\n$.") == answer
	}
	return false
}

// printLevels prints a world row's problems level by level.
func printLevels(model string, ps []problem) error {
	for _, level := range world.Levels {
		var at []problem
		for _, p := range ps {
			if strings.HasPrefix(p.id, "world/"+level.Name+"/") {
				at = append(at, p)
			}
		}
		if len(at) == 0 {
			continue
		}
		if err := printRow(model, "world", "world: "+level.Name, at); err != nil {
			return err
		}
	}
	return nil
}

// printRow prints the row labelled label of a model's problems of task.
func printRow(model, task, label string, ps []problem) error {
	key := model + "." + label
	var greedy, pass, signal, right, stated int
	var avg []float64
	k := 0
	for _, p := range ps {
		if k == 0 {
			k = p.sampled
		}
		if p.sampled != k {
			return fmt.Errorf("%s: problem %s has %d samples, others %d", key, p.id, p.sampled, k)
		}
		if p.greedy {
			greedy++
		}
		if p.right > 0 {
			pass++
		}
		if p.right > 0 && p.right < k {
			signal++
		}
		avg = append(avg, float64(p.right)/float64(k))
		right, stated = right+p.right, stated+p.stated
	}
	n := len(ps)
	if n == 0 {
		return fmt.Errorf("%s: no problems", key)
	}
	// A choice or a yes/no is read by its own rules, not extracted.
	statedCell := "—"
	if task != "mathqa" && task != "strategyqa" {
		statedCell = fmt.Sprintf("%d of %d", stated, right)
	}
	fmt.Printf("| %s | %s | %d | %s | %d | %s | %s | %d%% | %s |\n", model, label, n,
		stats.WilsonInterval(greedy, n).Percent(), k, stats.WilsonInterval(pass, n).Percent(),
		stats.MeanInterval(avg).Percent(), (100*signal+n/2)/n, statedCell)
	return nil
}
