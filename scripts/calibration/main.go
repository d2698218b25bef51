// Command calibration prints the real models' calibration table from the
// completions rlvr eval --samples keeps (scripts/calibrate.sh): one
// markdown row per MODEL.TASK.samples.jsonl file given, with greedy
// accuracy and pass@k as proportions of problems (95% Wilson intervals),
// avg@k with its Student-t interval over problems, and the share of
// problems with a signal for GRPO (some but not all of the k samples
// right).
//
//	go run ./scripts/calibration runs/calibration/*.samples.jsonl
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"rlvr/eval"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: calibration MODEL.TASK.samples.jsonl...")
		os.Exit(2)
	}
	fmt.Println("| model | task | problems | greedy | k | pass@k | avg@k | problems with signal |")
	fmt.Println("| --- | --- | ---: | --- | ---: | --- | --- | ---: |")
	for _, path := range os.Args[1:] {
		if err := row(path); err != nil {
			fmt.Fprintln(os.Stderr, "calibration:", err)
			os.Exit(1)
		}
	}
}

// problem is what one problem's completions scored.
type problem struct {
	greedy         bool
	sampled, right int
}

func row(path string) error {
	name := strings.TrimSuffix(filepath.Base(path), ".samples.jsonl")
	dot := strings.LastIndex(name, ".")
	if dot < 0 {
		return fmt.Errorf("%s: want MODEL.TASK.samples.jsonl", path)
	}
	model, task := name[:dot], name[dot+1:]
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	byID := map[string]*problem{}
	var order []string
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<24)
	for line := 1; sc.Scan(); line++ {
		var s eval.Sample
		if err := json.Unmarshal(sc.Bytes(), &s); err != nil {
			return fmt.Errorf("%s:%d: %v", path, line, err)
		}
		p := byID[s.ID]
		if p == nil {
			p = &problem{}
			byID[s.ID] = p
			order = append(order, s.ID)
		}
		switch s.Pass {
		case "greedy":
			p.greedy = s.Reward > 0
		case "sampled":
			p.sampled++
			if s.Reward > 0 {
				p.right++
			}
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("%s: %v", path, err)
	}
	var greedy, pass, signal int
	var avg []float64
	k := 0
	for _, id := range order {
		p := byID[id]
		if k == 0 {
			k = p.sampled
		}
		if p.sampled != k {
			return fmt.Errorf("%s: problem %s has %d samples, others %d", path, id, p.sampled, k)
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
	}
	n := len(order)
	fmt.Printf("| %s | %s | %d | %s | %d | %s | %s | %d%% |\n", model, task, n,
		percent(eval.WilsonInterval(greedy, n)), k, percent(eval.WilsonInterval(pass, n)),
		percent(eval.MeanInterval(avg)), (100*signal+n/2)/n)
	return nil
}

func percent(iv eval.Interval) string {
	return fmt.Sprintf("%.1f%% [%.1f, %.1f]", 100*iv.Mean, 100*max(iv.Low, 0), 100*min(iv.High, 1))
}
