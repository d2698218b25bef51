"""Reference timing: batched sampling with a KV cache from a Llama/Qwen2-style decoder in PyTorch CPU.

Measures what `rlvr bench sample` measures, on the same machine and shape: `--streams` samples of one
prompt (`--prompt` tokens) are generated together in one batch, `--tokens` new tokens each, at
temperature 1, with each drawn token's logprob. The prompt is prefilled once (one causal forward) and
its cache and logits copied to every stream; then each step feeds one token per stream through the
model, writing K/V in place into a preallocated cache (streams, kv_heads, prompt+tokens, head_dim) per
layer and attending the new query over the cache prefix. Only the last position's logits are computed.
The token drawn from the prefill's logits is the first new one, so a generation is the prefill plus
tokens-1 steps, and the last drawn token is not fed back (as rlvr's sampler does). Weights are random
(seed 0, std 0.02), float32, under torch.inference_mode(). Best of --reps, timed end to end.
--torch-threads sizes torch's own pool and, unless OPENBLAS_NUM_THREADS is set, OpenBLAS's; OpenMP's
threads wait passively unless OMP_WAIT_POLICY says otherwise (spinning ones cost 2-3× on 2 cores).

Run with Debian's python3-torch, e.g.
  /usr/bin/python3 bench/torch_decode_bench.py --shape qwen05b-slice --streams 1,8,64,128 --tokens 128
Prints one JSON line per stream count: {"shape":..., "streams":..., "tokens":..., "seconds":...,
"tokens_per_s":..., "gflops":..., "torch":..., "threads":..., "peak_rss_mib":..., ...}, where
tokens_per_s = streams*tokens/seconds and gflops counts 2 FLOP per matrix-product weight (head
included, embedding lookups and norms left out) per token the model processes, plus attention's
4*ctx*heads*head_dim per token per layer, ctx being the number of positions the token attends over.
"""
import argparse, json, os, resource, time

SHAPES = {
    "d128": dict(vocab=259, dim=128, layers=4, heads=4, kv_heads=4, ffn=344, tied=False, qkv_bias=False),
    "d256": dict(vocab=512, dim=256, layers=4, heads=4, kv_heads=4, ffn=688, tied=False, qkv_bias=False),
    "qwen05b-slice": dict(vocab=151936, dim=896, layers=2, heads=14, kv_heads=2, ffn=4864, tied=True, qkv_bias=True),
}

p = argparse.ArgumentParser()
p.add_argument("--shape", choices=sorted(SHAPES), default="d256", help="preset; explicit shape flags override it")
p.add_argument("--layers", type=int)
p.add_argument("--dim", type=int)
p.add_argument("--heads", type=int)
p.add_argument("--kv-heads", type=int)
p.add_argument("--ffn", type=int)
p.add_argument("--vocab", type=int)
p.add_argument("--tied", action=argparse.BooleanOptionalAction, help="head shares the embedding matrix")
p.add_argument("--qkv-bias", action=argparse.BooleanOptionalAction, help="biases on the q, k and v projections")
p.add_argument("--streams", default="1,8,64,128", help="comma-separated stream counts, one measurement each")
p.add_argument("--prompt", type=int, default=1, help="prompt tokens (one prompt shared by all streams)")
p.add_argument("--tokens", type=int, default=128, help="new tokens per stream")
p.add_argument("--reps", type=int, default=3, help="best of")
p.add_argument("--torch-threads", type=int, default=2)
a = p.parse_args()
overridden = [k for k, v in SHAPES[a.shape].items() if getattr(a, k) is not None and getattr(a, k) != v]
for k, v in SHAPES[a.shape].items():
    if getattr(a, k) is None:
        setattr(a, k, v)
shape = a.shape + ("+" + ",".join(overridden) if overridden else "")
streams_list = [int(s) for s in a.streams.split(",") if s]
assert a.dim % a.heads == 0 and a.heads % a.kv_heads == 0 and a.prompt >= 1 and a.tokens >= 1

# Debian's torch does its matrix products in OpenBLAS, whose own thread pool is sized when it loads,
# and the rest in OpenMP, whose threads by default spin after each op and so starve OpenBLAS's.
os.environ.setdefault("OPENBLAS_NUM_THREADS", str(a.torch_threads))
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
import torch, torch.nn as nn, torch.nn.functional as F
torch.set_num_threads(a.torch_threads)
torch.manual_seed(0)
hd = a.dim // a.heads
rep = a.heads // a.kv_heads
maxlen = a.prompt + a.tokens

class RMSNorm(nn.Module):
    def __init__(s, d):
        super().__init__(); s.w = nn.Parameter(torch.ones(d))
    def forward(s, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * s.w

def rope(x, cos, sin):  # x: B,T,H,hd; cos, sin: 1,T,1,hd (rotate-half convention, as HF Llama/Qwen2)
    x1, x2 = x[..., : hd // 2], x[..., hd // 2 :]
    return x * cos + torch.cat((-x2, x1), -1) * sin

class Block(nn.Module):
    def __init__(s):
        super().__init__()
        s.n1, s.n2 = RMSNorm(a.dim), RMSNorm(a.dim)
        s.qkv = nn.Linear(a.dim, (a.heads + 2 * a.kv_heads) * hd, bias=a.qkv_bias)  # q, k, v fused
        s.o = nn.Linear(a.heads * hd, a.dim, bias=False)
        s.gu = nn.Linear(a.dim, 2 * a.ffn, bias=False)  # gate and up fused
        s.d = nn.Linear(a.ffn, a.dim, bias=False)

    def forward(s, x, pos, cos, sin, kc, vc, mask):
        # x: B,T,dim for positions pos..pos+T-1; kc, vc: B,kv_heads,maxlen,hd, written in place.
        B, T, _ = x.shape
        q, k, v = s.qkv(s.n1(x)).split([a.heads * hd, a.kv_heads * hd, a.kv_heads * hd], -1)
        q = rope(q.view(B, T, a.heads, hd), cos, sin)
        k = rope(k.view(B, T, a.kv_heads, hd), cos, sin)
        kc[:, :, pos : pos + T] = k.transpose(1, 2)
        vc[:, :, pos : pos + T] = v.view(B, T, a.kv_heads, hd).transpose(1, 2)
        ctx = pos + T
        K, V = kc[:, :, :ctx], vc[:, :, :ctx]  # views of the cache prefix, no copy
        # Grouped-query attention without repeating K/V: the rep query heads sharing a K/V head are
        # stacked as rows of one product against that head's cache, (rep*T × hd)·(hd × ctx).
        if T == 1:
            qg = q.view(B, a.kv_heads, rep, hd)
        else:
            qg = q.view(B, T, a.kv_heads, rep, hd).permute(0, 2, 3, 1, 4).reshape(B, a.kv_heads, rep * T, hd)
        att = (qg @ K.transpose(-1, -2)) * hd ** -0.5
        if mask is not None:
            att = att.masked_fill(~mask, float("-inf"))
        y = att.softmax(-1) @ V  # B,kv_heads,rep*T,hd
        if T == 1:
            y = y.reshape(B, 1, a.heads * hd)
        else:
            y = y.view(B, a.kv_heads, rep, T, hd).permute(0, 3, 1, 2, 4).reshape(B, T, a.heads * hd)
        x = x + s.o(y)
        g, u = s.gu(s.n2(x)).chunk(2, -1)
        return x + s.d(F.silu(g) * u)

class Model(nn.Module):
    def __init__(s):
        super().__init__()
        s.emb = nn.Embedding(a.vocab, a.dim)
        s.blocks = nn.ModuleList([Block() for _ in range(a.layers)])
        s.norm = RMSNorm(a.dim)
        s.head = None if a.tied else nn.Linear(a.dim, a.vocab, bias=False)
        inv = 1.0 / (10000 ** (torch.arange(0, hd, 2).float() / hd))
        f = torch.outer(torch.arange(maxlen).float(), inv)
        emb = torch.cat((f, f), -1)
        s.cos, s.sin = emb.cos(), emb.sin()

    def forward(s, tok, pos, caches):
        # tok: B,T tokens at positions pos..pos+T-1; returns the logits of the last position, B × vocab.
        T = tok.shape[1]
        cos = s.cos[pos : pos + T].view(1, T, 1, hd)
        sin = s.sin[pos : pos + T].view(1, T, 1, hd)
        mask = None
        if T > 1:  # causal over the new positions; rows are rep blocks of T query positions
            mask = torch.ones(T, pos + T, dtype=torch.bool).tril(pos).repeat(rep, 1)
        x = s.emb(tok)
        for b, (kc, vc) in zip(s.blocks, caches):
            x = b(x, pos, cos, sin, kc, vc, mask)
        h = s.norm(x[:, -1])
        return F.linear(h, s.emb.weight) if s.head is None else s.head(h)

m = Model().eval()
with torch.no_grad():
    for name, w in m.named_parameters():
        if not name.endswith(".w"):  # all but the norms' gains
            w.normal_(0, 0.02)

def generate(n, prompt, gen):
    """Samples a.tokens tokens for each of n streams continuing prompt (1 × a.prompt)."""
    caches = [(torch.empty(n, a.kv_heads, maxlen, hd), torch.empty(n, a.kv_heads, maxlen, hd)) for _ in m.blocks]
    one = [(torch.empty(1, a.kv_heads, maxlen, hd), torch.empty(1, a.kv_heads, maxlen, hd)) for _ in m.blocks]
    logits = m(prompt, 0, one).expand(n, a.vocab)
    for (kc, vc), (k1, v1) in zip(caches, one):
        kc[:, :, : a.prompt] = k1[:, :, : a.prompt]
        vc[:, :, : a.prompt] = v1[:, :, : a.prompt]
    toks = torch.empty(n, a.tokens, dtype=torch.long)
    lps = torch.empty(n, a.tokens)
    for i in range(a.tokens):
        lp = logits.log_softmax(-1)
        tok = torch.multinomial(lp.exp(), 1, generator=gen)  # temperature 1, one draw per stream
        toks[:, i : i + 1] = tok
        lps[:, i : i + 1] = lp.gather(-1, tok)
        if i + 1 < a.tokens:
            logits = m(tok, a.prompt + i, caches)
    return toks, lps

def flops(n):
    """The FLOPs of one generate(n): the prompt once, then tokens-1 steps of n rows."""
    D, Q, KV, Fh = a.dim, a.heads * hd, a.kv_heads * hd, a.ffn
    layer = D * (Q + 2 * KV) + Q * D + 3 * D * Fh
    steps = a.tokens - 1
    rows = a.prompt + n * steps
    ctx = a.prompt * (a.prompt + 1) // 2 + n * sum(a.prompt + i + 1 for i in range(steps))
    return 2 * (rows * a.layers * layer + (1 + n * steps) * D * a.vocab) + 4 * ctx * a.heads * hd * a.layers

prompt = torch.randint(0, a.vocab, (1, a.prompt))
with torch.inference_mode():
    for n in streams_list:
        best = float("inf")
        for r in range(a.reps):
            gen = torch.Generator().manual_seed(1 + r)
            t0 = time.perf_counter()
            toks, lps = generate(n, prompt, gen)
            best = min(best, time.perf_counter() - t0)
        assert toks.shape == (n, a.tokens) and bool(torch.isfinite(lps).all())
        print(json.dumps({"shape": shape, "streams": n, "prompt": a.prompt, "tokens": a.tokens, "seconds": round(best, 4),
                          "tokens_per_s": round(n * a.tokens / best, 1), "gflops": round(flops(n) / best / 1e9, 2),
                          "torch": torch.__version__, "threads": a.torch_threads,
                          "openblas_threads": os.environ["OPENBLAS_NUM_THREADS"], "omp_wait_policy": os.environ["OMP_WAIT_POLICY"],
                          "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
                          "config": {k: getattr(a, k) for k in ("layers", "dim", "heads", "kv_heads", "ffn", "vocab", "tied", "qkv_bias")}}),
              flush=True)
