"""Reference logits and greedy continuations of the real models, from transformers.

transformers loads each GGUF file itself (its own dequantization and tensor
mapping, independent of rlvr's), in float32 on the CPU. For 20 prompts per
model it records the greedy 64-token continuation and, at every position of
prompt + continuation, the log-sum-exp of the logits, the 8 largest logits and
8 logits at fixed pseudo-random vocabulary ids. rlvr's test
(checkpoint/realmodel_test.go) compares its own logits with these at every
position, and its greedy continuation token for token.

With --full DIR it also writes every logit (float32, position-major) to
DIR/<model>.logits.f32 with an index DIR/<model>.logits.json, so that the
full-vocabulary maximum |Δlogit| can be measured (not committed: hundreds of MB).

With --hf DIR it loads a Hugging Face directory instead (a checkpoint rlvr
trained and saved), writing DIR/transformers.json.gz for
checkpoint's TestSavedCheckpointParity (run by scripts/parity.sh).

Usage: python ref_logits.py [--models DIR] [--out checkpoint/testdata/parity] [--full DIR]
       python ref_logits.py --hf DIR [--prompts N]
"""

import argparse
import gzip
import json
import os
import pathlib
import sys

import numpy as np
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

MODELS = {
    "smollm2": "SmolLM2-135M-Instruct.Q4_1.gguf",
    "gemma3": "gemma-3-270m-q4_k_m.gguf",
}

# Ten plain-text prompts and ten chats; a chat is rendered with the model's
# own template where the GGUF carries one, else with Gemma's turn markers.
PLAIN = [
    "The capital of France is",
    "def fibonacci(n):\n    ",
    "Question: Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in May. How many clips did Natalia sell altogether in April and May?\nAnswer:",
    "12 + 7 = 19\n19 * 3 = 57\n57 - 5 =",
    "Once upon a time, in a small village by the sea,",
    "日本の首都は東京です。フランスの首都は",
    "The derivative of x^2 + 3x with respect to x is",
    "  Leading spaces, tabs\tand\nnewlines   matter.",
    "List three prime numbers greater than 100: 101,",
    "Emoji test 🙂🚀 and accents: café, naïve, Ångström.",
]
CHATS = [
    [{"role": "user", "content": "What is 15 + 27?"}],
    [{"role": "user", "content": "Solve: a train travels 60 km in 1.5 hours. What is its average speed in km/h?"}],
    [{"role": "system", "content": "You are a careful math tutor. End with #### and the answer."}, {"role": "user", "content": "What is 7 times 8?"}],
    [{"role": "user", "content": "Write a haiku about autumn."}],
    [{"role": "user", "content": "Hi!"}, {"role": "assistant", "content": "Hello! How can I help you today?"}, {"role": "user", "content": "Tell me a fun fact about octopuses."}],
    [{"role": "user", "content": "Translate 'good morning' into Spanish."}],
    [{"role": "user", "content": "If x + 3 = 10, what is x? Explain briefly."}],
    [{"role": "user", "content": "Compute (12 + 7) * 3 - 5 step by step."}],
    [{"role": "system", "content": "Answer in one word."}, {"role": "user", "content": "What color is the sky on a clear day?"}],
    [{"role": "user", "content": "Is 91 a prime number?"}],
]
NEW_TOKENS = 64
TOP = 8
PROBES = 8


def render(tok, chat):
    if tok.chat_template:
        return tok.apply_chat_template(chat, tokenize=False, add_generation_prompt=True)
    # Gemma 3's turn format (its GGUF carries no template): system text goes
    # in front of the first user turn, as Gemma's published template does.
    out, system = "<bos>", ""
    for m in chat:
        if m["role"] == "system":
            system = m["content"] + "\n\n"
            continue
        role = "model" if m["role"] == "assistant" else m["role"]
        out += f"<start_of_turn>{role}\n{system}{m['content'].strip()}<end_of_turn>\n"
        system = ""
    return out + "<start_of_turn>model\n"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default=os.path.join(os.environ.get("RLVR_CACHE", os.path.expanduser("~/.cache/rlvr")), "models"))
    ap.add_argument("--out", default="checkpoint/testdata/parity")
    ap.add_argument("--full", default="")
    ap.add_argument("--only", default="")
    ap.add_argument("--hf", default="", help="a Hugging Face directory (e.g. a checkpoint rlvr trained) instead of the GGUFs; "
                    "its reference goes to DIR/transformers.json.gz")
    ap.add_argument("--prompts", type=int, default=len(PLAIN) + len(CHATS))
    args = ap.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(max(1, os.cpu_count() or 1))
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    models = {"transformers": args.hf} if args.hf else MODELS
    for name, file in models.items():
        if args.only and name != args.only:
            continue
        if args.hf:
            out = pathlib.Path(args.hf)
            tok = AutoTokenizer.from_pretrained(args.hf)
            model = AutoModelForCausalLM.from_pretrained(args.hf, dtype=torch.float32, attn_implementation="eager")
        else:
            tok = AutoTokenizer.from_pretrained(args.models, gguf_file=file)
            model = AutoModelForCausalLM.from_pretrained(args.models, gguf_file=file, dtype=torch.float32, attn_implementation="eager")
        model.eval()
        V = model.config.vocab_size
        rng = np.random.default_rng(1234)
        texts = ([(t, False) for t in PLAIN] + [(render(tok, c), True) for c in CHATS])[:args.prompts]
        prompts = []
        full_index, full_chunks = [], []
        for text, chat in texts:
            # Chat renders carry their own BOS; plain text gets the tokenizer's.
            ids = tok(text, add_special_tokens=not chat).input_ids
            x = torch.tensor([ids])
            with torch.no_grad():
                gen = model.generate(x, max_new_tokens=NEW_TOKENS, do_sample=False, min_new_tokens=NEW_TOKENS,
                                     pad_token_id=tok.pad_token_id if tok.pad_token_id is not None else 0)
                seq = gen[0].tolist()
                logits = model(torch.tensor([seq])).logits[0].float().numpy()
            positions = []
            for p in range(len(seq)):
                row = logits[p].astype(np.float64)
                m = row.max()
                lse = float(m + np.log(np.exp(row - m).sum()))
                top = np.argsort(-logits[p], kind="stable")[:TOP]
                probe = rng.integers(0, V, size=PROBES)
                positions.append({
                    "lse": lse,
                    "top": [[int(i), float(logits[p, i])] for i in top],
                    "probe": [[int(i), float(logits[p, i])] for i in probe],
                })
            prompts.append({"text": text, "prompt": ids, "continuation": seq[len(ids):], "positions": positions})
            if args.full:
                full_index.append({"offset": sum(c.shape[0] for c in full_chunks), "tokens": seq})
                full_chunks.append(logits.astype(np.float32))
            print(f"{name}: {len(prompts)}/{len(texts)} {len(seq)} tokens: {tok.decode(seq[len(ids):])!r}", file=sys.stderr)
        doc = {"model": file, "vocab": V, "new_tokens": NEW_TOKENS,
               "reference": "transformers %s, torch %s, float32, GGUF loaded by transformers" % (
                   __import__("transformers").__version__, torch.__version__),
               "prompts": prompts}
        with gzip.open(out / f"{name}.json.gz", "wt") as f:
            json.dump(doc, f, separators=(",", ":"))
        if args.full:
            d = pathlib.Path(args.full)
            d.mkdir(parents=True, exist_ok=True)
            np.concatenate(full_chunks).tofile(d / f"{name}.logits.f32")
            (d / f"{name}.logits.json").write_text(json.dumps({"vocab": V, "sequences": full_index}))


if __name__ == "__main__":
    main()
