// Package report turns the directories that training runs write into an HTML
// page with charts, so that runs (GRPO, Dr.GRPO and DAPO across seeds, say)
// can be compared side by side.
//
// [Load] reads a run directory (package rundir describes it) into a
// [rundir.Run], and [Render] writes report.html and one PNG per chart. The
// known metrics of metrics.jsonl (reward_mean, accuracy, kl, step_s, …)
// have fixed charts, and must be numbers; every other number or boolean
// (plotted as 0 or 1) has a panel of its own, in a figure per prefix of its
// name (loss/pg and loss/nll in one, expert/E1/accuracy in another, names
// without a slash under "other"). The periodic evaluations of eval.jsonl
// have a chart and a summary, and the page shows the last few samples of
// each title in samples.jsonl. [Table] summarizes runs across seeds as
// markdown for write-ups. Both say, below their summaries, where each
// run's final numbers were scored and where the choice they report (the
// best expert) was made, as the runs' test lines state it ([WhereChosen]).
//
// The page is self-contained but for the PNGs beside it: inline CSS, no
// JavaScript. What loading tolerated ([rundir.Run.Warnings]) is listed on
// it.
package report
