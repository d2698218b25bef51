"""A learner step of a real model in PyTorch, timed as `rlvr bench engine` times rlvr's.

The model is transformers' own implementation of the model in a Hugging Face
directory, on the CPU, with every parameter trained. A step is the forward of
--batch sequences of --seq random tokens, the mean token cross-entropy, the
backward, and an AdamW step (torch.optim.AdamW, its default foreach
implementation). --precision chooses how:

  fp32      float32 weights and activations;
  autocast  float32 weights (and AdamW), the forward under
            torch.autocast("cpu", dtype=torch.bfloat16): PyTorch's mixed
            precision, what TRL's bf16=True runs on a CPU;
  bf16      the weights themselves in bfloat16 (and so AdamW's state and
            every activation): the fastest step PyTorch offers, at a
            precision below mixed precision's.

One JSON line: the median and minimum step time over --reps steps after one
warm-up step, tokens/s, and the process's peak resident memory.

Usage: learner_bench_torch.py --model HF_DIR --batch 8 --seq 256 --reps 5 [--precision autocast]
"""

import argparse
import json
import resource
import statistics
import time

import torch
from transformers import AutoModelForCausalLM


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True, help="Hugging Face model directory")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--precision", choices=["fp32", "autocast", "bf16"], default="fp32")
    args = ap.parse_args()

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    dtype = torch.bfloat16 if args.precision == "bf16" else torch.float32
    model = AutoModelForCausalLM.from_pretrained(args.model, dtype=dtype)
    model.train()
    model.config.use_cache = False
    opt = torch.optim.AdamW(model.parameters(), lr=1e-6, weight_decay=0.0)
    vocab = model.config.vocab_size
    ids = torch.randint(0, vocab, (args.batch, args.seq))

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.precision == "autocast"):
            out = model(input_ids=ids, labels=ids, use_cache=False)
        out.loss.backward()
        opt.step()
        return out.loss.item()

    step()  # warm-up: allocations, AdamW's state
    times = []
    for _ in range(args.reps):
        t0 = time.perf_counter()
        loss = step()
        times.append(time.perf_counter() - t0)
        assert loss == loss, "loss is NaN"
    med = statistics.median(times)
    print(json.dumps({
        "engine": "pytorch",
        "precision": args.precision,
        "torch": torch.__version__,
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "params": sum(p.numel() for p in model.parameters()),
        "step_s_median": med,
        "step_s_min": min(times),
        "tokens_per_s": args.batch * args.seq / med,
        "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
    }), flush=True)


if __name__ == "__main__":
    main()
