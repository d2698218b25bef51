// Package report turns the directories that training runs write into an HTML
// page with charts, so that runs (GRPO, Dr.GRPO and DAPO across seeds, say)
// can be compared side by side.
//
// A run directory holds:
//
//   - config.yaml, the resolved training config;
//   - metrics.jsonl, one JSON object per optimizer step (reward_mean,
//     accuracy, kl, step_s, …; null or absent values are skipped, and keys
//     beyond the known ones are charted too);
//   - eval.jsonl (optional), one JSON object per periodic evaluation;
//   - result.json (optional), the final evaluation, with a "before" object
//     for the starting model.
//
// [Load] reads a directory into a [Run], and [Render] writes report.html and
// one PNG per chart. The page is self-contained but for the PNGs beside it:
// inline CSS, no JavaScript.
//
// A malformed record is an error that names the file and line
// ([*ParseError]), with one exception: a last line without its newline that
// does not parse is the record a live run is still writing, and is skipped
// with a warning. Such warnings ([Run.Warnings]) are listed on the page.
package report
