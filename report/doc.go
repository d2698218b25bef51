// Package report turns the directories that training runs write into an HTML
// page with charts, so that runs (GRPO, Dr.GRPO and DAPO across seeds, say)
// can be compared side by side.
//
// A run directory holds:
//
//   - config.yaml, the resolved training config;
//   - metrics.jsonl, one flat JSON object per optimizer step: "step" and any
//     number of metrics. The known ones (reward_mean, accuracy, kl, step_s,
//     …) have fixed charts; every other number or boolean (plotted as 0 or
//     1) has a panel of its own, in a figure per prefix of its name (loss/pg
//     and loss/nll in one, expert/E1/accuracy in another, names without a
//     slash under "other"). Null or absent values are skipped, and so are
//     strings, lists and objects;
//   - eval.jsonl (optional), one JSON object per periodic evaluation;
//   - result.json (optional), the final evaluation, with a "before" object
//     for the starting model;
//   - samples.jsonl (optional), texts to read, one JSON object per line with
//     "step", "title" and "text"; the page shows the last few of each title.
//
// [Load] reads a directory into a [Run], and [Render] writes report.html and
// one PNG per chart. The page is self-contained but for the PNGs beside it:
// inline CSS, no JavaScript.
//
// A malformed record is an error that names the file and line
// ([*ParseError]), with two exceptions: a last line without its newline that
// does not parse is the record a live run is still writing, and is skipped
// with a warning; and a malformed line of samples.jsonl is skipped with a
// warning. Such warnings ([Run.Warnings]) are listed on the page.
package report
