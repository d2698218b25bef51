// Package verify extracts final answers from solution texts and decides
// whether two answers are equivalent: the verifier behind rlvr's verifiable
// rewards. RL with verifiable rewards is only as good as its verifier, so
// every function here is pure, deterministic, bounded in time and never
// panics, whatever its input.
//
// # Extraction
//
// [Extract] takes the final answer of a model's or a dataset's solution. The
// rules are tried in this order, and within a rule the last match wins:
//
//  1. GSM8K's "#### x" (x is the rest of the line; it must normalize to a
//     number or an expression, so a Markdown heading "#### Step 2" is
//     skipped);
//  2. \boxed{…}, \fbox{…} or \framebox{…}, with nested braces; a box left
//     unclosed (a truncated response) is ignored;
//  3. "the answer is …", "answer: …", "answer = …", "answer should be …"
//     (up to the end of the sentence or of the $…$ math that follows); a
//     phrase followed by words and no digit, five words or more or the
//     word "answer" ("the final answer is given as a number after ####",
//     "this answer is the correct answer"), states no answer and is
//     skipped;
//  4. the last number (integer, decimal, 1,000- or 1 000-style, a/b,
//     \frac{a}{b} or \cfrac{a}{b}, \sqrt{n} or 2\sqrt{n}, with a trailing
//     % kept), which [ExtractWith] can switch off. A number glued to
//     a word ("vitamin D3", "mp3") or after "#" ("horse #12") is a name and
//     is skipped; a clock time is one number, its hour when on the hour
//     ("2:00 pm" is 2, "2:30" stays "2:30").
//
// Only the last [MaxInput] bytes of a text are read.
//
// # Equivalence
//
// [Equal] and [Check] compare a predicted answer with a gold answer. Both are
// normalized first: math delimiters ($, \( \), \[ \]), \left/\right, sizing
// and spacing commands (\! \, \; \quad \displaystyle), GSM8K calculator
// annotations <<…>>, dollar signs, degree marks (^\circ) and the trailing
// period are dropped; \dfrac, \tfrac and \cfrac become \frac; \frac34 and
// \sqrt2 get braces; \text{…}, \mbox{…}, \mathrm{…}, \textbf{…} and \boxed{…}
// are unwrapped; \cdot and \times become *; thousands separators (1,000,
// 10,\!080, {,}) are removed. Then, recursively:
//
//   - a leading "x =", "x \in", "f(x) =" or "(x, y) =" is dropped (the
//     variable is remembered, see below);
//   - a worked equation whose sides are constants but the last, "1440 /
//     1440 = 1" or "3 + 4 \approx 7.0", is its last side (so "400 + 36 =
//     76" is 76, not 436);
//   - "a \cup b" is a union, \begin{pmatrix}…\end{pmatrix} a matrix,
//     "(a, b)" or "[a, b)" a tuple or interval, "\{a, b\}" a set, and
//     "a, b" (or "a; b", "a and b") a list; "(a)" is just a;
//   - in a list or a set, "a \pm b" stands for the two answers a+b and a-b;
//   - a trailing percent sign is noted; trailing unit words separated by a
//     space ("5 cm", "5 \text{ dollars}", "864 \mbox{ inches}^2"), a few
//     glued units ("5cm") and leading currency words ("Rs. 5") are dropped.
//
// Scalars are compared by value when both evaluate to constants: a small
// safe evaluator reads integers, decimals, + - * / ^, implicit products,
// \frac, \sqrt, \sqrt[n], \pi and mixed numbers, in exact rational
// arithmetic where it can and float64 where it must (roots, \pi). Two exact
// integers must be equal; otherwise numbers are equal within the
// [Options] tolerances (relative [DefaultRelTol], absolute [DefaultAbsTol]).
// Expressions in the same single-letter variables are compared by value at
// three fixed sample points in [0.3, 2.5) (so "3x + x^3 - 6" equals
// "x^3+3x-6"). Anything else is compared as a normalized string with spaces
// removed; a text answer made only of words is compared without case.
// Tuples, intervals and matrices compare element by element in order, with
// the same brackets; sets, lists and unions compare as multisets.
//
// # Conventions a user may dispute
//
// These follow the usual math-eval harnesses (Hendrycks MATH, Qwen2.5-Math,
// lm-eval) where they agree, and err towards rejecting otherwise:
//
//   - "50\%" equals 50, and, with PercentScaling (the default), also 0.5;
//     50 does not equal 0.5.
//   - Units are ignored: "5 cm" equals "5 m" and 5. So are degree marks:
//     "30^\circ" equals 30 but not \frac{\pi}{6}.
//   - The variable of "x = 5" is dropped, so "x = 5" equals 5; but when
//     both sides name a variable the names must agree: "x = 5" does not
//     equal "y = 5", and "a = 3, b = 5" does not equal "a = 5, b = 3".
//   - A comma followed by exactly three digits is a thousands separator:
//     "1,000" is 1000, never the list 1, 000; "1,5" is a list.
//   - Spaces between digits vanish: "1 000" is 1000.
//   - An integer directly before a fraction of integers is a mixed number:
//     "1\frac{4}{5}" is 9/5, not 4/5.
//   - Leading zeros do not matter ("025" equals 25, as AIME answers need),
//     nor does a ".0" (AMC's 27.0 equals 27).
//   - Exact integers never use the tolerance, so 1000000 and 1000001
//     differ; 1000000.5 and 1000001 are within 1e-6 and are equal.
//   - Decimals are exact: 0.1+0.2 equals 0.3. A rounded decimal equals a
//     fraction only within the tolerance: 0.3333333 equals 1/3, 0.33 does
//     not.
//   - A bare list is unordered: "1, 2" equals "2, 1" and "\{1, 2\}", but
//     not the ordered pair "(1, 2)". A one-element set or list equals its
//     element. A column or row vector equals the tuple of its entries.
//   - Expressions are equal as functions on the sample points: "2k+2"
//     equals "2(k+1)", and \sqrt{x^2} equals x (the points are positive).
//     A run of letters is a word, not a product: "ab" is not a*b.
//   - "i" is an ordinary variable, which makes "-2 + 7i" equal "7i - 2".
//   - Words are compared without case ("Evelyn" equals "evelyn"); single
//     letters keep their case (R is not r), and "\text{(B)}" equals "B".
//   - Numbers in other bases ("204_5") are compared as strings.
//   - The last complete box wins, even when a later sentence states another
//     answer; a response with no extractable answer scores 0.
//
// # Multiple choice and yes/no
//
// [ParseOptions] reads MathQA's options ("a ) 12 , b ) 15 , …"); [Choice]
// finds the letter a response picks ("c", "(C)", "the answer is c",
// "option c", or the value of exactly one option); [CheckChoice] compares it
// with the gold letter. [YesNo] reads yes/no/true/false from a response and
// [CheckYesNo] compares it with a gold bool (StrategyQA).
//
// # Rewards
//
// [Score] turns all this into a 0/1 reward for a [Kind] of task, with
// ok=false when the gold answer cannot be read, so that a trainer can tell
// "not applicable" from "wrong", as TRL does with None rewards.
//
// # Bounds
//
// Extraction reads at most [MaxInput] bytes; answers longer than [MaxAnswer]
// bytes are compared as plain strings; expressions are limited to 1 KiB,
// 512 syntax nodes and 64 levels of nesting, exact rationals to 4096 bits
// (beyond that they degrade to float64), structures to 8 levels and 256
// elements. Every loop is bounded by its input and every recursion by a
// depth limit. The fuzz targets FuzzExtract and FuzzCheck check that nothing
// panics, that results are deterministic and symmetric, and that an answer
// equals itself.
//
// # Measured rates
//
// TestDataset* in data_test.go measure the verifier on the shared datasets
// (../shared/data) and fail below the targets. "Gold" checks are answers
// that must verify: the dataset's own solution, and the gold answer written
// the ways solutions and models write it (\boxed{…}, "The answer is …",
// "025", "27.0", an option's letter or value, "Yes, because …").
// "Perturbed" checks are answers of really different value that must not
// verify: gold±1, 2×gold, 10×gold, −gold, with and without separators
// (GSM8K, AIME, AMC); the last integer incremented, (gold)+1, 2·gold, −gold,
// the other bracket of an interval, one element fewer (MATH-500); every
// other option by letter and by distinct value (MathQA); the negated answer
// (StrategyQA). Measured on 2026-11-22:
//
//	dataset                 gold checks  verified  perturbed  false accepts
//	gsm8k/test.jsonl               9233   100.00%      26380          0.00%
//	gsm8k/train.jsonl             52306   100.00%     149448          0.00%
//	math500/test.jsonl              500   100.00%       1888          0.00%
//	math500, rewritten             7306   100.00%          -              -
//	aime24/test.jsonl               480   100.00%        930          0.00%
//	amc23/test.jsonl                640   100.00%       1240          0.00%
//	mathqa/test.jsonl             10988   100.00%      19994          0.00%
//	strategyqa/dev.json            1832   100.00%       1832          0.00%
//	strategyqa/train.json         16488   100.00%      16488          0.00%
//
// Targets: 100% verified and 0% false accepts on GSM8K; at least 98%
// verified on MATH-500 (the solution's last \boxed{} against the answer
// field; "rewritten" writes each MATH-500 answer without spaces, without
// \left/\right, with \dfrac, as p/q or a decimal, after "x =", with a unit,
// or with its list reversed); and, as measured, 100% and 0% elsewhere.
// Informational rates, not targets: the last number of a GSM8K solution
// with its "####" line removed is the answer in 97.4% of test items
// (1285/1319) and 97.3% of train items (7269/7468) — the precision of the last-number fallback
// on well-formed reasoning; the last box of an AIME 2024 AoPS solution page
// is the answer for 30/30 items; the letter read from a MathQA rationale is
// the gold letter for 996/1000 items.
package verify
