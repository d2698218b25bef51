"""Reference RoPE inverse frequencies from transformers' own functions.

For a set of configurations (plain RoPE, linear, dynamic and llama3
scaling, and Gemma 3's global and local layers) it records the inverse
frequencies transformers computes in float32: ROPE_INIT_FUNCTIONS for the
scaled types, the rotary embedding's compute_default_rope_parameters for
plain RoPE, and Gemma3RotaryEmbedding's per-layer-type buffers. rlvr's
engine/model test (TestInvFreqMatchesTransformers) compares its own with
these within 1e-6 relative.

Usage: python rope_ref.py [--out engine/model/testdata/rope.json.gz]
"""

import argparse
import gzip
import json

import torch
from transformers import Gemma3TextConfig, LlamaConfig
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS
from transformers.models.gemma3.modeling_gemma3 import Gemma3RotaryEmbedding
from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

# Llama-family cases: name, head_dim, rope_theta, max_position_embeddings,
# rope_scaling (None for plain RoPE).
LLAMA = [
    ("default", 64, 10000.0, 2048, None),
    ("default-qwen", 128, 1000000.0, 32768, None),
    ("linear", 64, 10000.0, 4096, {"rope_type": "linear", "factor": 4.0}),
    ("linear-fraction", 32, 500000.0, 4096, {"rope_type": "linear", "factor": 2.5}),
    ("dynamic", 64, 10000.0, 2048, {"rope_type": "dynamic", "factor": 4.0}),
    # Llama 3.1 8B and Llama 3.2 1B.
    ("llama3-8b", 128, 500000.0, 131072, {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                          "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}),
    ("llama3-1b", 64, 500000.0, 131072, {"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0,
                                         "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}),
    # A short original context, so that every band holds frequencies.
    ("llama3-bands", 32, 10000.0, 1024, {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.5,
                                         "high_freq_factor": 6.0, "original_max_position_embeddings": 256}),
]


def llama_case(name, hd, theta, max_pos, scaling):
    cfg = LlamaConfig(hidden_size=hd * 2, num_attention_heads=2, head_dim=hd, rope_theta=theta,
                      max_position_embeddings=max_pos, rope_scaling=scaling)
    if scaling is None:
        inv, _ = LlamaRotaryEmbedding.compute_default_rope_parameters(cfg)
    else:
        inv, _ = ROPE_INIT_FUNCTIONS[scaling["rope_type"]](cfg, None)
    return {"name": name, "head_dim": hd, "rope_theta": theta, "max_position_embeddings": max_pos,
            "rope_scaling": scaling, "local": False, "inv_freq": [float(x) for x in inv.to(torch.float32)]}


def gemma_cases():
    out = []
    for name, scaling in [("gemma3", None), ("gemma3-linear", {"rope_type": "linear", "factor": 8.0})]:
        cfg = Gemma3TextConfig(hidden_size=512, num_attention_heads=2, head_dim=256, rope_theta=1000000.0,
                               rope_local_base_freq=10000.0, rope_scaling=scaling, num_hidden_layers=6,
                               max_position_embeddings=32768)
        rope = Gemma3RotaryEmbedding(cfg)
        for layer_type, local in [("full_attention", False), ("sliding_attention", True)]:
            inv = getattr(rope, f"{layer_type}_inv_freq")
            out.append({"name": f"{name}/{layer_type}", "head_dim": 256, "rope_theta": 1000000.0,
                        "local_rope_theta": 10000.0, "max_position_embeddings": 32768, "rope_scaling": scaling,
                        "local": local, "inv_freq": [float(x) for x in inv.to(torch.float32)]})
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="engine/model/testdata/rope.json.gz")
    args = ap.parse_args()
    cases = [llama_case(*c) for c in LLAMA] + gemma_cases()
    doc = {"reference": "transformers %s, torch %s" % (__import__("transformers").__version__, torch.__version__),
           "cases": cases}
    with gzip.open(args.out, "wt") as f:
        json.dump(doc, f, separators=(",", ":"))


if __name__ == "__main__":
    main()
