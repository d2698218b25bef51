"""TRL's GRPOTrainer on a fixed list of prompts: the peer of `rlvr train` in
scripts/peers.sh trl (docs/peers.md, "TRL GRPOTrainer").

The prompts come rendered by rlvr (its chat template, its system prompt), one
JSON object a line with "index", "prompt" (text) and "prompt_ids" (rlvr's
tokens), in the order both trainers draw them: PROMPTS_PER_STEP lines per
step. TRL tokenizes the text itself; the run stops if its tokens differ from
rlvr's, so both trainers see the same prompts. The reward is rlvr's own
verifier (eval.Reward): a helper process (--reward-cmd) reads
{"index", "completion"} lines and answers {"reward"} lines.

Writes to --out: metrics.jsonl, one line per optimizer step with rlvr's metric
names (reward_mean, response_len_mean, step_s, time_rollout_s, time_verify_s,
time_learn_s, tokens_generated, peak_rss_bytes, and TRL's own logged values
under trl/), and model/, the trained model with the starting model's
tokenizer files.
"""

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import time

import torch
from datasets import Dataset
from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
from trl import GRPOConfig, GRPOTrainer

# The tokenizer and template files of the starting model, copied next to the
# trained weights: training changes no token, and rlvr reads the chat template
# from tokenizer_config.json, which transformers may write elsewhere.
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "generation_config.json")


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", required=True, help="Hugging Face model directory")
    p.add_argument("--prompts", required=True, help="JSONL of rendered prompts, in draw order")
    p.add_argument("--out", required=True, help="output directory")
    p.add_argument("--reward-cmd", required=True, help="JSON list: the verifier helper's command line")
    p.add_argument("--loss-type", required=True, choices=["grpo", "dr_grpo", "dapo"])
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--steps", type=int, required=True)
    p.add_argument("--prompts-per-step", type=int, required=True)
    p.add_argument("--group", type=int, required=True, help="num_generations (G)")
    p.add_argument("--max-tokens", type=int, required=True, help="max_completion_length")
    p.add_argument("--temperature", type=float, default=1.0)
    p.add_argument("--lr", type=float, required=True)
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--bf16", action="store_true", help="GRPOConfig(bf16=True), TRL's default: autocast over float32 weights")
    return p.parse_args()


class Verifier:
    """rlvr's verifier behind a pipe: one request line, one answer line."""

    def __init__(self, cmd):
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)
        self.seconds = 0.0  # time spent verifying, taken out of the rollout time

    def rewards(self, indices, completions):
        t = time.perf_counter()
        for i, c in zip(indices, completions):
            self.proc.stdin.write(json.dumps({"index": int(i), "completion": c}) + "\n")
        self.proc.stdin.flush()
        out = []
        for _ in completions:
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError("reward helper exited: %s" % self.proc.wait())
            out.append(float(json.loads(line)["reward"]))
        self.seconds += time.perf_counter() - t
        return out

    def close(self):
        self.proc.stdin.close()
        self.proc.wait()


class StepLog(TrainerCallback):
    """Times each optimizer step and splits it into rollout (generation and
    scoring, which TRL does in the first micro-batch of a step), verification
    and learning; writes one metrics.jsonl line per step."""

    def __init__(self, path, verifier, group):
        self.file = open(path, "w")
        self.verifier = verifier
        self.group = group
        self.reset()
        self.pending = None

    def reset(self):
        self.rollout_s = 0.0
        self.rewards = []
        self.tokens = 0
        self.completions = 0

    def on_step_begin(self, args, state, control, **kw):
        self.t0 = time.perf_counter()
        self.verify0 = self.verifier.seconds

    def on_step_end(self, args, state, control, **kw):
        step_s = time.perf_counter() - self.t0
        verify_s = self.verifier.seconds - self.verify0
        rollout_s = self.rollout_s - verify_s
        n = len(self.rewards)
        mean = sum(self.rewards) / n if n else float("nan")
        std = (sum((r - mean) ** 2 for r in self.rewards) / (n - 1)) ** 0.5 if n > 1 else 0.0
        self.pending = {
            "step": state.global_step,
            "reward_mean": mean,
            "reward_std": std,
            "accuracy": sum(r > 0 for r in self.rewards) / n if n else float("nan"),
            "response_len_mean": self.tokens / max(self.completions, 1),
            "tokens_generated": self.tokens,
            "step_s": step_s,
            "time_rollout_s": rollout_s,
            "time_verify_s": verify_s,
            "time_learn_s": step_s - self.rollout_s,
            "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        }
        self.reset()

    def on_log(self, args, state, control, logs=None, **kw):
        # TRL logs after on_step_end; its values join the step's line.
        if self.pending is None:
            return
        for k, v in (logs or {}).items():
            if isinstance(v, (int, float)):
                self.pending["trl/" + k] = v
        self.file.write(json.dumps(self.pending) + "\n")
        self.file.flush()
        self.pending = None


def main():
    a = parse_args()
    torch.set_num_threads(a.threads)
    os.makedirs(a.out, exist_ok=True)
    rows = [json.loads(line) for line in open(a.prompts)]
    need = a.steps * a.prompts_per_step
    if len(rows) < need:
        sys.exit("trl_grpo: %s has %d prompts; %d steps of %d need %d" % (a.prompts, len(rows), a.steps, a.prompts_per_step, need))
    rows = rows[:need]

    tok = AutoTokenizer.from_pretrained(a.model)
    for r in rows:
        ids = tok(text=r["prompt"])["input_ids"]  # as GRPOTrainer tokenizes a text prompt
        if ids != r["prompt_ids"]:
            sys.exit("trl_grpo: prompt %d: transformers' tokens differ from rlvr's" % r["index"])
    data = Dataset.from_list([{"prompt": r["prompt"], "index": r["index"]} for r in rows])

    verifier = Verifier(json.loads(a.reward_cmd))
    log = StepLog(os.path.join(a.out, "metrics.jsonl"), verifier, a.group)

    def gsm8k_reward(prompts, completions, index, **kw):
        r = verifier.rewards(index, completions)
        log.rewards.extend(r)
        return r

    gsm8k_reward.__name__ = "rlvr_verify"

    class TimedGRPOTrainer(GRPOTrainer):
        """GRPOTrainer that times its generation-and-scoring pass and counts
        the tokens it generated."""

        def _generate_and_score_completions(self, inputs):
            t = time.perf_counter()
            out = super()._generate_and_score_completions(inputs)
            log.rollout_s += time.perf_counter() - t
            mask = out["completion_mask"]
            log.tokens += int(mask.sum())
            log.completions += mask.shape[0]
            return out

    cfg = GRPOConfig(
        output_dir=os.path.join(a.out, "trainer"),
        use_cpu=True,
        bf16=a.bf16,
        fp16=False,
        gradient_checkpointing=False,
        seed=a.seed,
        # One optimizer step per generation batch of P prompts × G answers:
        # each micro-batch is one prompt's group, accumulated P times.
        num_generations=a.group,
        per_device_train_batch_size=a.group,
        gradient_accumulation_steps=a.prompts_per_step,
        steps_per_generation=a.prompts_per_step,
        num_iterations=1,
        max_steps=a.steps,
        shuffle_dataset=False,
        max_completion_length=a.max_tokens,
        temperature=a.temperature,
        top_p=1.0,
        top_k=0,
        min_p=None,
        repetition_penalty=1.0,
        loss_type=a.loss_type,
        # Dr.GRPO removes the std division; TRL leaves it to scale_rewards.
        scale_rewards="none" if a.loss_type == "dr_grpo" else "group",
        beta=0.0,
        epsilon=0.2,
        epsilon_high=0.28 if a.loss_type == "dapo" else 0.2,
        mask_truncated_completions=False,
        learning_rate=a.lr,
        lr_scheduler_type="constant",
        warmup_steps=0,
        weight_decay=0.0,
        adam_beta1=0.9,
        adam_beta2=0.999,
        adam_epsilon=1e-8,
        max_grad_norm=1.0,
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        dataloader_num_workers=0,
    )
    model = AutoModelForCausalLM.from_pretrained(a.model, dtype=torch.float32)
    trainer = TimedGRPOTrainer(model=model, args=cfg, reward_funcs=gsm8k_reward, train_dataset=data, processing_class=tok,
                               callbacks=[log])
    trainer.train()
    verifier.close()

    dst = os.path.join(a.out, "model")
    trainer.save_model(dst)
    for f in TOKENIZER_FILES:
        if os.path.exists(os.path.join(a.model, f)):
            shutil.copy(os.path.join(a.model, f), os.path.join(dst, f))


if __name__ == "__main__":
    main()
