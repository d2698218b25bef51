"""Token ids from Hugging Face's tokenizers for rlvr's agreement test
(format/tokenizer/agreement_test.go).

For each tokenizer: 1,200+ texts: GSM8K test questions and answers, MATH500
problems and solutions (named by file, line and field, read in place from
../shared/data, never copied), the same wrapped in the model's chat turn
markers, and Unicode edge cases written here (emoji and ZWJ sequences, CJK,
combining marks, right-to-left text, long digit runs, whitespace runs).
Writes format/tokenizer/testdata/agreement/<tokenizer>.json.gz with the ids,
and the decoding: inline for the texts written here, as a SHA-256 prefix
for dataset texts.

  smollm2: the tokenizer transformers builds from SmolLM2's GGUF, with the
           Digits pre-tokenizer of SmolLM2's published tokenizer.json
  qwen3:   ../shared/data/tokenizers/qwen3/tokenizer.json (tokenizers library)
  gemma3:  the tokenizer transformers builds from Gemma 3 270M's GGUF
           (SentencePiece BPE with byte fallback); also question-answer
           pairs in Gemma's chat turns, and SentencePiece edge cases
  llama2:  the same for the Llama 2 vocabulary of the tiny random Llama GGUF
           in ../shared/data/ollama-llama2-tiny-random, in [INST] turns
  llama2-legacy: llama2 with the normalizer of Llama 2's published
           tokenizer.json (Prepend "\u2581", Replace " ") instead of Metaspace,
           which prefixes every piece between added tokens

transformers builds Gemma's tokenizer from the GGUF metadata, renaming its
tokens of spaces and ranking merges by vocabulary position so as to match
Google's published tokenizer.json (see its integrations/gguf); that file is
not fetched here, so the reference is transformers' build.

Usage: python tokenizer_ref.py [--models DIR] [--shared ../shared/data] [NAME...]
"""

import argparse
import gzip
import hashlib
import json
import os

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


# Edge cases for SentencePiece vocabularies: their space marker, byte
# tokens, Gemma's added tokens (newline runs, HTML tags, turn markers) and
# whitespace of other kinds.
EDGE_SPM = [
    "\u2581", "\u2581\u2581x", "a\u2581b", " \u2581 ", "<0x41>", "<0x0A>", "<unk>", "<s>", "</s>", "<mask>", "<pad>",
    "<start_of_turn>", "<end_of_turn>", "<start_of_turn>user\nhi<end_of_turn>", "<unused5>", "[multimodal]",
    "<table><tr><td>1</td></tr></table>", "<h1>Title</h1>", "<b>bold</b> and <i>it</i>", "a\n\nb", "\n \n",
    "x\t\ty", "\t", " \t ", "a" + " " * 31 + "b", " " * 40, "\n" * 40, "\r\n\r\n", "\u3000full\u3000width\u3000",
    "\u00a0\u00a0", "\u2003em", "tab\tand  two", "  two leading", "trailing two  ", "\u0301", "a\u0301\u0301",
    "\U000E0001tag", "\ufffd", "\x00", "emoji \U0001F642\U0001F642\U0001F642", "\U0001F3F3\ufe0f\u200d\U0001F308 flag",
    "\u6570\u5b66 1+1=2", "x" * 200, "ab" * 150,
]


def texts(shared, spm=False):
    edge = EDGE + EDGE_SPM if spm else EDGE
    out = [{"text": t} for t in edge]
    for i in range(len(edge)):
        out.append({"text": f"The answer is {i * 7919}. {edge[i]} Done."})
    for name, fields, n in (("gsm8k/test.jsonl", ("question", "answer"), 300), ("math500/test.jsonl", ("problem", "solution"), 200)):
        with open(os.path.join(shared, name)) as f:
            for line, row in enumerate(f, 1):
                if line > n:
                    break
                for field in fields:
                    out.append({"src": f"{name}:{line}:{field}"})
                    if line <= 40:
                        out.append({"src": f"{name}:{line}:{field}", "wrap": True})
                if spm and line <= 40:
                    out.append({"chat": [f"{name}:{line}:{fields[0]}", f"{name}:{line}:{fields[1]}"]})
    return out


def field(shared, src):
    name, line, key = src.rsplit(":", 2)
    with open(os.path.join(shared, name)) as f:
        for i, row in enumerate(f, 1):
            if i == int(line):
                return json.loads(row)[key]


def resolve(shared, case, wrap, chat):
    if "text" in case:
        return case["text"]
    if "chat" in case:
        q, a = (field(shared, src) for src in case["chat"])
        return chat[0] + q + chat[1] + a + chat[2]
    t = field(shared, case["src"])
    return wrap[0] + t + wrap[1] if case.get("wrap") else t


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default=os.path.expanduser("~/.cache/rlvr/models"))
    ap.add_argument("--shared", default="../shared/data")
    ap.add_argument("names", nargs="*", help="tokenizers to write (default: all)")
    a = ap.parse_args()
    from tokenizers import Tokenizer
    from transformers import AutoTokenizer
    from tokenizers import normalizers, pre_tokenizers

    def smollm():
        tok = AutoTokenizer.from_pretrained(a.models, gguf_file="SmolLM2-135M-Instruct.Q4_1.gguf").backend_tokenizer
        # transformers' GGUF converter drops SmolLM2's Digits pre-tokenizer; the
        # published tokenizer.json (and llama.cpp's "smollm" pre-tokenizer) split
        # digits first, which changes the ids of a space run before a digit.
        tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True),
                                                     pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)])
        return tok

    chatml = ("<|im_start|>user\n", "<|im_end|>\n<|im_start|>assistant\n")
    # Gemma 3's chat template renders a user turn and a model turn so (it
    # trims the contents, which the dataset texts here do not need).
    gemma_turns = ("<bos><start_of_turn>user\n", "<end_of_turn>\n<start_of_turn>model\n", "<end_of_turn>\n")
    def llama2():
        return AutoTokenizer.from_pretrained(os.path.join(a.shared, "ollama-llama2-tiny-random"),
                                             gguf_file="llama-2-tiny-random.gguf").backend_tokenizer

    def llama2_legacy():
        tok = llama2()
        tok.normalizer = normalizers.Sequence([normalizers.Prepend("\u2581"), normalizers.Replace(" ", "\u2581")])
        tok.pre_tokenizer = None
        return tok

    toks = {
        "smollm2": (smollm, chatml, None),
        "qwen3": (lambda: Tokenizer.from_file(os.path.join(a.shared, "tokenizers/qwen3/tokenizer.json")), chatml, None),
        "gemma3": (lambda: AutoTokenizer.from_pretrained(a.models, gguf_file="gemma-3-270m-q4_k_m.gguf").backend_tokenizer,
                   gemma_turns[:2], gemma_turns),
        "llama2": (llama2, ("<s>[INST] ", " [/INST]"), ("<s>[INST] ", " [/INST] ", " </s>")),
        "llama2-legacy": (llama2_legacy, ("<s>[INST] ", " [/INST]"), ("<s>[INST] ", " [/INST] ", " </s>")),
    }
    for name, (load, wrap, chat) in toks.items():
        if a.names and name not in a.names:
            continue
        tok = load()
        out = []
        for c in texts(a.shared, spm=chat is not None):
            text = resolve(a.shared, c, wrap, chat)
            ids = tok.encode(text, add_special_tokens=False).ids
            row = dict(c, ids=ids)
            decoded = tok.decode(ids, skip_special_tokens=False)
            if "text" in c:
                row["decoded"] = decoded
            elif chat is not None:
                row["decoded_sha256"] = hashlib.sha256(decoded.encode()).hexdigest()[:16]
            out.append(row)
        doc = {"tokenizer": name, "wrap": wrap, "cases": out}
        if chat is not None:
            # What the library adds by default around a text.
            sample = "Hello world"
            doc.update(chat=chat, special_sample=sample, special_ids=tok.encode(sample).ids)
            # The merges transformers derives, in order: "a\0b" lines.
            merges = json.loads(tok.to_str())["model"]["merges"]
            doc["merges_sha256"] = hashlib.sha256("\n".join(a + "\0" + b for a, b in merges).encode()).hexdigest()
        with gzip.GzipFile(f"format/tokenizer/testdata/agreement/{name}.json.gz", "wb", mtime=0) as f:
            f.write(json.dumps(doc, ensure_ascii=False).encode())
        print(name, len(out), "texts")


if __name__ == "__main__":
    main()
