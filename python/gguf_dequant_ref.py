"""Reference dequantization from the gguf Python package (gguf-py, the
reader transformers uses), for rlvr's format/gguf tests.

  --blocks: for each of the 13 types rlvr reads, 64 blocks of random bytes
  (their fp16 scale fields set to random finite values) and gguf-py's float32
  output, to format/gguf/testdata/blocks.json.gz (needs no model);
  --models DIR: for every tensor of both real models, its type, shape and the
  sha256 of gguf-py's float32 output (little-endian), to
  format/gguf/testdata/<model>.dequant.json.

Usage: python gguf_dequant_ref.py --blocks | --models ~/.cache/rlvr/models
"""

import argparse
import base64
import gzip
import hashlib
import json
import pathlib

import numpy as np
from gguf import GGMLQuantizationType as T, GGUFReader
from gguf.quants import dequantize

OUT = pathlib.Path("format/gguf/testdata")
MODELS = {"smollm2": "SmolLM2-135M-Instruct.Q4_1.gguf", "gemma3": "gemma-3-270m-q4_k_m.gguf"}

# Block bytes and the offsets of each fp16 field (d, dmin, m) within a block.
LAYOUT = {
    T.F32: (4, []), T.F16: (2, [0]), T.BF16: (2, []),
    T.Q4_0: (18, [0]), T.Q4_1: (20, [0, 2]), T.Q5_0: (22, [0]), T.Q5_1: (24, [0, 2]), T.Q8_0: (34, [0]),
    T.Q2_K: (84, [80, 82]), T.Q3_K: (110, [108]), T.Q4_K: (144, [0, 2]), T.Q5_K: (176, [0, 2]), T.Q6_K: (210, [208]),
}


def blocks():
    rng = np.random.default_rng(7)
    cases = []
    for t, (size, halves) in LAYOUT.items():
        raw = bytearray(rng.integers(0, 256, size=64 * size, dtype=np.uint8).tobytes())
        for b in range(64):
            for off in halves:
                raw[b * size + off: b * size + off + 2] = np.float16(rng.normal() * 0.1).tobytes()
            if t == T.F32:
                raw[b * 4: b * 4 + 4] = np.float32(rng.normal()).tobytes()
            if t == T.BF16:
                raw[b * 2: b * 2 + 2] = np.float32(rng.normal()).tobytes()[2:]
        data = np.frombuffer(bytes(raw), dtype=np.uint8)
        if t == T.F32:
            out = data.view(np.float32)
        elif t == T.F16:
            out = data.view(np.float16).astype(np.float32)
        else:
            out = dequantize(data, t).astype(np.float32).reshape(-1)
        cases.append({"type": int(t), "name": t.name, "raw": base64.b64encode(bytes(raw)).decode(),
                      "want": base64.b64encode(out.astype("<f4").tobytes()).decode()})
    with gzip.open(OUT / "blocks.json.gz", "wt") as f:
        json.dump({"reference": "gguf-py dequantize", "cases": cases}, f)


def models(d):
    for name, file in MODELS.items():
        r = GGUFReader(str(pathlib.Path(d) / file))
        tensors = []
        for t in r.tensors:
            raw = np.asarray(t.data)
            if t.tensor_type in (T.F32,):
                out = raw.astype(np.float32)
            elif t.tensor_type == T.F16:
                out = raw.astype(np.float32)
            else:
                out = dequantize(raw.view(np.uint8), t.tensor_type).astype(np.float32)
            out = out.reshape(-1)
            tensors.append({"name": t.name, "type": t.tensor_type.name, "dims": [int(x) for x in t.shape],
                            "sha256": hashlib.sha256(out.astype("<f4").tobytes()).hexdigest(),
                            "first": [float(x) for x in out[:4]]})
        (OUT / f"{name}.dequant.json").write_text(json.dumps({"model": file, "reference": "gguf-py dequantize",
                                                              "tensors": tensors}, indent=0) + "\n")
        print(name, len(tensors), "tensors", sorted({t["type"] for t in tensors}))


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--blocks", action="store_true")
    ap.add_argument("--models", default="")
    a = ap.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    if a.blocks:
        blocks()
    if a.models:
        models(a.models)
