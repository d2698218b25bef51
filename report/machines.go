package report

import (
	"fmt"
	"strings"

	"rlvr/rundir"
)

// machineNotes are the table's notes on what its runs computed with
// (machine.jsonl): one note when every run says the same processor and
// kernels; otherwise one naming each engine's runs, since kernels
// that differ in the last bits make a pairing by problem compare them
// beside the methods. Runs that recorded none are named as such, and a
// table none of whose runs recorded one has no note.
func machineNotes(rows []Row) []string {
	var order []string
	runsOf := map[string][]string{}
	recorded := false
	for _, row := range rows {
		for _, r := range row.Runs {
			engine := runEngine(r)
			recorded = recorded || engine != ""
			if engine == "" {
				engine = "not recorded"
			}
			if _, seen := runsOf[engine]; !seen {
				order = append(order, engine)
			}
			runsOf[engine] = append(runsOf[engine], runLabel(row.Name, r))
		}
	}
	if !recorded {
		return nil
	}
	if len(order) == 1 {
		return []string{"Every run computed on " + order[0] + "."}
	}
	groups := make([]string, len(order))
	for i, e := range order {
		groups[i] = strings.Join(runsOf[e], ", ") + ": " + e
	}
	return []string{"The runs computed on more than one engine, whose kernels differ in the last bits. " + strings.Join(groups, "; ") + "."}
}

// runEngine is what a run computed with, each start's engine in turn
// where they differ ("… then …"); "" when it recorded none.
func runEngine(r *rundir.Run) string {
	var engines []string
	for _, m := range r.Machines {
		if e := m.Engine(); len(engines) == 0 || engines[len(engines)-1] != e {
			engines = append(engines, e)
		}
	}
	return strings.Join(engines, ", then ")
}

// runLabel names a run of a row: "grpo seed 3", or the run's directory
// name where its config gives no seed.
func runLabel(row string, r *rundir.Run) string {
	if r.Seed == "" {
		return r.Name
	}
	return fmt.Sprintf("%s seed %s", row, r.Seed)
}
