"""Writes serve/tinkerserver/testdata/custom_losses.json: losses traced by
the Tinker SDK's create_custom_loss machinery (torch.fx, encoded as the SDK
uploads them), each with inputs and what torch computes of them in float64
— the loss, the metrics and the gradient with respect to the logprobs — for
the server's interpreter of uploaded losses to be checked against.

    python tinker_custom_loss_fixtures.py OUT.json

Needs the SDK (scripts/tinker-sdk.sh) and torch (scripts/pyref.sh).
"""

import json
import sys

import torch
from tinker.lib.public_interfaces.custom_loss import encode_graph, trace_loss


def neg_ll(logprobs, weights):
    loss = -(logprobs * weights).sum()
    return loss, {"custom/neg_ll:sum": loss}


def clipped_pg(logprobs, sampler_logprobs, advantages, weights):
    ratio = torch.exp(logprobs - sampler_logprobs)
    clipped = torch.clamp(ratio, 0.8, 1.2)
    loss = -(torch.minimum(ratio * advantages, clipped * advantages) * weights).sum()
    return loss, {"custom/ratio:mean": ratio.mean(), "custom/tokens:sum": weights.sum()}


def methods(logprobs, weights):
    x = logprobs.exp().clamp(min=1e-6).log() / 2.0 + 1
    y = torch.where(weights > 0, x, torch.zeros_like(x))
    z = torch.sigmoid(y).mean() - (x ** 2).sum() * 0.5 + logprobs.detach().abs().max()
    return z, {}


def scalar_input(logprobs, scale, advantages):
    p = torch.sqrt(torch.exp(logprobs))
    u = torch.tanh(1 - p) * advantages / (2 + p)
    v = torch.maximum(u, -u * 0.5) + torch.ones_like(u) * 0.1
    m = torch.where(advantages < 0, v, u.clone().float())
    loss = scale * torch.sum(m, dim=0) - logprobs.min() + torch.log(torch.sigmoid(logprobs)).mean(-1)
    return loss, {"custom/u:mean": u.mean(), "custom/le:sum": (advantages <= 0).float().sum()}


LOSSES = [
    (neg_ll, {"logprobs": 1, "weights": 1}),
    (clipped_pg, {"logprobs": 1, "sampler_logprobs": 1, "advantages": 1, "weights": 1}),
    (methods, {"logprobs": 1, "weights": 1}),
    (scalar_input, {"logprobs": 1, "scale": 0, "advantages": 1}),
]


def main():
    gen = torch.Generator().manual_seed(7)
    out = []
    for fn, ranks in LOSSES:
        handle = trace_loss(fn, ranks, "fixture")
        cases = []
        for n in (1, 5, 9):
            values = {}
            for name, rank in ranks.items():
                shape = () if rank == 0 else (n,)
                if name == "logprobs":
                    v = -3 * torch.rand(shape, generator=gen, dtype=torch.float64) - 0.05
                elif name == "sampler_logprobs":
                    v = values["logprobs"].detach() + 0.3 * torch.randn(shape, generator=gen, dtype=torch.float64)
                elif name == "weights":
                    v = torch.randint(0, 3, shape, generator=gen).to(torch.float64) / 2
                else:
                    v = torch.randn(shape, generator=gen, dtype=torch.float64)
                values[name] = v
            logprobs = values["logprobs"].clone().requires_grad_(True)
            args = [logprobs] + [values[i.name] for i in handle.inputs[1:]]
            loss, metrics = handle.graph(*args)
            loss.backward()
            cases.append({
                "inputs": {k: v.tolist() for k, v in values.items()},
                "loss": loss.item(),
                "metrics": {k: float(v) for k, v in metrics.items()},
                "dlogp": logprobs.grad.tolist(),
            })
        out.append({
            "name": handle.name,
            "inputs": [i.model_dump() for i in handle.inputs],
            "graph": encode_graph(handle).model_dump(),
            "cases": cases,
        })
    with open(sys.argv[1], "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
