"""transformers' generate as a rollout engine, timed as rlvr's sampler is.

For each stream count, a batch of that many copies of a one-token prompt is
continued to exactly --max-new tokens at temperature 1 (no top-k, no top-p,
no stop token) with the KV cache on the CPU, in float32 or (--dtype bf16)
with the weights and activations in bfloat16, and the logprob of every
sampled token is computed from the scores generate returns, as an RL
rollout needs. One JSON line per stream count: the tokens generated, the
seconds, tokens/s. The process's peak resident memory is in the last line.

Usage: rollout_bench_transformers.py --model HF_DIR --token ID --streams 1,8,64 [--dtype bf16]
"""

import argparse
import json
import resource
import time

import torch
from transformers import AutoModelForCausalLM


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True, help="Hugging Face model directory")
    ap.add_argument("--token", type=int, required=True, help="the one-token prompt")
    ap.add_argument("--streams", default="1,8,64")
    ap.add_argument("--max-new", type=int, default=128)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--dtype", choices=["fp32", "bf16"], default="fp32")
    args = ap.parse_args()

    torch.set_num_threads(args.threads)
    dtype = torch.bfloat16 if args.dtype == "bf16" else torch.float32
    model = AutoModelForCausalLM.from_pretrained(args.model, dtype=dtype)
    model.eval()
    # No token ends a stream early: every stream makes --max-new tokens.
    model.generation_config.eos_token_id = None
    pad = model.config.pad_token_id if model.config.pad_token_id is not None else 0
    for n in (int(s) for s in args.streams.split(",")):
        torch.manual_seed(args.seed)
        ids = torch.full((n, 1), args.token, dtype=torch.long)
        start = time.perf_counter()
        with torch.inference_mode():
            out = model.generate(
                ids,
                attention_mask=torch.ones_like(ids),
                do_sample=True,
                temperature=1.0,
                top_k=0,
                top_p=1.0,
                max_new_tokens=args.max_new,
                min_new_tokens=args.max_new,
                pad_token_id=pad,
                use_cache=True,
                output_scores=True,
                return_dict_in_generate=True,
            )
            logprobs = model.compute_transition_scores(out.sequences, out.scores, normalize_logits=True)
        seconds = time.perf_counter() - start
        tokens = int(out.sequences[:, 1:].numel())
        assert logprobs.shape == (n, args.max_new) and not torch.isnan(logprobs).any()
        print(json.dumps({"engine": "transformers", "streams": n, "tokens": tokens,
                          "seconds": seconds, "tokens_per_s": tokens / seconds}), flush=True)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(json.dumps({"engine": "transformers", "peak_rss_bytes": rss}), flush=True)


if __name__ == "__main__":
    main()
