package report

import "rlvr/rundir"

// Load reads the run directory dir for a report: as [rundir.Load] does,
// with the metrics that have charts of their own required to be numbers.
func Load(dir string) (*rundir.Run, error) {
	return rundir.Load(dir, chartedMetrics...)
}
