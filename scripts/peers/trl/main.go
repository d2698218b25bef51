// Command trl runs TRL's GRPOTrainer and `rlvr train` side by side on GSM8K
// with a Hugging Face chat model (scripts/peers.sh trl; docs/peers.md, "TRL
// GRPOTrainer"):
//
//	trl run -rlvr BIN -python PY -model DIR -data DIR -out DIR -doc FILE [settings]
//	trl table -out DIR -doc FILE
//	trl reward -examples FILE
//
// run draws each seed's training questions once, renders their prompts
// through rlvr's chat template and writes them in draw order for both
// trainers; then, for every loss type and seed, it trains with each
// trainer in turn (which goes first alternates), scores every trained model
// and the starting one with the same `rlvr eval` on the same held-out
// problems, and finishes as table does. table rebuilds the tables of
// docs/peers.md, the reward curves (reward.svg) and report/ from the runs
// under -out. reward is the verifier the Python side calls: rlvr's
// eval.Reward on the examples of FILE, one {"index", "completion"} JSON
// line in, one {"reward"} line out.
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"rlvr/eval"
	"rlvr/task"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	var err error
	switch os.Args[1] {
	case "run":
		err = runCmd(os.Args[2:])
	case "table":
		err = tableCmd(os.Args[2:])
	case "reward":
		err = rewardCmd(os.Args[2:])
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "trl:", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: trl run|table|reward [flags] (see the package doc)")
	os.Exit(2)
}

// rewardRequest is a line the Python side writes: the index of the
// training example in the examples file and the completion to score.
type rewardRequest struct {
	Index      int    `json:"index"`
	Completion string `json:"completion"`
}

// rewardCmd scores completions with rlvr's reward until its input ends.
// An unreadable request or an unknown index stops it with an error: the
// trainer then fails rather than train on a made-up reward.
func rewardCmd(args []string) error {
	fs := flag.NewFlagSet("reward", flag.ExitOnError)
	path := fs.String("examples", "", "the GSM8K JSONL file the indices refer to")
	fs.Parse(args)
	examples, err := task.Load("gsm8k", *path)
	if err != nil {
		return err
	}
	in := json.NewDecoder(bufio.NewReader(os.Stdin))
	for line := 1; ; line++ {
		var req rewardRequest
		if err := in.Decode(&req); errors.Is(err, io.EOF) {
			return nil
		} else if err != nil {
			return fmt.Errorf("reward: request %d: %w", line, err)
		}
		if req.Index < 0 || req.Index >= len(examples) {
			return fmt.Errorf("reward: request %d: index %d, but %s has %d examples", line, req.Index, *path, len(examples))
		}
		r, _ := eval.Reward(examples[req.Index], req.Completion)
		// Unbuffered: the trainer waits for each answer.
		if _, err := fmt.Fprintf(os.Stdout, "{\"reward\":%g}\n", r); err != nil {
			return err
		}
	}
}
