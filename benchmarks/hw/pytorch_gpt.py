"""pytorch_gpt.py: the same 49M GPT as placer's engine, in PyTorch eager, timed
with the same protocol, for the side-by-side benchmark (tests/gpu/run.sh).

Model (core/graph.h): vocab 50257, d_model 384, 6 heads, 6 layers, seq 256,
batch 16, learned positions, pre-LayerNorm blocks (attention with qkv and
output projections with bias; MLP fc -> GELU-tanh -> proj with bias),
final LayerNorm, untied head without bias, mean cross-entropy over all
tokens, AdamW (lr 3e-4, betas 0.9/0.95, eps 1e-8, weight decay 0.1 on every
parameter, as the engine does). m micro-batches accumulate gradients
((loss / m).backward()), like the engine's micro-batching.

Protocol: `warmup` untimed steps, then `steps` timed steps; each step starts
after torch.cuda.synchronize(), is bracketed by CUDA events and ends with an
event synchronize; the median is reported.

Modes (the fourth field of a configuration, default eager):
  eager    plain PyTorch
  compile  torch.compile over the model and over the optimizer step
  ro       torch.compile(mode="reduce-overhead") over both (CUDA graphs;
           torch.compiler.cudagraph_mark_step_begin() before each step)
Precisions: fp32, tf32 (TF32 matmuls), bf16 (torch.autocast bf16 around the
forward and the loss, TF32 allowed for what autocast leaves in fp32; fp32
parameters, gradients and AdamW state, as the engine's bf16 mode).

usage: python3 pytorch_gpt.py [--steps K] [--warmup W] [--configs sdpa:tf32:1:ro,sdpa:bf16:1:ro,...]
Prints one line per configuration: TORCH {json}.
"""
import argparse
import json
import math
import statistics

import torch
import torch.nn as nn
import torch.nn.functional as F

V, C, NH, L, T, B = 50257, 384, 6, 6, 256, 16


class Attention(nn.Module):
    def __init__(self, attn):
        super().__init__()
        self.qkv = nn.Linear(C, 3 * C)
        self.proj = nn.Linear(C, C)
        self.attn = attn

    def forward(self, x):
        b, t, _ = x.shape
        q, k, v = self.qkv(x).split(C, dim=2)
        q = q.view(b, t, NH, C // NH).transpose(1, 2)
        k = k.view(b, t, NH, C // NH).transpose(1, 2)
        v = v.view(b, t, NH, C // NH).transpose(1, 2)
        if self.attn == "sdpa":
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(C // NH))
            mask = torch.ones(t, t, device=x.device, dtype=torch.bool).tril()
            att = att.masked_fill(~mask, float("-inf")).softmax(dim=-1)
            y = att @ v
        return self.proj(y.transpose(1, 2).contiguous().view(b, t, C))


class Block(nn.Module):
    def __init__(self, attn):
        super().__init__()
        self.ln1 = nn.LayerNorm(C)
        self.attn = Attention(attn)
        self.ln2 = nn.LayerNorm(C)
        self.fc = nn.Linear(C, 4 * C)
        self.mproj = nn.Linear(4 * C, C)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mproj(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, attn):
        super().__init__()
        self.wte = nn.Embedding(V, C)
        self.wpe = nn.Embedding(T, C)
        self.blocks = nn.ModuleList(Block(attn) for _ in range(L))
        self.ln_f = nn.LayerNorm(C)
        self.head = nn.Linear(C, V, bias=False)

    def forward(self, idx, targets):
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1], device=idx.device))
        for blk in self.blocks:
            x = blk(x)
        logits = self.head(self.ln_f(x))
        return F.cross_entropy(logits.view(-1, V), targets.view(-1))


def run(attn, precision, m, warmup, steps, mode="eager"):
    torch.backends.cuda.matmul.allow_tf32 = precision in ("tf32", "bf16")
    torch.backends.cudnn.allow_tf32 = precision in ("tf32", "bf16")
    torch.manual_seed(1)
    dev = "cuda"
    model = GPT(attn).to(dev)
    n_params = sum(p.numel() for p in model.parameters())
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1)
    g = torch.Generator().manual_seed(1)
    idx = torch.randint(0, V, (B, T + 1), generator=g).to(dev)
    x, y = idx[:, :T].contiguous(), idx[:, 1:].contiguous()
    b = B // m
    fwd, opt_step = model, opt.step
    if mode != "eager":
        cmode = "reduce-overhead" if mode == "ro" else None
        fwd = torch.compile(model, mode=cmode)
        opt_step = torch.compile(opt.step, mode=cmode)

    def step():
        if mode == "ro":
            torch.compiler.cudagraph_mark_step_begin()
        opt.zero_grad(set_to_none=True)
        total = 0.0
        for j in range(m):
            with torch.autocast("cuda", dtype=torch.bfloat16, enabled=precision == "bf16"):
                loss = fwd(x[j * b:(j + 1) * b], y[j * b:(j + 1) * b]) / m
            loss.backward()
            total = total + loss.detach()
        opt_step()
        return total

    times = []
    loss = None
    for i in range(warmup + steps):
        torch.cuda.synchronize()
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        loss = step()
        e.record()
        e.synchronize()
        if i >= warmup:
            times.append(s.elapsed_time(e))
    name = f"torch_{mode}_{attn}_{precision}_m{m}"
    out = {"name": name, "median_ms": statistics.median(times), "min_ms": min(times), "max_ms": max(times),
           "steps": steps, "warmup": warmup, "params": n_params, "loss": float(loss),
           "peak_bytes": torch.cuda.max_memory_allocated(), "all_ms": [round(t, 4) for t in times]}
    print("TORCH " + json.dumps(out), flush=True)
    del model, opt, fwd, opt_step
    torch._dynamo.reset()
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--configs", default="sdpa:tf32:1,manual:tf32:1,sdpa:fp32:1,sdpa:tf32:4")
    a = ap.parse_args()
    print(f"torch {torch.__version__} on {torch.cuda.get_device_name(0)}", flush=True)
    for cfg in a.configs.split(","):
        f = cfg.split(":")
        run(f[0], f[1], int(f[2]), a.warmup, a.steps, f[3] if len(f) > 3 else "eager")


if __name__ == "__main__":
    main()
