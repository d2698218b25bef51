"""Takes LoRA weights trained on `rlvr serve --tinker` out as a Tinker user
does, with the official SDK and tinker-cookbook's weights module, and checks
the merged model in transformers against the server's own forward pass.

    python tinker_export.py --base-url http://127.0.0.1:8765 --model SmolLM2 \\
        --hf-dir ~/.cache/rlvr/models/SmolLM2-135M-Instruct.Q4_1 --out runs/peers/weights

A LoRA training client (rank 8) takes a few supervised steps at a learning
rate high enough to move the adapters; save_weights_external exports them;
tinker_cookbook.weights.download fetches the export through the URLs the
server hands out; tinker_cookbook.weights.build_hf_model merges them into
the base model's Hugging Face directory in float32. transformers then
scores held-out chat answers with the merged model, and the training
client's forward pass scores the same tokens: the two logprobs must agree.
The base model's logprobs show that the adapters moved the model. Last,
the training state saved beside the export is downloaded as the cookbook
downloads a save_state checkpoint (a new training client from the state,
an export encrypted to a fresh age key, decrypted on arrival): it must give
the same files, byte for byte.
Everything measured goes to OUT/export.json; with --doc, its table is
written between the tinker-export markers of that file (docs/peers.md).
"""

import argparse
import json
import os
import shutil
import sys

os.environ.setdefault("TINKER_TELEMETRY", "0")
import docblock  # noqa: E402
import tinker  # noqa: E402
from tinker_sdk_loop import sft_datum  # noqa: E402
import torch  # noqa: E402
from tinker import types  # noqa: E402
from tinker_cookbook import weights  # noqa: E402
from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: E402

TRAIN = [
    ("What is the capital of France?", "The capital of France is Paris."),
    ("How many legs does a spider have?", "A spider has eight legs."),
    ("What is 2 + 2?", "2 + 2 = 4."),
]
HELD_OUT = [
    ("What is the capital of Italy?", "The capital of Italy is Rome."),
    ("How many legs does a cat have?", "A cat has four legs."),
]


def datum(tok, question, answer):
    """tinker_sdk_loop's supervised datum, and the whole token sequence it holds."""
    d = sft_datum(tok, question, answer)
    return d, d.model_input.to_ints() + [int(d.loss_fn_inputs["target_tokens"].tolist()[-1])]


def hf_logprobs(model, full):
    """log p(full[i+1] | full[:i+1]) for every position, from a transformers model."""
    with torch.no_grad():
        logits = model(torch.tensor([full[:-1]])).logits[0].double()
    lp = torch.log_softmax(logits, dim=-1)
    return lp[torch.arange(len(full) - 1), torch.tensor(full[1:])].tolist()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    docblock.server_flags(ap)
    ap.add_argument("--hf-dir", required=True, help="the base model's Hugging Face directory")
    ap.add_argument("--rank", type=int, default=8)
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--doc")
    args = ap.parse_args()
    hf_dir = os.path.expanduser(args.hf_dir)
    tok = AutoTokenizer.from_pretrained(hf_dir)

    service = tinker.ServiceClient(base_url=args.base_url, api_key=args.api_key)
    training = service.create_lora_training_client(base_model=args.model, rank=args.rank).result()
    train = [datum(tok, q, a)[0] for q, a in TRAIN]
    losses = []
    for _ in range(args.steps):
        out = training.forward_backward(train, "cross_entropy").result()
        training.optim_step(types.AdamParams(learning_rate=args.lr)).result()
        losses.append(out.metrics.get("loss:sum"))
    saved = training.save_weights_external("final").result()
    state = training.save_state("final").result()

    shutil.rmtree(args.out, ignore_errors=True)
    adapter, merged = os.path.join(args.out, "adapter"), os.path.join(args.out, "merged")
    weights.download(tinker_path=saved.path, output_dir=adapter, base_url=args.base_url)
    # A training state's download: the cookbook loads it into a new
    # training client, exports it encrypted to a fresh age key and
    # decrypts what it downloads.
    from_state = os.path.join(args.out, "from_state")
    weights.download(tinker_path=state.path, output_dir=from_state, base_url=args.base_url)
    same = sorted(os.listdir(from_state)) == sorted(os.listdir(adapter)) and all(
        open(os.path.join(from_state, f), "rb").read() == open(os.path.join(adapter, f), "rb").read() for f in os.listdir(adapter)
    )
    weights.build_hf_model(base_model=hf_dir, adapter_path=adapter, output_path=merged, dtype="float32")

    hf = AutoModelForCausalLM.from_pretrained(merged, torch_dtype=torch.float32)
    base = AutoModelForCausalLM.from_pretrained(hf_dir, torch_dtype=torch.float32)
    held = [datum(tok, q, a) for q, a in HELD_OUT]
    fwd = training.forward([d for d, _ in held], "cross_entropy").result()
    gap, moved, n = 0.0, 0.0, 0
    for (d, full), res in zip(held, fwd.loss_fn_outputs):
        server = res["logprobs"].tolist()
        merged_lp, base_lp = hf_logprobs(hf, full), hf_logprobs(base, full)
        for a, b, c in zip(server, merged_lp, base_lp):
            gap, moved, n = max(gap, abs(a - b)), max(moved, abs(b - c)), n + 1
    result = {
        "sdk_version": tinker.__version__,
        "export": saved.path,
        "files": sorted(os.listdir(adapter)),
        "adapter_config": json.load(open(os.path.join(adapter, "adapter_config.json"))),
        "train_loss_sum": losses,
        "state": state.path,
        "state_download_equals_export": same,
        "tokens": n,
        "max_abs_logprob_gap_server_vs_merged": gap,
        "max_abs_logprob_change_merged_vs_base": moved,
    }
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "export.json"), "w") as f:
        json.dump(result, f, indent=1)
    ok = gap < 1e-3 and moved > 1e-2 and same
    if args.doc:
        docblock.replace(
            args.doc,
            "tinker-export",
            "| | |\n| --- | --- |\n"
            f"| SDK | tinker {result['sdk_version']} |\n"
            f"| adapters | rank {args.rank}, {args.steps} supervised steps at lr {args.lr:g}; files {', '.join(result['files'])} |\n"
            f"| the training state's download (loaded, exported encrypted to an age key, decrypted) | {'the export, byte for byte' if same else 'DIFFERS from the export'} |\n"
            f"| tokens scored | {n} (2 held-out chat answers, every position) |\n"
            f"| max \\|Δ logprob\\|, server's forward vs merged model in transformers | {gap:.2e} |\n"
            f"| max \\|Δ logprob\\|, merged vs base model (the adapters' effect) | {moved:.2e} |",
        )
    print(json.dumps({"ok": ok, "gap": gap, "moved": moved}))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
