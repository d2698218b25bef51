"""Token ids from Hugging Face's tokenizers for rlvr's agreement test
(format/tokenizer/agreement_test.go).

For each tokenizer: 1,200+ texts: GSM8K test questions and answers, MATH500
problems and solutions (named by file, line and field, read in place from
../shared/data, never copied), the same wrapped in the model's chat turn
markers, and Unicode edge cases written here (emoji and ZWJ sequences, CJK,
combining marks, right-to-left text, long digit runs, whitespace runs).
Writes format/tokenizer/testdata/agreement/<tokenizer>.json.gz with the ids.

  smollm2: the tokenizer transformers builds from SmolLM2's GGUF, with the
           Digits pre-tokenizer of SmolLM2's published tokenizer.json
  qwen3:   ../shared/data/tokenizers/qwen3/tokenizer.json (tokenizers library)

Usage: python tokenizer_ref.py [--models DIR] [--shared ../shared/data]
"""

import argparse
import gzip
import json
import os
import pathlib

EDGE = [
    "", " ", "  ", "\t", "\n", "\r\n", "\n\n\n", "   leading", "trailing   ", " \t mixed \n\t whitespace ",
    "a" * 300, " " * 65, "\t" * 17, "\n" * 33, "x \n y \r\n z",
    "1234567890" * 8, "3.14159265358979323846264338327950288419716939937510", "-0.000001e-10", "1,000,000.00",
    "x^2 + 3x - 4 = 0", "$\\frac{1}{2}$", "\\boxed{42}", "#### 72", "(12+7)*3-5", "١٢٣٤٥ ٦٧٨٩", "Ⅻ ½ ² ³ ⁴",
    "🙂", "👩‍👩‍👧‍👦", "👍🏽👍🏿", "🏳️‍🌈", "🇫🇷🇯🇵", "emoji🙂in🚀text", "❤️", "☃︎",
    "日本語のテキスト", "中文测试，标点符号。", "한국어 텍스트", "ｆｕｌｌｗｉｄｔｈ", "漢字とかなカナ混じり",
    "é", "e\u0301", "n\u0303o", "Å", "A\u030a", "a\u0300\u0301\u0302\u0303", "ﬁ ligature", "Ǆ ǅ ǆ",
    "مرحبا بالعالم", "שלום עולם", "mixed English ועברית", "Ελληνικά", "Русский текст", "हिन्दी", "ภาษาไทย",
    "'s 't 're 've 'm 'll 'd", "DON'T SHOUT", "it's", "I'M", "\u200b zero width", "\ufeffBOM", "\u00a0nbsp",
    "<|im_start|>", "<|im_end|>", "<|endoftext|>", "<bos>", "<not a token>", "<<>>", "{{ }}", "{% raw %}",
    "def f(x):\n    return x ** 2\n", "if (a && b) { c(); }", "SELECT * FROM t;", "https://example.com/a?b=c&d=e",
    "\x00\x01\x02", "\x7f", "\u0085", "\u2028\u2029", "\U0001F9EA\U0001FAE0", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢", "𝟘𝟙𝟚",
]


def texts(shared):
    out = [{"text": t} for t in EDGE]
    for i in range(len(EDGE)):
        out.append({"text": f"The answer is {i * 7919}. {EDGE[i]} Done."})
    for name, fields, n in (("gsm8k/test.jsonl", ("question", "answer"), 300), ("math500/test.jsonl", ("problem", "solution"), 200)):
        with open(os.path.join(shared, name)) as f:
            for line, row in enumerate(f, 1):
                if line > n:
                    break
                for field in fields:
                    out.append({"src": f"{name}:{line}:{field}"})
                    if line <= 40:
                        out.append({"src": f"{name}:{line}:{field}", "wrap": True})
    return out


def resolve(shared, case, wrap):
    if "text" in case:
        return case["text"]
    name, line, field = case["src"].rsplit(":", 2)
    with open(os.path.join(shared, name)) as f:
        for i, row in enumerate(f, 1):
            if i == int(line):
                t = json.loads(row)[field]
                return wrap[0] + t + wrap[1] if case.get("wrap") else t


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default=os.path.expanduser("~/.cache/rlvr/models"))
    ap.add_argument("--shared", default="../shared/data")
    a = ap.parse_args()
    from tokenizers import Tokenizer
    from transformers import AutoTokenizer
    from tokenizers import pre_tokenizers
    smollm = AutoTokenizer.from_pretrained(a.models, gguf_file="SmolLM2-135M-Instruct.Q4_1.gguf").backend_tokenizer
    # transformers' GGUF converter drops SmolLM2's Digits pre-tokenizer; the
    # published tokenizer.json (and llama.cpp's "smollm" pre-tokenizer) split
    # digits first, which changes the ids of a space run before a digit.
    smollm.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True),
                                                    pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)])
    toks = {
        "smollm2": (smollm,
                    ("<|im_start|>user\n", "<|im_end|>\n<|im_start|>assistant\n")),
        "qwen3": (Tokenizer.from_file(os.path.join(a.shared, "tokenizers/qwen3/tokenizer.json")),
                  ("<|im_start|>user\n", "<|im_end|>\n<|im_start|>assistant\n")),
    }
    cases = texts(a.shared)
    for name, (tok, wrap) in toks.items():
        out = []
        for c in cases:
            text = resolve(a.shared, c, wrap)
            ids = tok.encode(text, add_special_tokens=False).ids
            row = dict(c, ids=ids)
            if "text" in c:
                row["decoded"] = tok.decode(ids, skip_special_tokens=False)
            out.append(row)
        with gzip.open(f"format/tokenizer/testdata/agreement/{name}.json.gz", "wt") as f:
            json.dump({"tokenizer": name, "wrap": wrap, "cases": out}, f, ensure_ascii=False)
        print(name, len(out), "texts")


if __name__ == "__main__":
    main()
