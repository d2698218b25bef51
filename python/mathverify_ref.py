"""Math-Verify's verdicts on the pairs rlvr judged, for scripts/peers.sh.

Reads DIR/pairs.jsonl (written by `go run ./scripts/peers/mathverify pairs`)
and writes DIR/mathverify.jsonl, one verdict per pair in the same order, and
DIR/mathverify.json, the timing over all pairs.

Each pair is judged as Math-Verify's README does it:

    gold = parse("$" + gold_answer.strip() + "$")
    pred = parse(text)
    verify(gold, pred)

with parse's default extraction config for both, [LatexExtractionConfig(),
ExprExtractionConfig()], and verify's defaults (float_rounding=6,
strict=True). Why those: the texts are LaTeX solutions (MATH, AIME) and
plain-text ones (GSM8K, SmolLM2's completions, which rarely box their
answer), so both the LaTeX and the plain-expression extractors are needed;
the default LaTeX config reads "final answer is"-style anchors first, then
\\boxed{}, then any math without an anchor, as rlvr's Extract does in its
own order. The gold answer is wrapped in $...$ because a bare
"\\frac{1}{2}" or "p - q" is found by neither extractor (the README writes
gold as "$...$" too), and trimmed first, as rlvr trims it (DeepScaleR's
"\n\\begin{pmatrix}...\n" is misread untrimmed). The timing covers the two
parses and verify, per pair, in this one process, as rlvr's covers
eval.Reward.

Usage: python python/mathverify_ref.py DIR
"""

import json
import sys
import time
from importlib.metadata import version

from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse, verify

CONFIG = [LatexExtractionConfig(), ExprExtractionConfig()]


def shown(parsed):
    """What parse read, for the disagreement list: the value, then the string
    it was read from."""
    return " | ".join(str(x) for x in parsed)


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: mathverify_ref.py DIR")
    d = sys.argv[1]
    with open(f"{d}/pairs.jsonl") as f:
        pairs = [json.loads(line) for line in f]
    out = []
    spent = 0.0
    for p in pairs:
        err = ""
        t = time.perf_counter()
        try:
            gold = parse("$" + p["gold"].strip() + "$", extraction_config=CONFIG)
            pred = parse(p["text"], extraction_config=CONFIG)
            ok = verify(gold, pred)
        except Exception as e:  # raise_on_error is off; kept as a guard
            gold, pred, ok, err = [], [], False, repr(e)
        spent += time.perf_counter() - t
        v = {"set": p["set"], "id": p["id"], "mv": int(bool(ok)),
             "gold_parsed": shown(gold), "pred_parsed": shown(pred)}
        if err:
            v["error"] = err
        out.append(v)
    with open(f"{d}/mathverify.jsonl", "w") as f:
        for v in out:
            f.write(json.dumps(v, ensure_ascii=False) + "\n")
    timing = {"verifier": "math-verify " + version("math-verify"),
              "pairs": len(pairs), "seconds": spent,
              "verdicts_per_second": len(pairs) / spent if spent else 0.0, "repeats": 1}
    with open(f"{d}/mathverify.json", "w") as f:
        json.dump(timing, f, indent=2)
        f.write("\n")
    print(f"mathverify_ref: {len(pairs)} pairs, {timing['verdicts_per_second']:.1f} verdicts/s", file=sys.stderr)


if __name__ == "__main__":
    main()
