"""Reference logits of the real models from transformers in bf16, for rlvr's bf16 parity test.

For every sequence of the float32 reference (checkpoint/testdata/parity/<model>.json.gz,
written by ref_logits.py: the 20 prompts and transformers' float32 greedy
continuations), it runs transformers three ways on the GGUF weights, always
with eager attention on the CPU:

  fp32      float32 weights and arithmetic (as ref_logits.py; recorded again so
            that the three runs share everything but the precision);
  autocast  float32 weights under torch.autocast("cpu", dtype=torch.bfloat16):
            PyTorch's mixed precision, what TRL's bf16=True trains with;
  bf16      the weights cast to bfloat16 (model.to(torch.bfloat16)): every
            activation in bf16 too.

At every position it records the log-sum-exp of the logits and the logits at
the 16 ids the float32 reference lists there (its top 8 and 8 probes), into
checkpoint/testdata/parity/<model>.bf16.json.gz. checkpoint's
TestRealModelParityBF16 compares rlvr's bf16 logits with them.

--prompts N records the first N prompts only (transformers' bf16 on a CPU
without bf16 instructions is slow: the bf16-weights run of Gemma 3, whose
head has 262k rows, takes hours on two busy cores).

Usage: python ref_logits_bf16.py [--models DIR] [--out checkpoint/testdata/parity] [--only smollm2] [--prompts N]
"""

import argparse
import gzip
import json
import os
import pathlib
import sys

import numpy as np
import torch
from transformers import AutoModelForCausalLM

MODELS = {
    "smollm2": "SmolLM2-135M-Instruct.Q4_1.gguf",
    "gemma3": "gemma-3-270m-q4_k_m.gguf",
}


def record(logits, positions):
    """The log-sum-exp and the logits at the reference's 16 ids, per position."""
    out = []
    for p, ref in enumerate(positions):
        row = logits[p].astype(np.float64)
        m = row.max()
        lse = float(m + np.log(np.exp(row - m).sum()))
        ids = [int(i) for i, _ in ref["top"]] + [int(i) for i, _ in ref["probe"]]
        out.append([round(lse, 5)] + [round(float(logits[p, i]), 5) for i in ids])
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default=os.path.join(os.environ.get("RLVR_CACHE", os.path.expanduser("~/.cache/rlvr")), "models"))
    ap.add_argument("--out", default="checkpoint/testdata/parity")
    ap.add_argument("--only", default="")
    ap.add_argument("--prompts", type=int, default=0, help="the first N prompts only (0: all)")
    args = ap.parse_args()
    torch.set_num_threads(max(1, os.cpu_count() or 1))
    out = pathlib.Path(args.out)
    for name, file in MODELS.items():
        if args.only and name != args.only:
            continue
        with gzip.open(out / f"{name}.json.gz", "rt") as f:
            ref = json.load(f)
        model = AutoModelForCausalLM.from_pretrained(args.models, gguf_file=file, dtype=torch.float32, attn_implementation="eager")
        model.eval()
        runs = {"fp32": [], "autocast": [], "bf16": []}
        if args.prompts:
            ref["prompts"] = ref["prompts"][:args.prompts]
        seqs = [p["prompt"] + p["continuation"] for p in ref["prompts"]]
        for mode in ("fp32", "autocast"):
            for seq, p in zip(seqs, ref["prompts"]):
                with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=mode == "autocast"):
                    logits = model(torch.tensor([seq])).logits[0].float().numpy()
                runs[mode].append(record(logits, p["positions"]))
            print(f"{name}: {mode} done", file=sys.stderr, flush=True)
        model = model.to(torch.bfloat16)
        for seq, p in zip(seqs, ref["prompts"]):
            with torch.no_grad():
                logits = model(torch.tensor([seq])).logits[0].float().numpy()
            runs["bf16"].append(record(logits, p["positions"]))
        print(f"{name}: bf16 done", file=sys.stderr, flush=True)
        doc = {"model": file, "vocab": ref["vocab"],
               "reference": "transformers %s, torch %s, eager attention, GGUF loaded by transformers; "
                            "per position: [lse, logits at the float32 reference's top 8 and 8 probe ids]" % (
                                __import__("transformers").__version__, torch.__version__),
               "runs": runs}
        with gzip.open(out / f"{name}.bf16.json.gz", "wt") as f:
            json.dump(doc, f, separators=(",", ":"))


if __name__ == "__main__":
    main()
