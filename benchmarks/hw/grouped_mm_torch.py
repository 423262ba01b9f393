#!/usr/bin/env python3
"""torch._grouped_mm over MoE expert shapes, timed pass by pass: the kernel
torchtitan 0.2.2's MoE layer calls (torchtitan/models/moe/moe.py,
_run_experts_grouped_mm: three grouped GEMMs, w1 and w3 apart, over E local
experts with int32 token offsets) and Hugging Face transformers' default
experts implementation ("grouped_mm").

Per point (model, E local experts, m tokens per expert, distribution):
  fwd      h1 = x W1^T, h3 = x W3^T, out = a W2^T        (a = silu(h1) * h3,
           made once outside the timing: the activation is moe_parts_torch.py's)
  dgrad    da = g W2, dx1 = gh1 W1, dx3 = gh3 W3          (what autograd runs)
  wgrad    dW2^T = a^T g, dW1^T = x^T gh1, dW3^T = x^T gh3 (per expert, the
           reduction over its m tokens: _grouped_mm of two 2-D operands)
  fwd_bwd  autograd over the whole expert MLP, SwiGLU included (the sum
           check: fwd + dgrad + wgrad + the activation against this)
each in bf16, and (fwd, dgrad, wgrad) in FP8 through torch._scaled_grouped_mm
(e4m3, one fp32 scale per row / column: a tensorwise scale broadcast, the
kernel torchao's FP8 grouped training runs), when this PyTorch has it.
FLOPs per pass 6 T h f (T = E m). Shapes and grid as grouped_gemm_sweep.cu
(models, E = 1 .. 256, m = 8 .. 16,384 under the same bounds, coarse grid
first); "random" (chunks of 8 tokens to random experts) on the coarse grid
with E >= 4. Timing: CUDA events, 2 warm-ups, the median of 3..20
repetitions (about 10 ms measured); inputs random normal, never zeros;
before the sweep each pass is checked against a float32 loop of matmuls
on a small random case (relative error; bf16 passes at < 2e-2, FP8 at
< 8e-2).

Output lines:
  tgmm MODEL E M DIST PASS PREC MS TFLOPS STATUS
  tgmm_counts MODEL E M c0,c1,..
  check WHAT REL_ERR PASS|FAIL
  python3 grouped_mm_torch.py [--budget-s 100] [--models a,b|all] [--max-pairs 131072]
      [--max-tflop 8] [--max-m 16384] [--dry-run]     # --dry-run: tiny shapes on the CPU
"""

import argparse
import math
import sys
import time

# name, hidden h, expert ffn f, experts (the largest local count swept)
MODELS = [("qwen3-30b-a3b", 2048, 768, 128), ("qwen3-235b-a22b", 4096, 1536, 128),
          ("deepseek-v3", 7168, 2048, 256), ("gpt-oss", 2880, 2880, 128),
          ("llama-4-scout", 5120, 8192, 16), ("mixtral-8x7b", 4096, 14336, 8),
          ("mixtral-8x22b", 6144, 16384, 8)]


def grid(models, max_pairs, max_tflop, max_m):
    pts = []
    for name, h, f, ex in models:
        E = 1
        while E <= min(ex, 256):
            m = 8
            while m <= max_m:
                if E * m <= max_pairs and 6.0 * E * m * h * f <= max_tflop * 1e12:
                    coarse = int(math.log2(E)) % 2 == 0 and int(math.log2(m // 8)) % 2 == 0
                    pts.append((name, h, f, E, m, coarse))
                m *= 2
            E *= 2
    pts.sort(key=lambda p: not p[5])  # stable: coarse first
    return pts


def median(ts):
    ts = sorted(ts)
    n = len(ts)
    return ts[n // 2] if n % 2 else 0.5 * (ts[n // 2 - 1] + ts[n // 2])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--budget-s", type=float, default=100.0)
    ap.add_argument("--models", default="all")
    ap.add_argument("--max-pairs", type=int, default=131072)
    ap.add_argument("--max-tflop", type=float, default=8.0)
    ap.add_argument("--max-m", type=int, default=16384)
    ap.add_argument("--dry-run", action="store_true", help="tiny shapes on the CPU (loop reference for gmm)")
    args = ap.parse_args()
    import torch
    import torch.nn.functional as F
    dev = "cpu" if args.dry_run else "cuda"
    if not args.dry_run and not torch.cuda.is_available():
        print("# no GPU", flush=True)
        return 0
    t_end = time.time() + args.budget_s
    have_gmm = hasattr(torch, "_grouped_mm") and not args.dry_run
    have_sgmm = hasattr(torch, "_scaled_grouped_mm") and not args.dry_run
    name = torch.cuda.get_device_name(0) if dev == "cuda" else "cpu"
    print(f"# torch {torch.__version__} device {name} grouped_mm {int(have_gmm)} "
          f"scaled_grouped_mm {int(have_sgmm)}", flush=True)
    f8 = torch.float8_e4m3fn
    F8MAX = torch.finfo(f8).max

    def offs_of(counts):
        return torch.cumsum(torch.tensor(counts, dtype=torch.int64), 0).to(torch.int32).to(dev)

    # ---- the grouped GEMM (a loop of matmuls on the CPU dry run)
    def gmm(a, b, offs):
        if have_gmm:
            return torch._grouped_mm(a, b, offs=offs)
        ends = offs.tolist()
        starts = [0] + ends[:-1]
        if a.dim() == 2 and b.dim() == 3:  # (T, K) x (E, K, N) -> (T, N)
            return torch.cat([a[s:e] @ b[i] for i, (s, e) in enumerate(zip(starts, ends))], 0)
        # (K, T) x (T, N) -> (E, K, N), the reduction over each group's tokens
        return torch.stack([a[:, s:e] @ b[s:e] for s, e in zip(starts, ends)], 0)

    # ---- FP8 (tensorwise scale broadcast to the kernel's rowwise vectors)
    def q8(t):
        """e4m3 with one scale (bf16 arithmetic: no fp32 copy of GBs of weights)."""
        amax = t.abs().amax().float().clamp(min=1e-12)
        s = F8MAX / amax
        return (t * s.to(t.dtype)).to(f8), (1.0 / s)

    def sgmm(a8, sa, b8, sb, offs, rows_a, cols_b, groups):
        """a8 (T, K) row-major or (K, T) for 2-D x 2-D; b8 (E, K, N) column-major or (T, N)
        column-major; scales as fp32 vectors."""
        scale_a = sa.expand(rows_a).contiguous()
        scale_b = sb.expand(cols_b).contiguous() if groups is None else sb.expand(groups, cols_b).contiguous()
        return torch._scaled_grouped_mm(a8, b8, scale_a, scale_b, offs=offs, out_dtype=torch.bfloat16,
                                        use_fast_accum=True)

    def colmajor(t):  # same values, column-major in the last two dims
        return t.transpose(-2, -1).contiguous().transpose(-2, -1)

    def bench(fn, reps_max=20, target_ms=10.0):
        if dev == "cpu":
            a = time.perf_counter()
            fn()
            return (time.perf_counter() - a) * 1e3
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        first = 0.0
        for _ in range(2):
            e0.record()
            fn()
            e1.record()
            e1.synchronize()
            first = e0.elapsed_time(e1)
        reps = max(3, min(reps_max, int(target_ms / max(first, 1e-3)) + 1))
        ts = []
        for _ in range(reps):
            e0.record()
            fn()
            e1.record()
            e1.synchronize()
            ts.append(e0.elapsed_time(e1))
        return median(ts)

    gen = torch.Generator(device=dev).manual_seed(7)  # on the GPU: the experts' weights are GBs

    def setup(h, f, counts, with_grad=False):
        T = sum(counts)
        E = len(counts)
        r = lambda *s: torch.randn(*s, generator=gen, device=dev, dtype=torch.bfloat16)  # noqa: E731
        st = dict(T=T, E=E, offs=offs_of(counts))
        st["x"] = r(T, h)
        st["w1"] = r(E, f, h) * 0.02
        st["w3"] = r(E, f, h) * 0.02
        st["w2"] = r(E, h, f) * 0.02
        st["a"] = r(T, f)
        st["g"] = r(T, h)
        st["gh1"] = r(T, f)
        st["gh3"] = r(T, f)
        return st

    def passes_bf16(st):
        x, w1, w2, w3, a, g, gh1, gh3, offs = (st[k] for k in ("x", "w1", "w2", "w3", "a", "g", "gh1", "gh3", "offs"))

        def fwd():
            return (gmm(x, w1.transpose(-2, -1), offs), gmm(x, w3.transpose(-2, -1), offs),
                    gmm(a, w2.transpose(-2, -1), offs))

        def dgrad():
            return gmm(g, w2, offs), gmm(gh1, w1, offs), gmm(gh3, w3, offs)

        def wgrad():
            return gmm(a.t(), g, offs), gmm(x.t(), gh1, offs), gmm(x.t(), gh3, offs)
        return {"fwd": fwd, "dgrad": dgrad, "wgrad": wgrad}

    def passes_fp8(st):
        """FP8 operands made once (the casts are moe_parts_torch.py's); the GEMMs alone."""
        x, w1, w2, w3, a, g, gh1, gh3, offs = (st[k] for k in ("x", "w1", "w2", "w3", "a", "g", "gh1", "gh3", "offs"))
        T, E = st["T"], st["E"]
        h, f = x.shape[1], a.shape[1]
        x8, sx = q8(x)
        a8, sa = q8(a)
        g8, sg = q8(g)
        gh18, sgh1 = q8(gh1)
        gh38, sgh3 = q8(gh3)
        w18, s1 = q8(w1)
        w38, s3 = q8(w3)
        w28, s2 = q8(w2)
        # forward: B = W^T (E, K, N) column-major is W (E, N, K) row-major viewed transposed
        w1t, w3t, w2t = w18.transpose(-2, -1), w38.transpose(-2, -1), w28.transpose(-2, -1)
        # data gradient: B = W (E, N, K) must be column-major: a transposed copy (what torchao keeps)
        w1c, w3c, w2c = colmajor(w18), colmajor(w38), colmajor(w28)
        # weight gradient: A (K, T) row-major, B (T, N) column-major
        xt, at = x8.t().contiguous(), a8.t().contiguous()
        gc, gh1c, gh3c = colmajor(g8), colmajor(gh18), colmajor(gh38)

        def fwd():
            return (sgmm(x8, sx, w1t, s1, offs, T, f, E), sgmm(x8, sx, w3t, s3, offs, T, f, E),
                    sgmm(a8, sa, w2t, s2, offs, T, h, E))

        def dgrad():
            return (sgmm(g8, sg, w2c, s2, offs, T, f, E), sgmm(gh18, sgh1, w1c, s1, offs, T, h, E),
                    sgmm(gh38, sgh3, w3c, s3, offs, T, h, E))

        def wgrad():
            return (sgmm(at, sa, gc, sg, offs, f * E, h * E, None), sgmm(xt, sx, gh1c, sgh1, offs, h * E, f * E, None),
                    sgmm(xt, sx, gh3c, sgh3, offs, h * E, f * E, None))
        return {"fwd": fwd, "dgrad": dgrad, "wgrad": wgrad}

    def reference(st):
        """float32 loop of matmuls: the three passes' results."""
        offs = st["offs"].tolist()
        starts = [0] + offs[:-1]
        fl = {k: st[k].float() for k in ("x", "w1", "w2", "w3", "a", "g", "gh1", "gh3")}
        out = {"fwd": ([], [], []), "dgrad": ([], [], []), "wgrad": ([], [], [])}
        for e, (s, t) in enumerate(zip(starts, offs)):
            x, a, g, gh1, gh3 = (fl[k][s:t] for k in ("x", "a", "g", "gh1", "gh3"))
            w1, w2, w3 = fl["w1"][e], fl["w2"][e], fl["w3"][e]
            for lst, v in zip(out["fwd"], (x @ w1.t(), x @ w3.t(), a @ w2.t())):
                lst.append(v)
            for lst, v in zip(out["dgrad"], (g @ w2, gh1 @ w1, gh3 @ w3)):
                lst.append(v)
            for lst, v in zip(out["wgrad"], (a.t() @ g, x.t() @ gh1, x.t() @ gh3)):
                lst.append(v)
        return {k: [torch.cat(v, 0) if k != "wgrad" else torch.stack(v, 0) for v in vs] for k, vs in out.items()}

    def rel(got, ref):
        num = den = 0.0
        for gg, rr in zip(got, ref):
            gg = gg.float()
            if not torch.isfinite(gg).all():
                return float("inf")
            num += float(((gg - rr) ** 2).sum())
            den += float((rr ** 2).sum())
        return math.sqrt(num / den)

    # ---- checks on a small random case (unequal counts, one idle expert)
    counts = [16, 40, 0, 24, 8, 32]
    st = setup(256, 128, counts)
    ref = reference(st)
    fp8_ok = have_sgmm
    for prec, mk in (("bf16", passes_bf16), ("fp8", passes_fp8)):
        if prec == "fp8" and not have_sgmm:
            print("check fp8 skipped (no torch._scaled_grouped_mm)", flush=True)
            continue
        try:
            ps = mk(st)
        except Exception as exc:  # noqa: BLE001
            print(f"check {prec}_setup nan FAIL {type(exc).__name__}:{str(exc)[:200]}".replace("\n", " "), flush=True)
            fp8_ok = False
            continue
        for pname, fn in ps.items():
            try:
                got = fn()
                if dev == "cuda":
                    torch.cuda.synchronize()
                err = rel(got, ref[pname])
                ok = err < (2e-2 if prec == "bf16" else 8e-2)
            except Exception as exc:  # noqa: BLE001
                err, ok = float("nan"), False
                print(f"# {prec} {pname}: {type(exc).__name__}: {str(exc)[:300]}".replace("\n", " "), flush=True)
            if prec == "fp8" and not ok:
                fp8_ok = False
            print(f"check {prec}_{pname} {err:.3e} {'PASS' if ok else 'FAIL'}", flush=True)
    del st, ref

    models = MODELS if args.models == "all" else [m for m in MODELS if m[0] in args.models.split(",")]
    if args.dry_run:
        models = [(n, 64, 32, min(e, 8)) for n, h, f, e in models[:2]]
    pts = grid(models, args.max_pairs, args.max_tflop, args.max_m if not args.dry_run else 64)
    print(f"# grid {len(pts)} points ({sum(p[5] for p in pts)} coarse); fp8 {int(fp8_ok)}", flush=True)
    print("# tgmm MODEL E M DIST PASS PREC MS TFLOPS STATUS", flush=True)
    rng = torch.Generator().manual_seed(12345)
    done = 0
    for name, h, f, E, m, coarse in pts:
        if time.time() > t_end:
            print(f"# budget of {args.budget_s:.0f} s spent after {done} of {len(pts)} points", flush=True)
            break
        for dist in ("uniform", "random"):
            if dist == "random" and not (coarse and E >= 4):
                continue
            if dist == "uniform":
                counts = [m] * E
            else:
                pick = torch.randint(0, E, (E * m // 8,), generator=rng)
                counts = (torch.bincount(pick, minlength=E) * 8).tolist()
                print(f"tgmm_counts {name} {E} {m} " + ",".join(str(c) for c in counts), flush=True)
            try:
                st = setup(h, f, counts)
            except Exception as exc:  # noqa: BLE001
                print(f"tgmm {name} {E} {m} {dist} all bf16 nan nan setup:{type(exc).__name__}", flush=True)
                if dev == "cuda":
                    torch.cuda.empty_cache()
                continue
            T = st["T"]
            fl = 6.0 * T * h * f
            variants = [("bf16", passes_bf16)]
            if fp8_ok and dist == "uniform":
                variants.append(("fp8", passes_fp8))
            for prec, mk in variants:
                try:
                    ps = mk(st)
                except Exception as exc:  # noqa: BLE001
                    print(f"tgmm {name} {E} {m} {dist} all {prec} nan nan {type(exc).__name__}", flush=True)
                    continue
                for pname, fn in ps.items():
                    try:
                        ms = bench(fn)
                        print(f"tgmm {name} {E} {m} {dist} {pname} {prec} {ms:.4f} {fl / (ms * 1e-3) / 1e12:.2f} ok",
                              flush=True)
                    except Exception as exc:  # noqa: BLE001
                        msg = (type(exc).__name__ + ":" + str(exc).split("\n")[0][:100]).replace(" ", "_")
                        print(f"tgmm {name} {E} {m} {dist} {pname} {prec} nan nan {msg}", flush=True)
                del ps
            # the autograd forward + backward of the whole expert MLP (activation included)
            if dist == "uniform":
                w1 = st["w1"].requires_grad_()
                w2 = st["w2"].requires_grad_()
                w3 = st["w3"].requires_grad_()
                x = st["x"].requires_grad_()
                offs, g = st["offs"], st["g"]

                def fwd_bwd():
                    h1 = gmm(x, w1.transpose(-2, -1), offs)
                    h3 = gmm(x, w3.transpose(-2, -1), offs)
                    out = gmm(F.silu(h1) * h3, w2.transpose(-2, -1), offs)
                    out.backward(g)
                    x.grad = w1.grad = w2.grad = w3.grad = None
                try:
                    ms = bench(fwd_bwd)
                    print(f"tgmm {name} {E} {m} {dist} fwd_bwd bf16 {ms:.4f} {3 * fl / (ms * 1e-3) / 1e12:.2f} ok",
                          flush=True)
                except Exception as exc:  # noqa: BLE001
                    msg = (type(exc).__name__ + ":" + str(exc).split("\n")[0][:100]).replace(" ", "_")
                    print(f"tgmm {name} {E} {m} {dist} fwd_bwd bf16 nan nan {msg}", flush=True)
                del w1, w2, w3, x
            del st
            if dev == "cuda":
                torch.cuda.empty_cache()
        done += 1
    print(f"# done {done} of {len(pts)} points", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
