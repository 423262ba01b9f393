#!/usr/bin/env python3
"""The MoE layer's parts other than the expert GEMMs, timed one by one the
way torchtitan 0.2.2's MoE (its models/moe package: the MoE module and its utilities) runs
them, on one GPU, per model shape and tokens per micro-batch; forward, data
gradient and weight gradient apart. The expert GEMMs are
grouped_mm_torch.py's and grouped_gemm_sweep.cu's.

Written from reading torchtitan's source (not copied): the same operations
in the same order, so that their kernels and bytes are the framework's.
Parts (T tokens, k = top-k, E experts, d hidden, f expert ffn, X = the
activations' dtype: fp32 as under torchtitan's bf16 autocast with fp32
parameters, where the block's norm output is fp32, or bf16):
  router_gate    the gate GEMM (T, d) x (d, E) in bf16 (autocast): fwd,
                 dgrad (T, E) x (E, d), wgrad (E, T) x (T, d)
  router_topk    scores in fp32: softmax or sigmoid, + the load-balancing
                 bias, DeepSeek's group-limited choice (8 groups: the two best
                 scores of each group summed, top-4 groups kept, the rest
                 masked) where the model has it, top-k, gather of the chosen
                 scores, normalisation, scale, the histc of expert counts:
                 fwd; dgrad (autograd back to the logits)
  permute        histc, stable argsort of the T k choices, the scores gathered
                 into expert order, the tokens gathered (x[i // k]), then the
                 padding permutation that torchtitan runs without expert
                 parallelism (each expert's rows padded to a multiple of 8, at
                 least 8; a zero row appended; rows gathered): fwd; dgrad (the
                 gathers' backward: scatter-adds into (T, d))
  unpermute      the padding undone (scatter into an empty buffer, last row
                 dropped), the rows scattered back to choice order into zeros,
                 the k outputs of each token combined with its scores by a
                 (1 x k) x (k x d) bmm in fp32, cast to X: fwd; dgrad (to the
                 expert outputs and to the scores)
  swiglu         silu(h1) * h3 on (T k, f) bf16: fwd, dgrad
  act_cast       x.bfloat16() of the routed rows and the output's
                 .type_as(x) (fp32 X only): fwd, dgrad
  weight_cast    w1, w2, w3 .bfloat16() of E_local fp32 experts (torchtitan
                 casts the expert weights every forward under autocast with
                 fp32 parameters): fwd; dgrad (the bf16 gradients back to fp32)
  shared_mlp     the shared expert, a dense SwiGLU MLP (d x f_shared), bf16
                 GEMMs: fwd (3), dgrad (3), wgrad (3); its activation is the
                 swiglu part at (T, f_shared)
  shared_mlp_fp8 the same GEMMs through torch._scaled_mm, e4m3, tensorwise
                 scales (torchao's Float8Linear): fwd, dgrad, wgrad
  fp8_cast       dynamic tensorwise cast bf16 -> e4m3 (amax, scale, cast) of
                 the routed rows (T k, d) and of (T k, f): fwd (the backward
                 casts its gradients with the same kernels)
Per part the bytes it must move and the FLOPs it must do are printed with
the time, for the fit (fit_sweeps.py moe).

Checks, on every (model, T) before its timings, against a simple reference
in float64 / float32 on the same random inputs: the gate GEMM, the chosen
experts (set equality with a sort-based float64 top-k) and their scores,
permute + unpermute with identity experts (= x times the sum of each
token's scores), the scatter-add of the permute's backward (index_add in
float64), SwiGLU, the shared MLP, the FP8 MLP (against bf16). A failed
check is printed (check ... FAIL) and the part is still timed.

Timing: CUDA events, 2 warm-ups, the median of 3..30 repetitions (about
10 ms measured); fresh random normal inputs per (model, T, dtype), never
zeros; backward through torch.autograd.grad with the graph retained.

Output lines:
  part MODEL T X PART PASS MS BYTES FLOPS LAUNCH_NOTE STATUS
  check MODEL T X WHAT REL_ERR PASS|FAIL
  layer MODEL T X PASS MS STATUS        (torchtitan's own MoE module, when importable)
  python3 moe_parts_torch.py [--budget-s 60] [--tokens 1024,4096,8192,16384] [--models ..] [--dry-run]
"""

import argparse
import math
import sys
import time

# name: d, f, experts, top_k, groups, top groups, shared ffn (0: none), score, gate bias
MODELS = {
    "qwen3-30b-a3b": (2048, 768, 128, 8, 0, 0, 0, "softmax", 0),
    "qwen3-235b-a22b": (4096, 1536, 128, 8, 0, 0, 0, "softmax", 0),
    "deepseek-v3": (7168, 2048, 256, 8, 8, 4, 2048, "sigmoid", 0),
    "kimi-k2": (7168, 2048, 384, 8, 0, 0, 2048, "sigmoid", 0),
    "gpt-oss-120b": (2880, 2880, 128, 4, 0, 0, 0, "softmax", 1),
    "gpt-oss-20b": (2880, 2880, 32, 4, 0, 0, 0, "softmax", 1),
    "llama-4-scout": (5120, 8192, 16, 1, 0, 0, 8192, "sigmoid", 0),
    "mixtral-8x7b": (4096, 14336, 8, 2, 0, 0, 0, "softmax", 0),
    "mixtral-8x22b": (6144, 16384, 8, 2, 0, 0, 0, "softmax", 0),
}
ALIGN = 8  # torchtitan's TOKEN_GROUP_ALIGN_SIZE_M for bf16
WEIGHT_CAST_MAX_E = 32  # local experts in the weight-cast part (bytes scale with E)


def median(ts):
    ts = sorted(ts)
    n = len(ts)
    return ts[n // 2] if n % 2 else 0.5 * (ts[n // 2 - 1] + ts[n // 2])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--budget-s", type=float, default=60.0)
    ap.add_argument("--tokens", default="1024,4096,8192,16384")
    ap.add_argument("--models", default="all")
    ap.add_argument("--dtypes", default="fp32,bf16")
    ap.add_argument("--no-layer", action="store_true", help="skip torchtitan's whole MoE module")
    ap.add_argument("--dry-run", action="store_true", help="tiny shapes on the CPU")
    args = ap.parse_args()
    import torch
    import torch.nn.functional as F
    dev = "cpu" if args.dry_run else "cuda"
    if dev == "cuda" and not torch.cuda.is_available():
        print("# no GPU", flush=True)
        return 0
    t_end = time.time() + args.budget_s
    name = torch.cuda.get_device_name(0) if dev == "cuda" else "cpu"
    have_smm = hasattr(torch, "_scaled_mm") and dev == "cuda"
    print(f"# torch {torch.__version__} device {name} scaled_mm {int(have_smm)}", flush=True)
    bf, f32, f8 = torch.bfloat16, torch.float32, torch.float8_e4m3fn
    F8MAX = torch.finfo(f8).max
    gen = torch.Generator(device=dev).manual_seed(11)  # on the GPU: some inputs are GBs

    def rnd(*shape, dtype=bf, scale=1.0):
        t = torch.randn(*shape, generator=gen, device=dev, dtype=dtype)
        return t.mul_(scale) if scale != 1.0 else t

    def sync():
        if dev == "cuda":
            torch.cuda.synchronize()

    def bench(fn, reps_max=30, target_ms=10.0):
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

    def relerr(got, ref):
        got, ref = got.double(), ref.double()
        if not torch.isfinite(got).all():
            return float("inf")
        return float((got - ref).norm() / ref.norm().clamp(min=1e-30))

    # ------------------------------------------------------------------ the operations
    def route(logits, bias, E, k, groups, top_groups, score, norm=True, scale=1.0):
        """torchtitan's router after the gate: returns (top_scores (T, k) fp32, indices (T, k), counts)."""
        s = torch.sigmoid(logits.float()) if score == "sigmoid" else F.softmax(logits.float(), dim=1)
        choice = s + bias
        if groups:
            per = E // groups
            g = choice.view(-1, groups, per)
            gscore = g.topk(2, dim=-1)[0].sum(-1)
            keep = torch.topk(gscore, k=top_groups, dim=-1, sorted=False)[1]
            mask = torch.ones_like(gscore, dtype=torch.bool).scatter_(1, keep, False)
            choice = g.masked_fill(mask.unsqueeze(-1), float("-inf")).view(-1, E)
        idx = torch.topk(choice, k=k, dim=-1, sorted=False)[1]
        top = s.gather(1, idx)
        if norm:
            top = top / (top.sum(-1, keepdim=True) + 1e-20)
        top = top * scale
        counts = torch.histc(idx.view(-1).float() if dev == "cpu" else idx.view(-1), bins=E, min=0, max=E)
        return top, idx, counts

    def pad_indices(counts, E, n):
        """The padding permutation for grouped_mm without expert parallelism: row i of the
        padded buffer takes sorted row perm[i] (-1: the appended zero row)."""
        c = counts.to(torch.int64)
        start = torch.cumsum(c, 0) - c
        sizes = (torch.clamp_min(c, ALIGN) + ALIGN - 1) // ALIGN * ALIGN
        write = torch.cumsum(sizes, 0) - sizes
        max_len = (n + E * ALIGN + ALIGN - 1) // ALIGN * ALIGN
        e_of = torch.repeat_interleave(torch.arange(E, device=c.device), c, output_size=n)
        dest = write[e_of] + torch.arange(n, device=c.device) - start[e_of]
        perm = torch.full((max_len,), -1, dtype=torch.int64, device=c.device)
        perm[dest] = torch.arange(n, device=c.device)
        return perm, sizes

    def permute(x, top, idx, E, k):
        counts = torch.histc(idx.view(-1).float() if dev == "cpu" else idx.view(-1), bins=E, min=0, max=E)
        order = torch.argsort(idx.view(-1), stable=True)
        scores_sorted = top.view(-1)[order]
        routed = x[order // k]
        perm, _ = pad_indices(counts, E, routed.shape[0])
        padded = torch.vstack((routed, routed.new_zeros((1, routed.shape[-1]))))[perm]
        return padded, order, perm, scores_sorted

    def unpermute(out_padded, order, perm, top, T, k, xdtype):
        n = order.shape[0]
        d = out_padded.shape[-1]
        buf = out_padded.new_empty((n + 1, d))
        buf[perm] = out_padded
        routed_out = buf[:-1]
        unsorted = torch.zeros((n, d), dtype=routed_out.dtype, device=routed_out.device)
        unsorted[order] = routed_out
        unsorted = unsorted.reshape(-1, k, d)
        return torch.bmm(top.reshape(-1, 1, k), unsorted.float()).to(xdtype).squeeze(1)

    # ------------------------------------------------------------------ the layer's parts
    def emit(mdl, T, xname, part, pas, ms, nbytes, flops, note="", status="ok"):
        print(f"part {mdl} {T} {xname} {part} {pas} {ms:.5f} {int(nbytes)} {int(flops)} {note or '-'} {status}",
              flush=True)

    def timed(mdl, T, xname, part, pas, fn, nbytes, flops, note=""):
        try:
            ms = bench(fn)
            emit(mdl, T, xname, part, pas, ms, nbytes, flops, note)
        except Exception as exc:  # noqa: BLE001
            msg = (type(exc).__name__ + ":" + str(exc).split("\n")[0][:120]).replace(" ", "_")
            emit(mdl, T, xname, part, pas, float("nan"), nbytes, flops, note, msg)

    def check(mdl, T, xname, what, err, tol):
        print(f"check {mdl} {T} {xname} {what} {err:.3e} {'PASS' if err < tol else 'FAIL'}", flush=True)

    def agrad(out, inputs, g):
        return lambda: torch.autograd.grad(out, inputs, g, retain_graph=True)

    def run_model(mdl, T, xname):
        d, f, E, k, groups, top_groups, fs, score, gbias = MODELS[mdl]
        xd = f32 if xname == "fp32" else bf
        xb = 4 if xd == f32 else 2
        n = T * k
        # ---- router_gate (bf16 GEMM under autocast)
        x = rnd(T, d, dtype=xd)
        xg = x.to(bf)
        wg = rnd(E, d, scale=0.02)
        ref = x.double() @ wg.double().t()
        check(mdl, T, xname, "router_gate", relerr(xg @ wg.t(), ref), 2e-2)
        gl = rnd(T, E)
        gb = 2 * (T * d + E * d + T * E)
        timed(mdl, T, xname, "router_gate", "fwd", lambda: xg @ wg.t(), gb, 2 * T * d * E)
        timed(mdl, T, xname, "router_gate", "dgrad", lambda: gl @ wg, gb, 2 * T * d * E)
        timed(mdl, T, xname, "router_gate", "wgrad", lambda: gl.t() @ xg, gb, 2 * T * d * E)
        # ---- router_topk (fp32 scores)
        logits = rnd(T, E, dtype=f32).requires_grad_()
        bias = rnd(E, dtype=f32, scale=1e-3)
        top, idx, counts = route(logits, bias, E, k, groups, top_groups, score)
        # reference: float64 sort-based
        with torch.no_grad():
            s64 = torch.sigmoid(logits.double()) if score == "sigmoid" else F.softmax(logits.double(), 1)
            ch = s64 + bias.double()
            if groups:
                per = E // groups
                gs = ch.view(T, groups, per).sort(-1, descending=True)[0][..., :2].sum(-1)
                kept = gs.argsort(-1, descending=True)[:, :top_groups]
                m = torch.ones(T, groups, dtype=torch.bool, device=ch.device)
                m.scatter_(1, kept, False)
                ch = ch.view(T, groups, per).masked_fill(m.unsqueeze(-1), float("-inf")).view(T, E)
            ridx = ch.argsort(-1, descending=True)[:, :k]
            same = (idx.sort(-1)[0] == ridx.sort(-1)[0]).all(-1).double().mean()
            rtop = s64.gather(1, idx)
            rtop = rtop / rtop.sum(-1, keepdim=True)
        check(mdl, T, xname, "router_topk_choice_mismatch", float(1 - same), 1e-3)
        check(mdl, T, xname, "router_topk_scores", relerr(top.detach(), rtop), 1e-5)
        tb = 4 * T * E * 3 + 12 * T * k
        gtop = rnd(T, k, dtype=f32)
        timed(mdl, T, xname, "router_topk", "fwd",
              lambda: route(logits.detach(), bias, E, k, groups, top_groups, score), tb, 0,
              f"groups={groups}")
        timed(mdl, T, xname, "router_topk", "dgrad", agrad(top, [logits], gtop), 4 * T * E * 3 + 8 * T * k, 0)
        del logits, top, gtop
        # ---- permute (from the router's real choices, biased random logits: some imbalance)
        with torch.no_grad():
            lg = xg.float() @ wg.float().t()
            top, idx, counts = route(lg, bias, E, k, groups, top_groups, score)
        xr = x.detach().clone().requires_grad_()
        padded, order, perm, scores_sorted = permute(xr, top, idx, E, k)
        pb = n * d * xb * 2 + (perm.shape[0]) * d * xb * 2 + n * 8 * 4
        timed(mdl, T, xname, "permute", "fwd", lambda: permute(x, top, idx, E, k), pb, 0)
        gp = rnd(*padded.shape, dtype=xd)
        timed(mdl, T, xname, "permute", "dgrad", agrad(padded, [xr], gp), pb + T * d * xb, 0)
        # check the scatter-add: dX[t] = sum of the gradient rows of t's k copies (float64:
        # on the smaller token counts only, the reference is 4x the rows' bytes)
        gx = ref = rows = src = None
        if n * d <= (1 << 27):
            (gx,) = torch.autograd.grad(padded, [xr], gp, retain_graph=True)
            ref = torch.zeros(T, d, dtype=torch.float64, device=x.device)
            rows = gp.double()[perm >= 0]
            src = order[perm[perm >= 0]] // k
            ref.index_add_(0, src, rows)
            check(mdl, T, xname, "permute_scatter_add", relerr(gx, ref), 1e-2)
        # ---- unpermute + combine
        outp = padded.detach().clone().requires_grad_()
        topg = top.detach().clone().requires_grad_()
        comb = unpermute(outp, order, perm, topg, T, k, xd)
        ref = x.double() * top.double().sum(-1, keepdim=True)  # identity experts
        check(mdl, T, xname, "permute_unpermute_identity", relerr(comb.detach(), ref), 1e-2)
        ub = perm.shape[0] * d * xb * 2 + n * d * xb * 2 + n * d * 4 + T * d * xb
        timed(mdl, T, xname, "unpermute", "fwd", lambda: unpermute(padded.detach(), order, perm, top, T, k, xd),
              ub, 2 * n * d)
        gc = rnd(T, d, dtype=xd)
        timed(mdl, T, xname, "unpermute", "dgrad", agrad(comb, [outp, topg], gc), ub + n * d * 4, 4 * n * d)
        del xr, padded, gp, gx, outp, topg, comb, ref, rows, src
        # ---- act_cast (fp32 activations: x.bfloat16() of the routed rows, .type_as back)
        if xd == f32:
            rows32 = rnd(n, d, dtype=f32)
            rows16 = rnd(n, d)
            timed(mdl, T, xname, "act_cast", "fwd", lambda: (rows32.to(bf), rows16.to(f32)), n * d * 12, 0)
            timed(mdl, T, xname, "act_cast", "dgrad", lambda: (rows32.to(bf), rows16.to(f32)), n * d * 12, 0)
            del rows32, rows16
        # ---- swiglu on the routed rows (bf16, inside the experts)
        h1 = rnd(n, f).requires_grad_()
        h3 = rnd(n, f).requires_grad_()
        a = F.silu(h1) * h3
        check(mdl, T, xname, "swiglu", relerr(a.detach(), F.silu(h1.double()) * h3.double()), 1e-2)
        ga = rnd(n, f)
        timed(mdl, T, xname, "swiglu", "fwd", lambda: F.silu(h1.detach()) * h3.detach(), 6 * n * f, 0)
        timed(mdl, T, xname, "swiglu", "dgrad", agrad(a, [h1, h3], ga), 10 * n * f, 0)
        del h1, h3, a, ga
        # ---- weight_cast (fp32 parameters only)
        if xd == f32:
            El = min(E, WEIGHT_CAST_MAX_E)
            ws = [rnd(El, f, d, dtype=f32, scale=0.02) for _ in range(3)]
            gs16 = [rnd(El, f, d, scale=0.02) for _ in range(3)]
            timed(mdl, T, xname, "weight_cast", "fwd", lambda: [w.to(bf) for w in ws], 3 * El * f * d * 6, 0,
                  f"E_local={El}")
            timed(mdl, T, xname, "weight_cast", "dgrad", lambda: [g.to(f32) for g in gs16], 3 * El * f * d * 6, 0,
                  f"E_local={El}")
            del ws, gs16
        # ---- fp8 casts (tensorwise, dynamic)
        if have_smm or dev == "cpu":
            r1 = rnd(n, d)
            r2 = rnd(n, f)

            def cast8(t):
                amax = t.abs().amax().float()
                s = F8MAX / amax.clamp(min=1e-12)
                return (t.float() * s).clamp(-F8MAX, F8MAX).to(f8), s.reciprocal()
            timed(mdl, T, xname, "fp8_cast", "fwd", lambda: (cast8(r1), cast8(r2)), n * (d + f) * (2 + 2 + 1), 0)
            del r1, r2
        # ---- shared expert (dense SwiGLU MLP)
        if fs:
            xs = x.to(bf)
            w1, w3 = rnd(fs, d, scale=0.02), rnd(fs, d, scale=0.02)
            w2 = rnd(d, fs, scale=0.02)
            g = rnd(T, d)
            gh = rnd(T, fs)
            hs = rnd(T, fs)
            ref = (F.silu(xs.double() @ w1.double().t()) * (xs.double() @ w3.double().t())) @ w2.double().t()
            got = (F.silu(xs @ w1.t()) * (xs @ w3.t())) @ w2.t()
            check(mdl, T, xname, "shared_mlp", relerr(got, ref), 2e-2)
            fl = 6 * T * d * fs
            sb = 2 * (3 * d * fs + 3 * T * d + 3 * T * fs)
            timed(mdl, T, xname, "shared_mlp", "fwd", lambda: (xs @ w1.t(), xs @ w3.t(), hs @ w2.t()), sb, fl)
            timed(mdl, T, xname, "shared_mlp", "dgrad", lambda: (g @ w2, gh @ w1, gh @ w3), sb, fl)
            timed(mdl, T, xname, "shared_mlp", "wgrad", lambda: (g.t() @ hs, gh.t() @ xs, gh.t() @ xs), sb, fl)
            hsh = rnd(T, fs).requires_grad_()
            hsh3 = rnd(T, fs).requires_grad_()
            ash = F.silu(hsh) * hsh3
            timed(mdl, T, xname, "swiglu_shared", "fwd", lambda: F.silu(hsh.detach()) * hsh3.detach(), 6 * T * fs, 0)
            timed(mdl, T, xname, "swiglu_shared", "dgrad", agrad(ash, [hsh, hsh3], gh), 10 * T * fs, 0)
            if have_smm:
                def q(t):
                    amax = t.abs().amax().float().clamp(min=1e-12)
                    return (t.float() * (F8MAX / amax)).to(f8), (amax / F8MAX)
                x8, sx = q(xs)
                h8, sh = q(hs)
                g8, sg = q(g)
                gh8, sgh = q(gh)
                w18, s1 = q(w1)
                w38, s3 = q(w3)
                w28, s2 = q(w2)
                # _scaled_mm: A row-major, B column-major
                w1T, w3T, w2T = w18.t(), w38.t(), w28.t()           # (d, fs), (d, fs), (fs, d) col-major
                w2c = w28.t().contiguous().t()                        # (d, fs) col-major for g @ w2
                w1c, w3c = w18.t().contiguous().t(), w38.t().contiguous().t()  # (fs, d) col-major
                gT, ghT = g8.t().contiguous(), gh8.t().contiguous()   # (d, T), (fs, T) row-major
                hsc, xsc = h8.t().contiguous().t(), x8.t().contiguous().t()    # (T, fs), (T, d) col-major

                def smm(a8, sa, b8, sb_):
                    return torch._scaled_mm(a8, b8, scale_a=sa, scale_b=sb_, out_dtype=bf, use_fast_accum=True)
                try:
                    got8 = smm(x8, sx, w1T, s1)
                    check(mdl, T, xname, "shared_mlp_fp8_fc1", relerr(got8, xs.double() @ w1.double().t()), 8e-2)
                except Exception as exc:  # noqa: BLE001
                    print(f"# shared fp8: {type(exc).__name__}: {str(exc)[:200]}".replace("\n", " "), flush=True)
                timed(mdl, T, xname, "shared_mlp_fp8", "fwd",
                      lambda: (smm(x8, sx, w1T, s1), smm(x8, sx, w3T, s3), smm(h8, sh, w2T, s2)), sb / 2, fl)
                timed(mdl, T, xname, "shared_mlp_fp8", "dgrad",
                      lambda: (smm(g8, sg, w2c, s2), smm(gh8, sgh, w1c, s1), smm(gh8, sgh, w3c, s3)), sb / 2, fl)
                timed(mdl, T, xname, "shared_mlp_fp8", "wgrad",
                      lambda: (smm(gT, sg, hsc, sh), smm(ghT, sgh, xsc, sx), smm(ghT, sgh, xsc, sx)), sb / 2, fl)
            del xs, w1, w2, w3, g, gh, hs, hsh, hsh3, ash

    # ------------------------------------------------------------------ torchtitan's own module
    def run_layer(mdl, T):
        """torchtitan 0.2.2's MoE module (all experts on this GPU, fp32 parameters, bf16
        autocast, fp32 input as its blocks give it): forward and forward + backward, for the
        sum-of-parts check."""
        try:
            from torchtitan.models.moe import MoEArgs
            from torchtitan.models.moe.moe import MoE
        except Exception as exc:  # noqa: BLE001
            print(f"# torchtitan MoE not importable: {type(exc).__name__}", flush=True)
            return False
        d, f, E, k, groups, top_groups, fs, score, gbias = MODELS[mdl]
        try:
            ma = MoEArgs(num_experts=E, num_shared_experts=1 if fs else 0, score_func=score, route_norm=True,
                         route_scale=1.0, gate_bias=bool(gbias), score_before_experts=False, top_k=k,
                         num_expert_groups=groups or None, num_limited_groups=top_groups or None,
                         use_grouped_mm=dev == "cuda")
            layer = MoE(ma, dim=d, hidden_dim=f).to(dev)
            with torch.no_grad():
                layer.init_weights(0.02, torch.device(dev))
            x = rnd(1, T, d, dtype=f32).requires_grad_()
            g = rnd(1, T, d, dtype=f32)

            def fwd():
                with torch.no_grad(), torch.autocast(dev, dtype=bf):
                    return layer(x)

            def fwd_bwd():
                with torch.autocast(dev, dtype=bf):
                    out = layer(x)
                out.backward(g)
                x.grad = None
                for p in layer.parameters():
                    p.grad = None
            for pas, fn in (("fwd", fwd), ("fwd_bwd", fwd_bwd)):
                ms = bench(fn, reps_max=10)
                print(f"layer {mdl} {T} fp32 {pas} {ms:.4f} ok E={E} k={k}", flush=True)
            del layer, x, g
        except Exception as exc:  # noqa: BLE001
            msg = (type(exc).__name__ + ":" + str(exc).split("\n")[0][:120]).replace(" ", "_")
            print(f"layer {mdl} {T} fp32 all nan {msg}", flush=True)
        if dev == "cuda":
            torch.cuda.empty_cache()
        return True

    models = list(MODELS) if args.models == "all" else args.models.split(",")
    tokens = [int(t) for t in args.tokens.split(",")]
    if args.dry_run:
        for m in list(MODELS):
            d, f, E, k, g, tg, fs, sc, gb = MODELS[m]
            MODELS[m] = (64, 32, min(E, 16) if not g else 16, min(k, 4), 4 if g else 0, 2 if g else 0,
                         32 if fs else 0, sc, gb)
        tokens = [64, 128]
        _histc = torch.histc  # torchtitan counts integer expert ids with histc, which the CPU lacks

        def histc(x, *a, **kw):
            return _histc(x.float(), *a, **kw).to(x.dtype) if not x.is_floating_point() else _histc(x, *a, **kw)
        torch.histc = histc
    print("# part MODEL T X PART PASS MS BYTES FLOPS NOTE STATUS", flush=True)
    # order: every model at the middle token count first, then the rest (the budget cuts density)
    order = [(m, t) for t in tokens[1:2] for m in models] + [(m, t) for t in tokens if t != tokens[1]
                                                              for m in models] if len(tokens) > 1 else \
        [(m, tokens[0]) for m in models]
    for mdl, T in order:
        for xname in args.dtypes.split(","):
            if time.time() > t_end:
                print(f"# budget of {args.budget_s:.0f} s spent at {mdl} T {T} {xname}", flush=True)
                return 0
            try:
                run_model(mdl, T, xname)
            except Exception as exc:  # noqa: BLE001
                msg = (type(exc).__name__ + ":" + str(exc).split("\n")[0][:160]).replace(" ", "_")
                print(f"part {mdl} {T} {xname} all all nan 0 0 - {msg}", flush=True)
            if dev == "cuda":
                torch.cuda.empty_cache()
    if not args.no_layer:
        for mdl in ("qwen3-30b-a3b", "gpt-oss-20b", "mixtral-8x7b"):
            for T in (4096, 8192) if not args.dry_run else (64,):
                if time.time() > t_end:
                    print("# budget spent before the whole-layer timings", flush=True)
                    return 0
                if not run_layer(mdl, T):
                    break
    print("# done", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
