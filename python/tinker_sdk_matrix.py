"""Drives every public call of the Tinker SDK against `rlvr serve --tinker`,
and says of each whether the server served it, refused it as expected, or
did something else. One process, one server:

    python tinker_sdk_matrix.py --base-url http://127.0.0.1:8765 --api-key tml-k \\
        --model tiny --out runs/peers/tinker-matrix [--doc docs/scale-out.md]

The served model is any small one (token ids below 256 are used), served
under its directory's path, which should hold a Hugging Face tokenizer (the
SDK's SamplingClient.get_tokenizer loads the base model's name itself); the
matrix makes five training clients, so the server needs --max-models 5 or
more. Each row
of the matrix is {call, expect, got, detail}: expect is "served" or
"refused"; got is "served", "refused" (the SDK raised the error the server
gives for it), "error" (anything else) or "not run" (with why: the custom
losses need torch, which the SDK imports for them). The matrix goes to
OUT/matrix.json, and with --doc its table between the tinker-matrix
markers of that file. The exit status is 0 when every row got what it
expected (or was not run for that reason).
"""

import argparse
import json
import os
import pickle
import sys
import traceback
import urllib.request
import warnings
from datetime import date, timedelta

os.environ.setdefault("TINKER_TELEMETRY", "0")  # the server would drop it
# Deprecated forms of calls are still public calls: the matrix makes them.
warnings.simplefilter("ignore", FutureWarning)
warnings.simplefilter("ignore", DeprecationWarning)
import docblock  # noqa: E402
import numpy as np  # noqa: E402
import tinker  # noqa: E402
from tinker import types  # noqa: E402

ROWS = []


class Refused(Exception):
    """What a call expected to be refused raised: the SDK's error."""


def row(call, expect, fn, refusal=None):
    """Runs fn and records the row. A served call returns (optionally) a
    detail string and raises on a wrong answer; a refused call must raise
    an error whose text holds refusal."""
    entry = {"call": call, "expect": expect}
    try:
        detail = fn()
        entry["got"], entry["detail"] = "served", detail or ""
    except NotRun as e:
        entry["got"], entry["detail"] = "not run", str(e)
    except Exception as e:  # the SDK's exception is what is reported
        text = f"{type(e).__name__}: {e}"
        if expect == "refused" and refusal and refusal in str(e):
            entry["got"] = "refused"
        else:
            entry["got"] = "error"
            text += "\n" + traceback.format_exc(limit=4)
        entry["detail"] = text.split(" for self.request_id")[0][:600]
    ROWS.append(entry)
    print(f"{entry['got']:>8}  {call}", flush=True)
    return entry


class NotRun(Exception):
    pass


def check(cond, what):
    if not cond:
        raise AssertionError(what)


def datum(tokens, **inputs):
    """A datum over tokens: input tokens[:-1], targets tokens[1:], and the
    other loss_fn_inputs as float32 arrays."""
    d = {"target_tokens": np.array(tokens[1:], dtype=np.int64)}
    for k, v in inputs.items():
        d[k] = np.array(v, dtype=np.float32)
    return types.Datum(model_input=types.ModelInput.from_ints(tokens[:-1]), loss_fn_inputs=d)


SEQS = [[72, 101, 108, 108, 111, 33, 10], [87, 111, 114, 108, 100, 10], [65, 66, 67, 68, 69, 70, 71, 72]]
PROMPT = types.ModelInput.from_ints([72, 105, 32])
PARAMS = types.SamplingParams(max_tokens=6, temperature=1.0, seed=7)


def values(t):
    return [float(x) for x in t.tolist()]


def gspo_reference(lp, q, adv, w, mask, low, high):
    """Tinker's GSPO-token loss per position (numpy): the sequence ratio
    over the masked positions, clipped as ppo, times the weights."""
    lp, q, adv, w, mask = (np.asarray(x, dtype=np.float64) for x in (lp, q, adv, w, mask))
    s = np.exp(np.mean((lp - q)[mask != 0]))
    return -w * np.minimum(s * adv, np.clip(s, low, high) * adv)


def table():
    """The matrix as docs/scale-out.md shows it."""
    lines = [f"SDK {tinker.__version__}: {sum(r['got'] == 'served' for r in ROWS)} calls served, "
             f"{sum(r['got'] == 'refused' for r in ROWS)} refused as expected, of {len(ROWS)}.", "",
             "| call | expected | got | detail |", "| --- | --- | --- | --- |"]
    for r in ROWS:
        detail = r["detail"].split("\n")[0].replace("|", "\\|")
        lines.append(f"| {r['call']} | {r['expect']} | {r['got']} | {detail} |")
    return "\n".join(lines)


def service_copy(service, path):
    """ServiceClient.copy_weights copies into the project TINKER_PROJECT_ID
    names."""
    os.environ["TINKER_PROJECT_ID"] = "p"
    try:
        return service.copy_weights(path).result()
    finally:
        del os.environ["TINKER_PROJECT_ID"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    docblock.server_flags(ap)
    ap.add_argument("--doc", help="rewrite the tinker-matrix table of this file (docs/scale-out.md)")
    args = ap.parse_args()
    # The CLI and from_sampler_handle read the server from the environment.
    os.environ["TINKER_BASE_URL"] = args.base_url
    if args.api_key:
        os.environ["TINKER_API_KEY"] = args.api_key
    have_torch = True
    try:
        import torch  # noqa: F401
    except ImportError:
        have_torch = False

    service = tinker.ServiceClient(base_url=args.base_url, api_key=args.api_key or None)
    rest = tinker.RestClient(base_url=args.base_url, api_key=args.api_key or None)
    st = {}

    # ServiceClient.
    def caps():
        names = [m.model_name for m in service.get_server_capabilities().supported_models]
        check(args.model in names, f"capabilities {names}")
    row("ServiceClient.get_server_capabilities", "served", caps)

    def lora():
        st["tc"] = service.create_lora_training_client(base_model=args.model, rank=4).result()
        check(st["tc"].get_info().lora_rank == 4, "LoRA rank")
    row("ServiceClient.create_lora_training_client (rank 4)", "served", lora)

    def full():
        st["full"] = service.create_lora_training_client(base_model=args.model, rank=0).result()
        info = st["full"].get_info()
        check(not info.is_lora, f"rank 0 is LoRA: {info}")
    row("ServiceClient.create_lora_training_client (rank 0: every parameter)", "served", full)
    tc = st["tc"]

    # TrainingClient: losses.
    sft = [datum(s, weights=[1.0] * (len(s) - 1)) for s in SEQS]

    def fwd():
        out = tc.forward(sft, "cross_entropy").result()
        st["lp"] = [values(o["logprobs"]) for o in out.loss_fn_outputs]
        check(abs(out.metrics["loss:sum"] + sum(map(sum, st["lp"]))) < 1e-3, "forward's loss:sum is not −Σ logp")
    row("TrainingClient.forward", "served", fwd)

    def rl_data(extra=None):
        rng = np.random.default_rng(3)
        out = []
        for s, lp in zip(SEQS, st["lp"]):
            n = len(s) - 1
            q = (np.array(lp) - rng.normal(0, 0.1, n)).tolist()
            inputs = dict(logprobs=q, advantages=rng.normal(0, 1, n).tolist(), weights=[1.0] * n)
            if extra:
                inputs.update(extra(n))
            out.append(datum(s, **inputs))
        return out

    for fn, cfg in [("cross_entropy", None), ("importance_sampling", None),
                    ("ppo", {"clip_low_threshold": 0.8, "clip_high_threshold": 1.2}),
                    ("cispo", {"clip_low_threshold": 0.8, "clip_high_threshold": 1.2}), ("dro", {"beta": 0.05})]:
        def fb(fn=fn, cfg=cfg):
            data = sft if fn == "cross_entropy" else rl_data()
            out = tc.forward_backward(data, fn, cfg).result()
            check(len(out.loss_fn_outputs) == len(data), "one output per datum")
            return f"loss:sum {out.metrics['loss:sum']:.4f}"
        row(f"TrainingClient.forward_backward({fn})", "served", fb)

    def gspo():
        data = rl_data(lambda n: {"sequence_ratio_mask": [1.0 if j % 2 else 0.0 for j in range(n)]})
        out = tc.forward_backward(data, "gspo", {"clip_low_threshold": 0.9, "clip_high_threshold": 1.1}).result()
        worst = 0.0
        for d, o in zip(data, out.loss_fn_outputs):
            i = d.loss_fn_inputs
            ref = gspo_reference(values(o["logprobs"]), values(i["logprobs"]), values(i["advantages"]),
                                 values(i["weights"]), values(i["sequence_ratio_mask"]), 0.9, 1.1)
            worst = max(worst, float(np.max(np.abs(ref - np.array(values(o["elementwise_loss"]))))))
        check(worst < 1e-4, f"elementwise_loss differs from the numpy reference by {worst}")
        return f"max |elementwise_loss − numpy reference| {worst:.1e}"
    row("TrainingClient.forward_backward(gspo, sequence_ratio_mask)", "served", gspo)

    row("TrainingClient.forward_backward(stable_reinforce)", "refused",
        lambda: tc.forward_backward(rl_data(), "stable_reinforce").result(), "Tinker publishes neither its objective")
    row("TrainingClient.forward_backward(loss_fn custom, no loss_id)", "refused",
        lambda: tc.forward_backward(sft, "custom").result(), "loss_fn_config.loss_id is missing")

    def custom():
        if not have_torch:
            raise NotRun("forward_backward_custom runs the loss on the client in torch, which this environment lacks; "
                         "the server's part is forward and forward_backward(cross_entropy), served above")
        import torch

        def loss(data, logprobs_list):
            total = sum(-(lp * torch.tensor(d.loss_fn_inputs["weights"].tolist())).sum() for d, lp in zip(data, logprobs_list))
            return total, {"custom/nll:sum": float(total)}
        out = tc.forward_backward_custom(sft, loss).result()
        return f"metrics {out.metrics}"
    row("TrainingClient.forward_backward_custom", "served", custom)

    def custom_loss():
        if not have_torch:
            raise NotRun("create_custom_loss traces the loss with torch.fx on the client, and torch is not installed here; "
                         "the server's part, running an uploaded graph, is checked against torch by serve/tinkerserver's tests")
        import torch

        def pg(logprobs, advantages, weights):
            loss = -(torch.clamp(torch.exp(logprobs - logprobs.detach()), 0.8, 1.2) * advantages * weights).sum()
            return loss, {"custom/pg:sum": loss, "custom/w:mean": weights.mean()}
        data = rl_data()
        handle = service.create_custom_loss(pg, input_ranks={"logprobs": 1, "advantages": 1, "weights": 1}).result()
        check(handle.loss_id is not None, "the loss was not uploaded")
        server = tc.forward(data, "cross_entropy").result()  # no gradient: the weights stay
        lps = [torch.tensor(values(o["logprobs"]), dtype=torch.float64) for o in server.loss_fn_outputs]
        want = sum(float(pg(lp, torch.tensor(values(d.loss_fn_inputs["advantages"]), dtype=torch.float64),
                            torch.tensor(values(d.loss_fn_inputs["weights"]), dtype=torch.float64))[0]) for lp, d in zip(lps, data))
        out = tc.forward_backward_custom(data, handle).result()
        check(abs(out.metrics["loss:sum"] - want) < 1e-4 and abs(out.metrics["custom/pg:sum"] - want) < 1e-4,
              f"server {out.metrics}, torch {want}")
        return "uploaded, run on the server: loss:sum as torch computes it, to 1e-4"
    row("ServiceClient.create_custom_loss + forward_backward_custom(handle), run on the server", "served", custom_loss)

    def step():
        out = tc.optim_step(types.AdamParams(learning_rate=1e-3)).result()
        check(out.metrics and out.metrics.get("grad_norm", 0) > 0, f"metrics {out.metrics}")
    row("TrainingClient.optim_step", "served", step)

    row("TrainingClient.get_info", "served", lambda: check(tc.get_info().model_data.model_name == args.model, "model name"))
    row("TrainingClient.get_tokenizer", "served", lambda: f"{type(tc.get_tokenizer()).__name__}")

    # Saves and loads.
    def save_state():
        st["state"] = tc.save_state("matrix-state", ttl_seconds=7200).result().path
        check(st["state"].endswith("/weights/matrix-state"), st["state"])
    row("TrainingClient.save_state (ttl_seconds)", "served", save_state)
    row("TrainingClient.load_state", "served", lambda: tc.load_state(st["state"]).result() and None)
    row("TrainingClient.load_state_with_optimizer", "served", lambda: tc.load_state_with_optimizer(st["state"]).result() and None)
    row("ServiceClient.create_training_client_from_state", "served",
        lambda: check(service.create_training_client_from_state(st["state"]).result().get_info().lora_rank == 4, "LoRA rank"))
    row("ServiceClient.create_training_client_from_state_with_optimizer", "served",
        lambda: check(service.create_training_client_from_state_with_optimizer(st["state"]).result().get_info().lora_rank == 4, "LoRA rank"))

    def sampler_save():
        st["spath"] = tc.save_weights_for_sampler("matrix-sampler").result().path
        check(st["spath"].endswith("/sampler_weights/matrix-sampler"), st["spath"])
    row("TrainingClient.save_weights_for_sampler", "served", sampler_save)

    def export():
        st["export"] = tc.save_weights_external("matrix-export").result().path
        check(st["export"].endswith("/external_weights/matrix-export"), st["export"])
    row("TrainingClient.save_weights_external", "served", export)

    # Sampling.
    def sample_with(sc, **kw):
        res = sc.sample(prompt=PROMPT, num_samples=2, sampling_params=PARAMS, **kw).result()
        check(len(res.sequences) == 2 and all(len(s.tokens) == len(s.logprobs) for s in res.sequences), f"sequences {res.sequences}")
        return res

    def sc_path():
        st["sc"] = service.create_sampling_client(model_path=st["spath"]).result()
        sample_with(st["sc"])
    row("ServiceClient.create_sampling_client(model_path) + SamplingClient.sample", "served", sc_path)
    row("ServiceClient.create_sampling_client(base_model) + sample", "served",
        lambda: sample_with(service.create_sampling_client(base_model=args.model).result()) and None)
    row("TrainingClient.create_sampling_client + sample", "served", lambda: sample_with(tc.create_sampling_client(st["spath"]).result()) and None)

    def snapshot():
        sc = tc.save_weights_and_get_sampling_client().result()
        sample_with(sc)
        learner = tc.forward(sft, "cross_entropy").result()
        sampled = sc.compute_logprobs(types.ModelInput.from_ints(SEQS[0])).result()
        gap = max(abs(a - b) for a, b in zip(values(learner.loss_fn_outputs[0]["logprobs"]), sampled[1:]))
        check(gap < 1e-4, f"learner and sampler logprobs differ by {gap}")
        return f"learner − sampler logprob gap {gap:.1e}"
    row("TrainingClient.save_weights_and_get_sampling_client (snapshot)", "served", snapshot)

    def inflight():
        a = tc.save_weights_and_get_sampling_client(kind="inflight").result()
        before = a.compute_logprobs(types.ModelInput.from_ints(SEQS[1])).result()
        tc.forward_backward(sft, "cross_entropy").result()
        tc.optim_step(types.AdamParams(learning_rate=1e-2)).result()
        b = tc.save_weights_and_get_sampling_client(kind="inflight").result()
        after_a = a.compute_logprobs(types.ModelInput.from_ints(SEQS[1])).result()
        after_b = b.compute_logprobs(types.ModelInput.from_ints(SEQS[1])).result()
        check(after_a == after_b and after_a != before, "the first inflight client did not adopt the newer weights")
        return "an older inflight client samples the newest inflight weights"
    row("TrainingClient.save_weights_and_get_sampling_client (kind inflight)", "served", inflight)

    def logprobs_last_n():
        sc = st["sc"]
        prompt = types.ModelInput.from_ints(SEQS[2])
        whole = sc.compute_logprobs(prompt).result()
        last = sc.compute_logprobs(prompt, prompt_logprobs_last_n=3).result()
        check(last[:-3] == [None] * (len(whole) - 3) and last[-3:] == whole[-3:], f"{last} against {whole}")
    row("SamplingClient.compute_logprobs", "served", lambda: st["sc"].compute_logprobs(PROMPT).result() and None)
    row("SamplingClient.compute_logprobs(prompt_logprobs_last_n)", "served", logprobs_last_n)
    row("SamplingClient.sample(include_prompt_logprobs, prompt_logprobs_last_n)", "served",
        lambda: check(sample_with(st["sc"], include_prompt_logprobs=True, prompt_logprobs_last_n=1).prompt_logprobs[:-1] == [None, None], "nulls"))
    row("SamplingClient.get_base_model", "served", lambda: check(st["sc"].get_base_model() == args.model, "base model"))
    row("SamplingClient.get_tokenizer", "served", lambda: type(st["sc"].get_tokenizer()).__name__)

    def handle():
        other = tinker.SamplingClient.from_sampler_handle(st["sc"].get_sampler_handle(), api_key=args.api_key or None)
        sample_with(other)
    row("SamplingClient.get_sampler_handle + from_sampler_handle (join_sampling_session)", "served", handle)
    row("SamplingClient pickled and unpickled", "served", lambda: sample_with(pickle.loads(pickle.dumps(st["sc"]))) and None)
    row("SamplingClient.sample(topk_prompt_logprobs)", "refused",
        lambda: sample_with(st["sc"], include_prompt_logprobs=True, topk_prompt_logprobs=2), "topk_prompt_logprobs is not supported")
    row("SamplingClient.sample(topk_sample_logprobs)", "refused",
        lambda: sample_with(st["sc"], topk_sample_logprobs=2), "topk_sample_logprobs is not supported")
    row("SamplingClient.sample(prompt_alt_tokens_k)", "refused",
        lambda: sample_with(st["sc"], prompt_alt_tokens_k=2), "prompt_alt_tokens_k is not supported")
    row("SamplingClient.sample(target_prompt_logprobs)", "refused",
        lambda: sample_with(st["sc"], target_prompt_logprobs=types.TensorData(data=[1, 2], dtype="int64", shape=[2, 1])),
        "target_prompt_logprobs is not supported")
    row("create_sampling_client(record_stability_info=True) + sample", "refused",
        lambda: sample_with(tc.create_sampling_client(st["spath"], record_stability_info=True).result()), "record_stability_info is not supported")

    # RestClient.
    run_id = tc.model_id
    row("RestClient.get_server_capabilities", "served", lambda: rest.get_server_capabilities().result() and None)
    row("RestClient.get_training_run", "served", lambda: check(rest.get_training_run(run_id).result().is_lora, "is_lora"))
    row("RestClient.get_training_run_by_tinker_path", "served",
        lambda: check(rest.get_training_run_by_tinker_path(st["state"]).result().training_run_id == run_id, "run id"))
    row("RestClient.get_weights_info_by_tinker_path", "served",
        lambda: check(rest.get_weights_info_by_tinker_path(st["state"]).result().lora_rank == 4, "lora_rank"))

    def runs():
        r = rest.list_training_runs(limit=2).result()
        check(r.cursor.total_count >= 4 and len(r.training_runs) == 2, f"{r.cursor}")
    row("RestClient.list_training_runs", "served", runs)

    def ckpts():
        names = {c.checkpoint_id: c for c in rest.list_checkpoints(run_id).result().checkpoints}
        check({"weights/matrix-state", "sampler_weights/matrix-sampler", "external_weights/matrix-export"} <= set(names), f"{sorted(names)}")
        check(names["weights/matrix-state"].expires_at is not None, "the state's TTL")
    row("RestClient.list_checkpoints", "served", ckpts)
    row("RestClient.list_user_checkpoints", "served",
        lambda: check(len(rest.list_user_checkpoints(limit=100).result().checkpoints) >= 3, "every run's checkpoints"))

    def urls():
        r = rest.get_external_weights_urls(st["export"]).result()
        name, url = sorted(r.urls.items())[0]
        with urllib.request.urlopen(url) as f:
            size = len(f.read())
        check(size > 0, f"{name} is empty")
        return f"{len(r.urls)} files downloaded"
    row("RestClient.get_external_weights_urls (and a download)", "served", urls)
    row("RestClient.set_checkpoint_ttl_from_tinker_path", "served",
        lambda: rest.set_checkpoint_ttl_from_tinker_path(st["state"], 86400).result())
    row("RestClient.publish_checkpoint_from_tinker_path", "served", lambda: rest.publish_checkpoint_from_tinker_path(st["state"]).result())

    def published():
        c = [c for c in rest.list_checkpoints(run_id).result().checkpoints if c.tinker_path == st["state"]][0]
        check(c.public, "not public in the listing")
        rest.unpublish_checkpoint_from_tinker_path(st["state"]).result()
        c = [c for c in rest.list_checkpoints(run_id).result().checkpoints if c.tinker_path == st["state"]][0]
        check(not c.public, "still public")
    row("RestClient.unpublish_checkpoint_from_tinker_path", "served", published)

    def sessions():
        ids = rest.list_sessions().result().sessions
        check(service.holder.get_session_id() in ids, f"{ids}")
        s = rest.get_session(service.holder.get_session_id()).result()
        check(run_id in s.training_run_ids and s.sampler_ids, f"{s}")
    row("RestClient.list_sessions + get_session", "served", sessions)
    row("RestClient.get_sampler", "served",
        lambda: check(rest.get_sampler(st["sc"]._sampling_session_id).result().model_path == st["spath"], "model_path"))
    row("RestClient.get_current_checkpoint_storage_usage", "served",
        lambda: check(rest.get_current_checkpoint_storage_usage().result().data[0].size_bytes > 0, "no bytes"))

    def delete():
        rest.delete_checkpoint(run_id, "sampler_weights/matrix-sampler").result()
        tc.save_state("matrix-delete").result()
        rest.delete_checkpoint_from_tinker_path(f"tinker://{run_id}/weights/matrix-delete").result()
        names = {c.checkpoint_id for c in rest.list_checkpoints(run_id).result().checkpoints}
        check("weights/matrix-delete" not in names and "sampler_weights/matrix-sampler" not in names, f"{sorted(names)}")
    row("RestClient.delete_checkpoint + delete_checkpoint_from_tinker_path", "served", delete)

    sid = service.holder.get_session_id()
    for call, fn, why in [
        ("RestClient.get_audit_log", lambda: rest.get_audit_log().result(), "no audit log"),
        ("RestClient.copy_weights", lambda: rest.copy_weights(st["state"], "p").result(), "copies between accounts"),
        ("ServiceClient.copy_weights", lambda: service_copy(service, st["state"]), "copies between accounts"),
        ("RestClient.assign_session_project", lambda: rest.assign_session_project(sid, "p").result(), "no projects"),
        ("RestClient.export_session_trace", lambda: rest.export_session_trace(sid).result(), "no traces"),
        # The SDK asks no server: client/config said pjwt_auth_enabled false.
        ("RestClient.whoami", lambda: rest.whoami().result(), "whoami requires JWT auth, but the server has it disabled"),
        ("RestClient.get_billing_usage",
         lambda: rest.get_billing_usage(date.today() - timedelta(days=1), date.today()).result(), "nothing is billed"),
        ("RestClient.search_sessions", lambda: rest.search_sessions(types.SessionSearchRequest()).result(), "needs accounts"),
    ]:
        row(call, "refused", fn, why)

    # The tinker CLI, in this process.
    from click.testing import CliRunner
    from tinker.cli.__main__ import main_cli

    def cli(*argv, want=0):
        res = CliRunner().invoke(main_cli, ["--format", "json", *argv])
        check(res.exit_code == want, f"exit {res.exit_code}: {res.output[-400:]} {res.exception!r}")
        return res.output
    row("tinker run list", "served", lambda: check(run_id in cli("run", "list"), "the run is listed"))
    row("tinker run info", "served", lambda: check(run_id in cli("run", "info", run_id), "the run"))
    row("tinker checkpoint list", "served", lambda: check("matrix-state" in cli("checkpoint", "list", "--run-id", run_id), "the state"))
    row("tinker checkpoint info", "served", lambda: check("matrix-state" in cli("checkpoint", "info", st["state"]), "the state"))
    row("tinker checkpoint publish + unpublish", "served",
        lambda: (cli("checkpoint", "publish", st["state"]), cli("checkpoint", "unpublish", st["state"])) and None)
    row("tinker checkpoint set-ttl", "served", lambda: cli("checkpoint", "set-ttl", st["state"], "--remove") and None)
    row("tinker model list", "served", lambda: check(args.model in cli("model", "list"), "the served model"))

    def download():
        out = os.path.join(args.out, "download")
        cli("checkpoint", "download", st["state"], "--output", out)
        files = [f for _, _, fs in os.walk(out) for f in fs]
        check("adapter_config.json" in files, f"downloaded {files}")
        return f"{len(files)} files"
    row("tinker checkpoint download (a saved state, through an export)", "served", download)

    def cli_delete():
        tc.save_state("matrix-cli-delete").result()
        cli("checkpoint", "delete", f"tinker://{run_id}/weights/matrix-cli-delete", "--yes")
        names = {c.checkpoint_id for c in rest.list_checkpoints(run_id).result().checkpoints}
        check("weights/matrix-cli-delete" not in names, f"{sorted(names)}")
    row("tinker checkpoint delete", "served", cli_delete)
    # The CLI says only that the server answered 404.
    row("tinker session export-trace", "refused", lambda: cli("session", "export-trace", sid), "Resource not found")

    row("ServiceClient.close (sessions/<id>/finish)", "served", lambda: service.close("success").result())

    ok = all(r["got"] == r["expect"] or r["got"] == "not run" for r in ROWS)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "matrix.json"), "w") as f:
        json.dump({"sdk_version": tinker.__version__, "torch": have_torch, "rows": ROWS, "ok": ok}, f, indent=1)
    if args.doc:
        docblock.replace(args.doc, "tinker-matrix", table())
    print(json.dumps({"sdk_version": tinker.__version__, "rows": len(ROWS), "ok": ok}))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
