"""Greedy continuations from llama.cpp, the second independent reference.

For each prompt of checkpoint/testdata/parity/<model>.json.gz (the token ids
transformers was given), llamacpp_greedy (python/llamacpp_greedy.c, built by
scripts/llamacpp.sh) runs llama.cpp on the F32 GGUF of the model and
returns its greedy 64 tokens, with the end tokens of the GGUF metadata
suppressed as transformers' min_new_tokens does. The result goes to
checkpoint/testdata/parity/<model>.llamacpp.json, which rlvr's parity test
compares with its own greedy continuation.

Usage: python llamacpp_ref.py [--bin DIR] [--models DIR]   (after scripts/llamacpp.sh)
"""

import argparse
import gzip
import json
import os
import pathlib
import subprocess

from gguf import GGUFReader

cache = pathlib.Path(os.environ.get("RLVR_CACHE", os.path.expanduser("~/.cache/rlvr")))
MODELS = {
    "smollm2": "SmolLM2-135M-Instruct.Q4_1.F32.gguf",
    "gemma3": "gemma-3-270m-q4_k_m.F32.gguf",
}


def end_tokens(path):
    r = GGUFReader(path)
    ids = []
    for key in ("tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id"):
        f = r.fields.get(key)
        if f is not None:
            ids.append(int(f.parts[f.data[0]][0]))
    return sorted(set(ids))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=str(cache / "llamacpp" / "build" / "bin"))
    ap.add_argument("--models", default=str(cache / "llamacpp"))
    ap.add_argument("--out", default="checkpoint/testdata/parity")
    args = ap.parse_args()
    for name, file in MODELS.items():
        ref = json.load(gzip.open(pathlib.Path(args.out) / f"{name}.json.gz", "rt"))
        n = ref["new_tokens"]
        path = os.path.join(args.models, file)
        suppressed = end_tokens(path)
        stdin = "".join(" ".join(map(str, p["prompt"])) + "\n" for p in ref["prompts"])
        out = subprocess.run([os.path.join(args.bin, "llamacpp_greedy"), path, str(n)] + [str(i) for i in suppressed],
                             input=stdin, capture_output=True, text=True, check=True).stdout
        conts = [[int(t) for t in line.split()] for line in out.splitlines()]
        same = sum(c == p["continuation"] for c, p in zip(conts, ref["prompts"]))
        print(f"{name}: llama.cpp's greedy continuation equals transformers' on {same}/{len(conts)} prompts")
        doc = {"model": file, "reference": "llama.cpp (llama-cpp-python 0.3.36 vendored source), F32 GGUF, greedy",
               "suppressed": suppressed, "continuations": conts}
        (pathlib.Path(args.out) / f"{name}.llamacpp.json").write_text(json.dumps(doc, separators=(",", ":")) + "\n")


if __name__ == "__main__":
    main()
