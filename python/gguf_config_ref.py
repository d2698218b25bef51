"""The config.json transformers builds from each real model's GGUF, for
format/gguf's test of its own config (format/gguf/testdata/<model>.config.json).

Usage: python gguf_config_ref.py [MODELS_DIR]
"""

import json
import os
import pathlib
import sys

from transformers import AutoConfig

d = sys.argv[1] if len(sys.argv) > 1 else os.path.expanduser("~/.cache/rlvr/models")
for name, file in {"smollm2": "SmolLM2-135M-Instruct.Q4_1.gguf", "gemma3": "gemma-3-270m-q4_k_m.gguf"}.items():
    c = AutoConfig.from_pretrained(d, gguf_file=file).to_dict()
    pathlib.Path(f"format/gguf/testdata/{name}.config.json").write_text(json.dumps(c, indent=1, sort_keys=True) + "\n")
