"""Tiny random models and their logits from transformers, for rlvr's
parity tests of Gemma 3 and of Llama 3's RoPE scaling.

It builds, in float32 with fixed seeds:
  - gemma3: a Gemma3ForCausalLM of 4 layers mixing sliding and full
    attention (layer_types), a sliding window of 4 (shorter than the test
    sequences, so local masking matters), query_pre_attn_scalar unlike
    head_dim, separate RoPE bases and linear scaling on the global layers;
  - llama3: a LlamaForCausalLM with llama3 RoPE scaling whose original
    context is short enough that every frequency band is used;
with every weight drawn at random (norm weights too, so 1 + w is not 1).
Their vocabulary is rlvr's byte tokenizer's (259), so checkpoint.Open
loads the directories without a tokenizer.json. Each is saved with
save_pretrained (config.json as transformers 5 writes it, model.safetensors
in float32) under format/hf/testdata/tiny/<name>, and the logits of the
eager forward at every position of a few sequences go to
format/hf/testdata/tiny/reference.json.gz; format/hf's
TestTinyModelsMatchTransformers compares rlvr's with them.

Usage: python gemma3_ref.py [--out format/hf/testdata/tiny]
"""

import argparse
import gzip
import json
import pathlib

import torch
from transformers import Gemma3ForCausalLM, Gemma3TextConfig, LlamaConfig, LlamaForCausalLM

VOCAB = 259  # rlvr's byte tokenizer: 256 bytes, <s>, </s>, <pad>
SEQUENCES = [
    [256, 72, 101, 108, 108, 111, 44, 32, 119, 111, 114, 108, 100, 33],
    [256, 49, 50, 43, 55],
    [256] + [(37 * i + 11) % 256 for i in range(30)],
]


def gemma3():
    cfg = Gemma3TextConfig(
        vocab_size=VOCAB, hidden_size=32, intermediate_size=48, num_hidden_layers=4,
        num_attention_heads=2, num_key_value_heads=1, head_dim=16, max_position_embeddings=64,
        sliding_window=4, layer_types=["sliding_attention", "full_attention", "sliding_attention", "sliding_attention"],
        query_pre_attn_scalar=24, rope_theta=1000000.0, rope_local_base_freq=10000.0,
        rope_scaling={"rope_type": "linear", "factor": 4.0}, rms_norm_eps=1e-6,
        bos_token_id=256, eos_token_id=257, pad_token_id=258, attn_implementation="eager")
    return Gemma3ForCausalLM(cfg)


def llama3():
    cfg = LlamaConfig(
        vocab_size=VOCAB, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64, rope_theta=500000.0,
        rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                      "original_max_position_embeddings": 32},
        rms_norm_eps=1e-5, bos_token_id=256, eos_token_id=257, tie_word_embeddings=False,
        attn_implementation="eager")
    return LlamaForCausalLM(cfg)


def randomize(model, seed):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            std = 0.3 if p.dim() == 1 else 0.15
            p.copy_(torch.randn(p.shape, generator=g) * std)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="format/hf/testdata/tiny")
    args = ap.parse_args()
    out = pathlib.Path(args.out)
    torch.manual_seed(0)
    doc = {"reference": "transformers %s, torch %s, float32, eager attention" % (
        __import__("transformers").__version__, torch.__version__), "models": {}}
    for seed, (name, build) in enumerate([("gemma3", gemma3), ("llama3", llama3)]):
        model = build()
        randomize(model, seed + 1)
        model.eval()
        model.save_pretrained(out / name, safe_serialization=True)
        logits = []
        for seq in SEQUENCES:
            with torch.no_grad():
                z = model(torch.tensor([seq])).logits[0].float()
            # Nine significant digits hold a float32 exactly.
            logits.append([[float("%.9g" % v) for v in row] for row in z])
        doc["models"][name] = {"sequences": SEQUENCES, "logits": logits}
    with gzip.open(out / "reference.json.gz", "wt") as f:
        json.dump(doc, f, separators=(",", ":"))


if __name__ == "__main__":
    main()
