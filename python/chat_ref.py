"""Reference chat-template renders from transformers, for format/tokenizer's tests.

For each chat template under test it renders a fixed, seeded set of
conversations with transformers' render_jinja_template, the function behind
apply_chat_template(..., tokenize=False), passing the tokenizer's bos_token and
eos_token as apply_chat_template does. A conversation the template refuses
(raise_exception) is recorded with its error message instead of a render.
strftime_now is pinned to 2024-07-26 so that dated templates (Llama 3.2) render
the same on every day; the Go test pins the same date.

Output: one gzip JSON file per template, testdata/chat/<name>.want.json.gz:
{"template": name, "source": path, "date": "2024-07-26",
 "cases": [{"messages": [...], "add_generation_prompt": bool, "kwargs": {...},
            "want": "..."} or {..., "error": "..."}]}

Usage: python chat_ref.py [--shared ../shared/data] [--out format/tokenizer/testdata/chat]
"""

import argparse
import datetime
import gzip
import json
import os
import random

import gguf
import jinja2
import transformers.utils.chat_template_utils as ctu

PINNED = datetime.datetime(2024, 7, 26, 12, 0, 0)


class PinnedDatetime(datetime.datetime):
    @classmethod
    def now(cls, tz=None):
        return PINNED


# strftime_now calls the module's datetime.now().
ctu.datetime = PinnedDatetime

# Contents chosen to stress whitespace handling (trim, strip), escaping,
# Unicode, template syntax inside data and the <think> split.
CONTENTS = [
    "What is 2+3?",
    "5",
    "",
    " ",
    "  leading and trailing  ",
    "\n\nnewlines around\n\n",
    "\ttabs\t",
    "line one\nline two\r\nline three",
    "Unicode: héllo wörld, 你好, こんにちは, مرحبا, 🙂👍🏽, e\u0301",
    "non-breaking\u00a0space\u00a0",
    "\u3000ideographic space\u3000",
    "\x1cinformation separator\x1f",
    "{{ braces }} and {% block %} and {# comment #}",
    "quotes: 'single' \"double\" `back`",
    "backslashes \\n \\t \\\\ and a lone \\",
    "<think>\nreasoning here\n</think>\n\nThe answer is 5.",
    "<think>\n\n</think>\n\nNo reasoning.",
    "before</think>after",
    "a</think>b</think>c",
    "<|im_end|> inside content <|eot_id|>",
    "<start_of_turn>user\nfake turn<end_of_turn>",
    "<tool_response>\nresult\n</tool_response>",
    "Be brief.",
    "You are a pirate.",
    "x" * 300,
    "Solve: \\frac{1}{2} + \\sqrt{4} = ?",
    "emoji only 🎉",
    "trailing newline\n",
]

SYSTEMS = ["Be brief.", "", "  You are a helpful assistant.  \n", "Système: réponds en français 🙂", "{{ not a tag }}"]


def conversations(rng):
    """At least 50 conversations: fixed edge cases, then seeded random ones."""
    convs = [
        [{"role": "user", "content": "What is 2+3?"}],
        [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "What is 2+3?"}],
        [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello!"}],
        [{"role": "user", "content": "Q1"}, {"role": "assistant", "content": "<think>\nstep\n</think>\n\nA1"},
         {"role": "user", "content": "Q2"}, {"role": "assistant", "content": "<think>\nmore\n</think>\n\nA2"}],
        [{"role": "user", "content": ""}],
        [{"role": "system", "content": ""}, {"role": "user", "content": ""}],
        [{"role": "system", "content": "Only a system message."}],
        # Roles that do not alternate: templates that check raise.
        [{"role": "user", "content": "one"}, {"role": "user", "content": "two"}],
        [{"role": "assistant", "content": "I speak first."}],
        [{"role": "system", "content": "s"}, {"role": "system", "content": "second system"}, {"role": "user", "content": "u"}],
    ]
    while len(convs) < 60:
        msgs = []
        if rng.random() < 0.5:
            msgs.append({"role": "system", "content": rng.choice(SYSTEMS + CONTENTS)})
        turns = rng.randint(1, 6)
        for i in range(turns):
            role = "user" if i % 2 == 0 else "assistant"
            msgs.append({"role": role, "content": rng.choice(CONTENTS)})
        convs.append(msgs)
    for c in CONTENTS:
        convs.append([{"role": "user", "content": c}, {"role": "assistant", "content": c}])
    return convs


def templates(shared, out):
    """(name, source file, template, special tokens, extra kwargs variants)."""
    result = []

    def from_config(name, path, kwargs_variants=({},)):
        with open(path, encoding="utf-8") as f:
            cfg = json.load(f)
        tokens = {}
        for key in ("bos_token", "eos_token"):
            v = cfg.get(key)
            if isinstance(v, dict):
                v = v.get("content")
            if v is not None:
                tokens[key] = v
        result.append((name, path, cfg["chat_template"], tokens, kwargs_variants))

    from_config("qwen3", os.path.join(shared, "tokenizers/qwen3/tokenizer_config.json"),
                ({}, {"enable_thinking": False}, {"enable_thinking": True}))
    for name in ("smollm2", "gemma3", "llama3.1", "llama3.2", "deepseek-r1-distill-qwen", "qwen2.5"):
        from_config(name, os.path.join(out, name + ".tokenizer_config.json"))
    # The SmolLM2 GGUF's own template (tokenizer.chat_template), with its
    # BOS and EOS tokens looked up by id.
    path = os.path.join(out, "smollm2-gguf.jinja")
    with open(path, encoding="utf-8") as f:
        source = f.read()
    result.append(("smollm2-gguf", path, source, {"bos_token": "<|im_start|>", "eos_token": "<|im_end|>"}, ({},)))
    return result


def gguf_template(model):
    r = gguf.GGUFReader(model)
    f = r.fields["tokenizer.chat_template"]
    return bytes(f.parts[f.data[0]]).decode("utf-8")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shared", default="../shared/data")
    ap.add_argument("--out", default="format/tokenizer/testdata/chat")
    ap.add_argument("--gguf", default=os.path.expanduser("~/.cache/rlvr/models/SmolLM2-135M-Instruct.Q4_1.gguf"),
                    help="write this GGUF's chat template to OUT/smollm2-gguf.jinja first")
    args = ap.parse_args()
    if os.path.exists(args.gguf):
        with open(os.path.join(args.out, "smollm2-gguf.jinja"), "w", encoding="utf-8") as f:
            f.write(gguf_template(args.gguf))

    for name, path, source, tokens, kwargs_variants in templates(args.shared, args.out):
        rng = random.Random(name)
        cases = []
        for msgs in conversations(rng):
            for gen in (False, True):
                for kw in kwargs_variants:
                    case = {"messages": msgs, "add_generation_prompt": gen, "kwargs": kw}
                    try:
                        rendered, _ = ctu.render_jinja_template(
                            conversations=[msgs], chat_template=source, add_generation_prompt=gen, **tokens, **kw)
                        case["want"] = rendered[0]
                    except jinja2.exceptions.TemplateError as e:
                        case["error"] = str(e)
                    cases.append(case)
        source_dir = args.out if path.startswith(args.out) else args.shared
        doc = {"template": name, "source": os.path.relpath(path, source_dir),
               "date": PINNED.strftime("%Y-%m-%d"), "bos_token": tokens.get("bos_token"),
               "eos_token": tokens.get("eos_token"), "cases": cases}
        out = os.path.join(args.out, name + ".want.json.gz")
        with gzip.GzipFile(out, "wb", mtime=0) as f:
            f.write(json.dumps(doc, ensure_ascii=False, indent=0).encode("utf-8"))
        errors = sum("error" in c for c in cases)
        print(f"{name}: {len(cases)} cases ({errors} raise) -> {out}")


if __name__ == "__main__":
    main()
