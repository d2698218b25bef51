"""Drives `rlvr serve --tinker` with the official Tinker SDK, through its
public API only: a supervised loop and a small RL loop on one model.

    python tinker_sdk_loop.py --base-url http://127.0.0.1:8765 \\
        --model SmolLM2 --tokenizer ~/.cache/rlvr/models/SmolLM2-135M-Instruct.Q4_1 \\
        --out runs/peers/tinker

The server trains every parameter, so the training client is created with
LoRA rank 0. Token ids come from the model's own tokenizer (the local
Hugging Face directory), since the SDK's get_tokenizer would download one.

Supervised: cross_entropy + optim_step on a few chat answers, the per-token
loss reported each step. RL: sample from the current weights through a
sampling client, score the answers, check the learner's logprobs of the
sampled tokens against the sampler's, run forward_backward with
cross_entropy, importance_sampling, ppo, cispo and dro, step, save the
weights for the sampler, sample from the saved weights and check again.
Then checkpoint TTLs: saves with ttl_seconds, set_checkpoint_ttl_from_tinker_path
setting and removing one, a TTL out of bounds, and the listing's expires_at
after each. Last, two calls the server cannot honour, to see what the SDK
raises.
Everything measured goes to OUT/sdk_loop.json; with --doc, its tables are
written between the tinker markers of that file (docs/peers.md).
"""

import argparse
import json
import os
import sys
import time

os.environ.setdefault("TINKER_TELEMETRY", "0")  # the server would drop it
import docblock  # noqa: E402
import tinker  # noqa: E402
from tinker import types  # noqa: E402
from transformers import AutoTokenizer  # noqa: E402

SFT_EXAMPLES = [
    ("What is the capital of France?", "The capital of France is Paris."),
    ("What color is the sky on a clear day?", "On a clear day the sky is blue."),
    ("How many legs does a spider have?", "A spider has eight legs."),
    ("What is 2 + 2?", "2 + 2 = 4."),
]

RL_QUESTION = "What is 3 + 4? Reply with the number only."
RL_ANSWER = "7"


def chat_prompt(tok, question):
    """The question as the model's chat template renders it, ready for the answer."""
    return tok.apply_chat_template(
        [{"role": "user", "content": question}], add_generation_prompt=True, tokenize=True
    )


def sft_datum(tok, question, answer):
    """One supervised datum: the answer's tokens weigh 1, the prompt's 0."""
    prompt = chat_prompt(tok, question)
    completion = tok.encode(answer + tok.eos_token, add_special_tokens=False)
    full = prompt + completion
    weights = [0.0] * (len(prompt) - 1) + [1.0] * len(completion)
    return types.Datum(
        model_input=types.ModelInput.from_ints(full[:-1]),
        loss_fn_inputs={"target_tokens": full[1:], "weights": weights},
    )


def rl_datum(prompt, tokens, logprobs, advantage):
    """One policy-gradient datum over a sampled answer: the answer's
    positions carry the sampler's logprobs and the advantage; the prompt's
    weigh nothing."""
    full = prompt + tokens
    n_prompt = len(prompt) - 1
    return types.Datum(
        model_input=types.ModelInput.from_ints(full[:-1]),
        loss_fn_inputs={
            "target_tokens": full[1:],
            "logprobs": [0.0] * n_prompt + list(logprobs),
            "advantages": [0.0] * n_prompt + [advantage] * len(tokens),
            "weights": [0.0] * n_prompt + [1.0] * len(tokens),
        },
    )


def values(tensor):
    return [float(x) for x in tensor.tolist()]


def learner_gap(training, data, sampled):
    """The largest |learner logprob − sampler logprob| over the sampled
    tokens, from a forward pass (no gradient) of the current weights."""
    out = training.forward(data, "cross_entropy").result()
    gap = 0.0
    for datum_out, (prompt, _, logprobs) in zip(out.loss_fn_outputs, sampled):
        learner = values(datum_out["logprobs"])[len(prompt) - 1 :]
        gap = max([gap] + [abs(a - b) for a, b in zip(learner, logprobs)])
    return gap


def reward(tok, tokens):
    """1 for the right number, with a small price per token, so that a
    group's rewards differ even when every answer is right."""
    text = tok.decode(tokens, skip_special_tokens=True).strip()
    right = text.split()[:1] == [RL_ANSWER] or text.rstrip(".") == RL_ANSWER
    return (1.0 if right else 0.0) - 0.01 * len(tokens)


def sample_group(sampler, prompt, n, seed):
    resp = sampler.sample(
        prompt=types.ModelInput.from_ints(prompt),
        num_samples=n,
        sampling_params=types.SamplingParams(max_tokens=16, temperature=1.0, seed=seed),
    ).result()
    return [(prompt, list(s.tokens), list(s.logprobs)) for s in resp.sequences], [s.sequence_id for s in resp.sequences]


def supervised(training, tok, steps, lr):
    data = [sft_datum(tok, q, a) for q, a in SFT_EXAMPLES]
    n_tokens = sum(sum(values(d.loss_fn_inputs["weights"])) for d in data)
    log = []
    for step in range(steps):
        t0 = time.time()
        fb = training.forward_backward(data, "cross_entropy").result()
        opt = training.optim_step(types.AdamParams(learning_rate=lr)).result()
        loss = fb.metrics["loss:sum"] / n_tokens
        log.append({"step": step, "loss_per_token": loss, "loss_sum": fb.metrics["loss:sum"],
                    "grad_norm": (opt.metrics or {}).get("grad_norm"), "seconds": time.time() - t0})
        print(f"sft step {step}: loss/token {loss:.4f}", flush=True)
    return {"examples": len(data), "target_tokens": n_tokens, "lr": lr, "steps": log,
            "decreasing": all(b["loss_per_token"] < a["loss_per_token"] for a, b in zip(log, log[1:]))}


def rl(service, training, tok, steps, group, lr):
    prompt = chat_prompt(tok, RL_QUESTION)
    sampler = training.save_weights_and_get_sampling_client().result()
    log = []
    for step in range(steps):
        t0 = time.time()
        sampled, seq_ids = sample_group(sampler, prompt, group, seed=1000 + step)
        rewards = [reward(tok, toks) for _, toks, _ in sampled]
        mean = sum(rewards) / len(rewards)
        data = [rl_datum(p, toks, lps, r - mean) for (p, toks, lps), r in zip(sampled, rewards)]
        gap_before = learner_gap(training, data, sampled)
        losses = {}
        # Every built-in loss the server offers, on the same data; their
        # gradients add up into one optimizer step. At ratio 1 (on policy)
        # importance_sampling's loss is −Σ A and cross_entropy's −Σ logp.
        configs = [
            ("cross_entropy", None),
            ("importance_sampling", None),
            ("ppo", {"clip_low_threshold": 0.8, "clip_high_threshold": 1.2}),
            ("cispo", {"clip_low_threshold": 0.8, "clip_high_threshold": 1.2}),
            ("dro", {"beta": 0.05}),
        ]
        for fn, cfg in configs:
            fb = training.forward_backward(data, fn, cfg).result()
            losses[fn] = fb.metrics["loss:sum"]
        opt = training.optim_step(types.AdamParams(learning_rate=lr)).result()
        saved = training.save_weights_for_sampler(name=f"rl-step-{step}").result()
        sampler = service.create_sampling_client(model_path=saved.path).result()
        after, _ = sample_group(sampler, prompt, group, seed=2000 + step)
        after_data = [rl_datum(p, toks, lps, 0.0) for p, toks, lps in after]
        gap_after = learner_gap(training, after_data, after)
        entry = {
            "step": step,
            "rewards": rewards,
            "answers": [tok.decode(t, skip_special_tokens=True) for _, t, _ in sampled],
            "sequence_ids": seq_ids,
            "losses": losses,
            "sum_advantage_tokens": sum(sum(values(d.loss_fn_inputs["advantages"])) for d in data),
            "grad_norm": (opt.metrics or {}).get("grad_norm"),
            "sampler_path": saved.path,
            "max_logprob_gap_before_step": gap_before,
            "max_logprob_gap_saved_weights": gap_after,
            "rewards_from_saved_weights": [reward(tok, t) for _, t, _ in after],
            "seconds": time.time() - t0,
        }
        log.append(entry)
        print(f"rl step {step}: mean reward {mean:.3f}, losses {losses}, "
              f"logprob gap {gap_before:.2e} / {gap_after:.2e}", flush=True)
    return {"question": RL_QUESTION, "group": group, "lr": lr, "steps": log}


def checkpoint_ttls(args, training):
    """Checkpoint TTLs through the SDK: what the listing says of each
    checkpoint after each call, in whole minutes until it expires."""
    state = training.save_state("ttl-hour", ttl_seconds=3600).result().path
    training.save_weights_for_sampler("ttl-sampler", ttl_seconds=7200).result()
    kept = training.save_state("ttl-kept").result().path
    rest = tinker.RestClient(base_url=args.base_url, api_key=args.api_key)
    run_id = state.split("/")[2]

    def listing():
        now = time.time()
        return {
            c.checkpoint_id: None if c.expires_at is None else round((c.expires_at.timestamp() - now) / 60)
            for c in rest.list_checkpoints(run_id).result().checkpoints
            if c.checkpoint_id.split("/")[1].startswith("ttl-")
        }

    steps = [("saved: ttl-hour with 3600 s, ttl-sampler with 7200 s, ttl-kept without", listing())]
    rest.set_checkpoint_ttl_from_tinker_path(kept, 86400).result()
    steps.append(("set_checkpoint_ttl_from_tinker_path(ttl-kept, 86400)", listing()))
    rest.set_checkpoint_ttl_from_tinker_path(state, None).result()
    steps.append(("set_checkpoint_ttl_from_tinker_path(ttl-hour, None)", listing()))
    try:
        rest.set_checkpoint_ttl_from_tinker_path(kept, 60).result()
        refused = "accepted"
    except Exception as e:
        refused = f"{type(e).__module__}.{type(e).__name__}: {e}"
    want = [
        {"weights/ttl-hour": 60, "sampler_weights/ttl-sampler": 120, "weights/ttl-kept": None},
        {"weights/ttl-hour": 60, "sampler_weights/ttl-sampler": 120, "weights/ttl-kept": 1440},
        {"weights/ttl-hour": None, "sampler_weights/ttl-sampler": 120, "weights/ttl-kept": 1440},
    ]
    ok = [s[1] for s in steps] == want and "400" in refused
    return {"steps": steps, "ttl_60_seconds": refused, "ok": ok}


def refusals(training, tok):
    """Calls the server refuses, and what the SDK makes of them."""
    data = [sft_datum(tok, *SFT_EXAMPLES[0])]
    out = {}
    for name, fn, cfg in [("stable_reinforce", "stable_reinforce", None), ("dro without beta", "dro", None)]:
        try:
            training.forward_backward(data, fn, cfg).result()
            out[name] = "accepted"
        except Exception as e:  # the SDK's exception type is what is reported
            out[name] = f"{type(e).__module__}.{type(e).__name__}: {getattr(e, 'category', '')} {e}"
    return out


def tables(result):
    """The markdown tables of docs/peers.md's Tinker SDK section."""
    sft = result["supervised"]
    lines = [
        f"SDK {result['sdk_version']}, model {result['model']}; supervised: {sft['examples']} chat answers "
        f"({sft['target_tokens']:.0f} target tokens), cross_entropy + optim_step at lr {sft['lr']:g}.",
        "",
        "| step | loss per target token | grad norm | seconds |",
        "| ---: | ---: | ---: | ---: |",
    ]
    for s in sft["steps"]:
        lines.append(f"| {s['step']} | {s['loss_per_token']:.4f} | {s['grad_norm']:.1f} | {s['seconds']:.1f} |")
    rl_ = result["rl"]
    lines += [
        "",
        f"RL: \"{rl_['question']}\", {rl_['group']} samples per step at temperature 1, lr {rl_['lr']:g}; "
        "loss:sum of each forward_backward (all on the same data, before the step), and the largest "
        "|learner − sampler| logprob gap on the sampled tokens, before the step (current weights) and "
        "after it (samples from the weights saved for the sampler).",
        "",
        "| step | mean reward | cross_entropy | importance_sampling | ppo | cispo | dro | Σ A over tokens | gap before | gap saved weights | seconds |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for s in rl_["steps"]:
        l = s["losses"]
        mean = sum(s["rewards"]) / len(s["rewards"])
        lines.append(
            f"| {s['step']} | {mean:.3f} | {l['cross_entropy']:.3f} | {l['importance_sampling']:.4f} | {l['ppo']:.4f} "
            f"| {l['cispo']:.4f} | {l['dro']:.4f} | {s['sum_advantage_tokens']:.4f} | {s['max_logprob_gap_before_step']:.1e} "
            f"| {s['max_logprob_gap_saved_weights']:.1e} | {s['seconds']:.1f} |"
        )
    ttl = result["checkpoint_ttls"]
    names = ["weights/ttl-hour", "sampler_weights/ttl-sampler", "weights/ttl-kept"]
    lines += [
        "",
        "Checkpoint TTLs: minutes until each checkpoint expires, in the listing (list_checkpoints) after each call "
        "(— never).",
        "",
        "| call | " + " | ".join(names) + " |",
        "| --- |" + " ---: |" * len(names),
    ]
    for call, listed in ttl["steps"]:
        lines.append(f"| {call} | " + " | ".join("—" if listed.get(n) is None else str(listed[n]) for n in names) + " |")
    lines.append(f"| set_checkpoint_ttl_from_tinker_path(ttl-kept, 60) | {ttl['ttl_60_seconds']} | | |")
    lines += ["", "| refused call | what the SDK raised |", "| --- | --- |"]
    for name, what in result["refusals"].items():
        lines.append(f"| {name} | {what.split(' for self.request_id')[0]} |")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    docblock.server_flags(ap)
    ap.add_argument("--tokenizer", required=True, help="the model's Hugging Face directory")
    ap.add_argument("--sft-steps", type=int, default=5)
    ap.add_argument("--rl-steps", type=int, default=2)
    ap.add_argument("--group", type=int, default=4)
    ap.add_argument("--doc", help="rewrite the tinker tables of this file (docs/peers.md)")
    args = ap.parse_args()

    tok = AutoTokenizer.from_pretrained(os.path.expanduser(args.tokenizer))
    service = tinker.ServiceClient(base_url=args.base_url, api_key=args.api_key)
    result = {"sdk_version": tinker.__version__, "model": args.model}
    training = service.create_lora_training_client(base_model=args.model, rank=0).result()
    result["supervised"] = supervised(training, tok, args.sft_steps, lr=1e-5)
    training = service.create_lora_training_client(base_model=args.model, rank=0).result()
    result["rl"] = rl(service, training, tok, args.rl_steps, args.group, lr=1e-5)
    result["checkpoint_ttls"] = checkpoint_ttls(args, training)
    result["refusals"] = refusals(training, tok)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "sdk_loop.json"), "w") as f:
        json.dump(result, f, indent=1)
    ok = result["supervised"]["decreasing"] and result["checkpoint_ttls"]["ok"] and all(
        s["max_logprob_gap_before_step"] < 1e-3 and s["max_logprob_gap_saved_weights"] < 1e-3 for s in result["rl"]["steps"]
    )
    if args.doc:
        docblock.replace(args.doc, "tinker-table", tables(result))
    print(json.dumps({"sdk_version": result["sdk_version"], "ok": ok}))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
