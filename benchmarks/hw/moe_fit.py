#!/usr/bin/env python3
"""The MoE layer's fit (issue 33): constants for the layout simulator's MoE
layer from the raw output of grouped_gemm_sweep.cu (cuBLAS), grouped_mm_torch.py
(torch._grouped_mm, what torchtitan runs) and moe_parts_torch.py (router,
permutation, tails, shared expert). Pure Python (no numpy), run through
`fit_sweeps.py moe`; prints markdown, writes the constants as JSON.

  python3 benchmarks/hw/fit_sweeps.py moe --card h100 --json moe_layer_fit_h100.json \\
      --cublas grouped_gemm_sweep_h100.txt --torch grouped_mm_torch_h100.txt \\
      --parts moe_parts_h100.txt

THE MODELS
Grouped expert GEMMs, per implementation, precision and pass (fwd, dgrad,
wgrad; fc1 and fc2 pooled), a row being one timed batch over E local experts
with t_e tokens each:
    t = L c_launch + sum over GEMMs g of the pass, experts e with t_e > 0 of
          ( c_expert + ((F_ge / (P eff))^q + (B_ge / BW)^q)^(1/q) )
F_ge = 2 M N K, B_ge = the bytes of one expert's GEMM read and written once
(A and B at the input width, 2 bytes in bf16 and 1 in FP8, C in bf16); P the
dense peak (bf16 989, FP8 1979 TFLOP/s: H100 and H200 SXM); L the launches of
the row (1 for a cuBLAS batch, 3 for a torch pass of three grouped GEMMs).
Five constants: c_launch (us), c_expert (us), eff, BW (TB/s), q (the knee
between the weight-bytes bound of few tokens and the FLOP bound of many).
The per-expert term carries what one curve in tokens per expert cannot: the
cost of many small experts (Qwen3's 128 x 768, DeepSeek-V3's 256 x 2048) and
of unequal counts (each expert's own roofline, idle experts free).
Fitted by Levenberg-Marquardt on log(model / measured), parameters in logs.

Other parts, per part and pass:  t = c_launch + bytes / BW + FLOPs / R
(R only for the GEMM parts: router gate, shared MLP), by linear least
squares on the relative error over every subset of the three terms, the
best subset with no negative coefficient kept.

THE FIT ROWS (named before any error was seen, 2026-12-06):
  GEMMs: the uniform rows with log2(E) + log2(m / 8) even (a checkerboard
  over the grid: every model, every E and every m has fit rows); held out:
  the odd ones and every "random"-distribution row (unequal counts: the
  per-expert form is tested where it was not fitted).
  Parts: the rows at T = 1,024 and 16,384 tokens; held out: 4,096 and 8,192.
  rms is stated over the fit rows, the held-out rows and all rows.
"""

import argparse
import collections
import json
import math
import os
import statistics as st
import sys

PEAK = {"bf16": 989e12, "fp8": 1979e12}
DIMS = {"qwen3-30b-a3b": (2048, 768), "qwen3-235b-a22b": (4096, 1536), "deepseek-v3": (7168, 2048),
        "gpt-oss": (2880, 2880), "llama-4-scout": (5120, 8192), "mixtral-8x7b": (4096, 14336),
        "mixtral-8x22b": (6144, 16384)}
PASS_OF = {"fc1_fwd": "fwd", "fc2_fwd": "fwd", "fc1_dgrad": "dgrad", "fc2_dgrad": "dgrad",
           "fc1_wgrad": "wgrad", "fc2_wgrad": "wgrad"}
# which implementation each framework profile stands for (the layout simulator's profiles)
FRAMEWORK_IMPL = {
    "torchtitan": "torch_grouped_mm (torch._grouped_mm, CUTLASS; FP8: torch._scaled_grouped_mm "
                  "through torchao's prototype)",
    "hf": "torch_grouped_mm (transformers' experts_implementation grouped_mm; under bf16 autocast "
          "with fp32 parameters it multiplies in fp32: see benchmarks/frameworks/README.md)",
    "megatron": "cublas_grouped (Transformer Engine's grouped GEMM = cuBLAS grouped / "
                "multi-stream cuBLAS GEMMs; the closest measured here is cublasGemmGroupedBatchedEx, "
                "with cublas_loop as the multi-stream fallback's bound)",
}


def kind_dims(kind, h, f, t):
    return {"fc1_fwd": (t, 2 * f, h), "fc2_fwd": (t, h, f), "fc1_dgrad": (t, h, 2 * f),
            "fc2_dgrad": (t, f, h), "fc1_wgrad": (h, 2 * f, t), "fc2_wgrad": (f, h, t)}[kind]


def torch_pass_dims(pas, h, f, t):
    """The three grouped GEMMs of a torch pass (torchtitan: w1 and w3 apart), (M, N, K) each."""
    if pas == "fwd":
        return [(t, f, h), (t, f, h), (t, h, f)]
    if pas == "dgrad":
        return [(t, f, h), (t, h, f), (t, h, f)]
    return [(f, h, t), (h, f, t), (h, f, t)]


def is_fit_row(E, m, dist):
    return dist == "uniform" and (round(math.log2(E)) + round(math.log2(m / 8))) % 2 == 0


# ----------------------------------------------------------------------------- parsing

def old_random_counts(models_in_file):
    """The per-expert counts of grouped_gemm_sweep.cu before issue 33 (no 'counts' lines):
    chunks of 16 tokens, one LCG (seed 12345) over (model, E, m) in the sweep's order."""
    order = [("mixtral-8x7b", [8]), ("qwen3-30b-a3b", [16, 128]), ("deepseek-v3", [8, 32])]
    rng = 12345
    out = {}
    for name, Es in order:
        if name not in models_in_file:
            continue
        for E in Es:
            m = 16
            while m <= 4096:
                cnt = [0] * E
                for _ in range(E * m // 16):
                    rng = (rng * 1664525 + 1013904223) & 0xFFFFFFFF
                    cnt[(rng >> 8) % E] += 16
                out[(name, E, m)] = cnt
                m *= 2
    return out


def parse_cublas(path):
    rows, counts, meta = [], {}, []
    old = True
    for line in open(path):
        f = line.split()
        if not f:
            continue
        if f[0] == "counts":
            counts[(f[1], int(f[2]), int(f[3]))] = [int(x) for x in f[4].split(",")]
        elif line.startswith("# grid"):
            old = False
        elif f[0] == "grouped" and f[-1] == "ok":
            rows.append(dict(model=f[1], E=int(f[2]), m=int(f[3]), dist=f[4], kind=f[5], method=f[6],
                             ms=float(f[7])))
        elif line.startswith("# device") or line.startswith("reference"):
            meta.append(line.strip())
    if old:
        counts = old_random_counts({r["model"] for r in rows})
    for r in rows:
        r["counts"] = [r["m"]] * r["E"] if r["dist"] == "uniform" else counts.get((r["model"], r["E"], r["m"]))
    return [r for r in rows if r["counts"] and r["model"] in DIMS], meta, old


def parse_torch(path):
    rows, counts, meta = [], {}, []
    for line in open(path):
        f = line.split()
        if not f:
            continue
        if f[0] == "tgmm_counts":
            counts[(f[1], int(f[2]), int(f[3]))] = [int(x) for x in f[4].split(",")]
        elif f[0] == "tgmm" and f[-1] == "ok":
            rows.append(dict(model=f[1], E=int(f[2]), m=int(f[3]), dist=f[4], pas=f[5], prec=f[6],
                             ms=float(f[7])))
        elif line.startswith("# torch") or f[0] == "check":
            meta.append(line.strip())
    for r in rows:
        r["counts"] = [r["m"]] * r["E"] if r["dist"] == "uniform" else counts.get((r["model"], r["E"], r["m"]))
    return [r for r in rows if r["counts"] and r["model"] in DIMS], meta


def parse_parts(path):
    rows, checks, layers, meta = [], [], [], []
    for line in open(path):
        f = line.split()
        if not f:
            continue
        if f[0] == "part" and f[-1] == "ok" and len(f) == 11:
            rows.append(dict(model=f[1], T=int(f[2]), x=f[3], part=f[4], pas=f[5], ms=float(f[6]),
                             bytes=float(f[7]), flops=float(f[8]), note=f[9]))
        elif f[0] == "check":
            checks.append(f[1:])
        elif f[0] == "layer":
            layers.append(f[1:])
        elif line.startswith("# torch"):
            meta.append(line.strip())
    return rows, checks, layers, meta


# ----------------------------------------------------------------------------- the GEMM model

def gemm_terms(row, source):
    """[(multiplicity, M, N, K)] of the row's expert GEMMs, and its launches L."""
    h, f = DIMS[row["model"]]
    cnt = collections.Counter(t for t in row["counts"] if t > 0)
    terms = []
    if source == "cublas":
        for t, k in cnt.items():
            terms.append((k,) + kind_dims(row["kind"], h, f, t))
        return terms, 1
    for t, k in cnt.items():
        for d in torch_pass_dims(row["pas"], h, f, t):
            terms.append((k,) + d)
    return terms, 3


def gemm_time(theta, terms, L, prec):
    c0, c1, eff, bw, q = theta
    P = PEAK[prec]
    bin_ = 1 if prec == "fp8" else 2
    t = L * c0 * 1e-6
    for k, M, N, K in terms:
        tc = 2.0 * M * N * K / (P * eff)
        tm = ((M * K + N * K) * bin_ + M * N * 2) / (bw * 1e12)
        hi, lo = max(tc, tm), min(tc, tm)
        t += k * (c1 * 1e-6 + hi * (1.0 + (lo / hi) ** q) ** (1.0 / q))  # (tc^q + tm^q)^(1/q), no overflow
    return t * 1e3  # ms


# bounds of the constants (c_launch us, c_expert us, eff, BW TB/s, q - 1) in the fit's log space
BOUNDS = [(1e-3, 1e4), (1e-4, 1e4), (1e-3, 1.5), (0.05, 20.0), (1e-2, 30.0)]


def solve(A, b):
    """Gaussian elimination with partial pivoting for a small dense system."""
    n = len(b)
    M = [list(A[i]) + [b[i]] for i in range(n)]
    for c in range(n):
        p = max(range(c, n), key=lambda r: abs(M[r][c]))
        if abs(M[p][c]) < 1e-300:
            return None
        M[c], M[p] = M[p], M[c]
        for r in range(n):
            if r != c:
                fct = M[r][c] / M[c][c]
                for j in range(c, n + 1):
                    M[r][j] -= fct * M[c][j]
    return [M[i][n] / M[i][i] for i in range(n)]


def lm_fit(rows, prec, theta0, iters=60):
    """Levenberg-Marquardt on r_i = log(model_i / measured_i), parameters in logs."""
    pre = [(gemm_terms(r, r["_src"]), r["ms"]) for r in rows]
    p = [math.log(v) for v in theta0]

    def resid(pp):
        th = [math.exp(v) for v in pp]
        th[4] = 1.0 + th[4]  # q = 1 + exp(.) > 1
        return [math.log(gemm_time(th, terms, L, prec) / ms) for (terms, L), ms in pre]
    p[4] = math.log(max(theta0[4] - 1.0, 1e-3))
    r = resid(p)
    cost = sum(x * x for x in r)
    lam = 1e-2
    for _ in range(iters):
        J = []
        for j in range(5):
            pj = list(p)
            pj[j] += 1e-4
            rj = resid(pj)
            J.append([(a - b) / 1e-4 for a, b in zip(rj, r)])
        JTJ = [[sum(J[a][i] * J[b][i] for i in range(len(r))) for b in range(5)] for a in range(5)]
        JTr = [sum(J[a][i] * r[i] for i in range(len(r))) for a in range(5)]
        improved = False
        for _ in range(8):
            A = [[JTJ[a][b] + (lam * JTJ[a][a] if a == b else 0.0) for b in range(5)] for a in range(5)]
            step = solve(A, [-v for v in JTr])
            if step is None:
                lam *= 10
                continue
            pn = [a + b for a, b in zip(p, step)]
            pn = [min(max(v, math.log(lo_)), math.log(hi_)) for v, (lo_, hi_) in zip(pn, BOUNDS)]
            rn = resid(pn)
            cn = sum(x * x for x in rn)
            if cn < cost:
                p, r, cost = pn, rn, cn
                lam = max(lam / 3, 1e-7)
                improved = True
                break
            lam *= 10
        if not improved or cost < 1e-12:
            break
    th = [math.exp(v) for v in p]
    th[4] = 1.0 + th[4]
    return th


def rel_errors(rows, th, prec):
    out = []
    for r in rows:
        terms, L = gemm_terms(r, r["_src"])
        out.append(gemm_time(th, terms, L, prec) / r["ms"] - 1.0)
    return out


def pct(x):
    return "-" if x is None or x != x else f"{100 * x:.1f}%"


def rms(v):
    return math.sqrt(st.mean(x * x for x in v)) if v else float("nan")


def fit_gemm_group(rows, prec):
    fit = [r for r in rows if is_fit_row(r["E"], r["m"], r["dist"])]
    held = [r for r in rows if not is_fit_row(r["E"], r["m"], r["dist"])]
    if len(fit) < 6:
        return None
    th = lm_fit(fit, prec, [10.0, 2.0, 0.7, 3.0, 2.0])
    ef, eh = rel_errors(fit, th, prec), rel_errors(held, th, prec)
    ea = ef + eh
    worst_i = max(range(len(ea)), key=lambda i: abs(ea[i]))
    wr = (fit + held)[worst_i]
    where = f"{wr['model']} E={wr['E']} m={wr['m']} {wr['dist']} {wr.get('kind', wr.get('pas'))}"
    return dict(c_launch_us=round(th[0], 3), c_expert_us=round(th[1], 3), eff=round(th[2], 4),
                bw_tb_s=round(th[3], 3), q=round(th[4], 3), peak_tflops=PEAK[prec] / 1e12,
                n_fit=len(fit), n_heldout=len(held), rms_fit=nn(rms(ef)), rms_heldout=nn(rms(eh)),
                rms_all=nn(rms(ea)), worst=round(ea[worst_i], 4), worst_where=where,
                rms_heldout_random=nn(rms([e for e, r in zip(eh, held) if r["dist"] == "random"])))


# ----------------------------------------------------------------------------- the parts

PARTS_FIT_T = (1024, 16384)


def fit_part(rows):
    """t = a + b bytes + c flops (ms), least squares on the relative error; every subset of the
    three terms is tried and the best one with no negative coefficient kept (a non-negative
    least squares small enough to enumerate)."""
    fit = [r for r in rows if r["T"] in PARTS_FIT_T]
    held = [r for r in rows if r["T"] not in PARTS_FIT_T]
    if len(fit) < 2:
        return None
    terms = [0, 1] + ([2] if any(r["flops"] > 0 for r in fit) else [])
    best = None
    for mask in range(1, 1 << len(terms)):
        use = [terms[i] for i in range(len(terms)) if mask >> i & 1]
        X = [[(1.0, r["bytes"], r["flops"])[j] / r["ms"] for j in use] for r in fit]
        A = [[sum(x[i] * x[k] for x in X) for k in range(len(use))] for i in range(len(use))]
        bb = [sum(x[i] for x in X) for i in range(len(use))]
        sol = solve(A, bb)
        if sol is None or any(v < 0 for v in sol):
            continue
        coef = [0.0, 0.0, 0.0]
        for u, v in zip(use, sol):
            coef[u] = v
        e = rms([(coef[0] + coef[1] * r["bytes"] + coef[2] * r["flops"]) / r["ms"] - 1.0 for r in fit])
        if best is None or e < best[0] - 1e-12:
            best = (e, coef)
    if best is None:
        return None
    coef = best[1]

    def err(r):
        return (coef[0] + coef[1] * r["bytes"] + coef[2] * r["flops"]) / r["ms"] - 1.0
    ef, eh = [err(r) for r in fit], [err(r) for r in held]
    ea = ef + eh
    wi = max(range(len(ea)), key=lambda i: abs(ea[i]))
    wr = (fit + held)[wi]
    return dict(c_launch_us=round(coef[0] * 1e3, 3),
                bw_gb_s=round(1.0 / coef[1] / 1e6, 1) if coef[1] > 0 else None,
                tflops=round(1.0 / coef[2] / 1e9, 1) if coef[2] > 0 else None,
                n_fit=len(fit), n_heldout=len(held), rms_fit=nn(rms(ef)), rms_heldout=nn(rms(eh)),
                rms_all=nn(rms(ea)), worst=round(ea[wi], 4), worst_where=f"{wr['model']} T={wr['T']} {wr['x']}")


def nn(x, nd=4):
    """x rounded, or None for NaN (JSON has no NaN)."""
    return None if x != x else round(x, nd)


# ----------------------------------------------------------------------------- report

def main(argv):
    ap = argparse.ArgumentParser(prog="fit_sweeps.py moe")
    ap.add_argument("--card", required=True, help="the card the files were measured on (h100, h200, ..)")
    ap.add_argument("--cublas", help="grouped_gemm_sweep output")
    ap.add_argument("--torch", help="grouped_mm_torch.py output")
    ap.add_argument("--parts", help="moe_parts_torch.py output")
    ap.add_argument("--json", help="write the constants here")
    a = ap.parse_args(argv)
    if not (a.cublas or a.torch or a.parts):
        ap.error("give at least one of --cublas, --torch, --parts")
    out = dict(card=a.card, models="t = L c_launch + sum_e (c_expert + ((F/(P eff))^q + (B/BW)^q)^(1/q)); "
                                    "parts: t = c_launch + bytes/BW + FLOPs/R",
               split="GEMMs: fit = uniform rows with log2(E) + log2(m/8) even; held out = the odd ones and "
                     "every random-distribution row. Parts: fit = T 1024 and 16384, held out = 4096 and 8192.",
               framework_impl=FRAMEWORK_IMPL, sources={}, grouped_gemm={}, parts={})
    p = print
    p(f"# MoE layer fit, {a.card}")
    p("")
    p("Models and fit rows: benchmarks/hw/moe_fit.py (docstring) and moe_layer_sweep.md.")
    p("")
    if a.cublas or a.torch:
        groups = collections.defaultdict(list)
        if a.cublas:
            rows, meta, old = parse_cublas(a.cublas)
            out["sources"]["cublas"] = dict(file=os.path.basename(a.cublas), rows=len(rows), meta=meta,
                                            format="pre-issue-33 (counts regenerated)" if old else "issue 33")
            for r in rows:
                r["_src"] = "cublas"
                if r["method"] in ("loop", "grouped", "strided"):
                    groups[("cublas_" + r["method"], "bf16", PASS_OF[r["kind"]])].append(r)
                elif r["method"] == "fp8_loop":
                    groups[("cublas_fp8_loop", "fp8", PASS_OF[r["kind"]])].append(r)
        if a.torch:
            rows, meta = parse_torch(a.torch)
            out["sources"]["torch"] = dict(file=os.path.basename(a.torch), rows=len(rows), meta=meta)
            for r in rows:
                r["_src"] = "torch"
                if r["pas"] in ("fwd", "dgrad", "wgrad"):
                    groups[("torch_grouped_mm", r["prec"], r["pas"])].append(r)
        p("## Grouped expert GEMMs")
        p("")
        p("| implementation | precision | pass | c_launch us | c_expert us | eff | BW TB/s | q | rows fit / held out "
          "| rms fit | rms held out (random) | rms all | worst (where) |")
        p("|---|---|---|---:|---:|---:|---:|---:|---|---:|---:|---:|---|")
        for key in sorted(groups):
            res = fit_gemm_group(groups[key], key[1])
            if not res:
                continue
            out["grouped_gemm"].setdefault(key[0], {}).setdefault(key[1], {})[key[2]] = res
            p(f"| {key[0]} | {key[1]} | {key[2]} | {res['c_launch_us']:.1f} | {res['c_expert_us']:.2f} | "
              f"{res['eff']:.3f} | {res['bw_tb_s']:.2f} | {res['q']:.2f} | {res['n_fit']} / {res['n_heldout']} | "
              f"{pct(res['rms_fit'])} | {pct(res['rms_heldout'])} ({pct(res['rms_heldout_random'])}) | "
              f"{pct(res['rms_all'])} | {100 * res['worst']:+.0f}% ({res['worst_where']}) |")
        p("")
    if a.parts:
        rows, checks, layers, meta = parse_parts(a.parts)
        out["sources"]["parts"] = dict(file=os.path.basename(a.parts), rows=len(rows), meta=meta,
                                       checks_failed=[c for c in checks if c[-1] != "PASS"])
        by = collections.defaultdict(list)
        for r in rows:
            by[(r["part"], r["pas"])].append(r)
        p("## Other parts of the layer (t = c_launch + bytes / BW + FLOPs / R)")
        p("")
        p("| part | pass | c_launch us | BW GB/s | R TFLOP/s | rows fit / held out | rms fit | rms held out | "
          "rms all | worst (where) |")
        p("|---|---|---:|---:|---:|---|---:|---:|---:|---|")
        for key in sorted(by):
            res = fit_part(by[key])
            if not res:
                continue
            out["parts"].setdefault(key[0], {})[key[1]] = res
            p(f"| {key[0]} | {key[1]} | {res['c_launch_us']:.1f} | {res['bw_gb_s'] or '-'} | {res['tflops'] or '-'} | "
              f"{res['n_fit']} / {res['n_heldout']} | {pct(res['rms_fit'])} | {pct(res['rms_heldout'])} | "
              f"{pct(res['rms_all'])} | {100 * res['worst']:+.0f}% ({res['worst_where']}) |")
        p("")
        nf = [c for c in checks if c[-1] != "PASS"]
        p(f"Checks: {len(checks)}, failed {len(nf)}" + (": " + "; ".join(" ".join(c) for c in nf[:10]) if nf else "."))
        if layers:
            p("")
            p("torchtitan's own MoE module (fp32 parameters, bf16 autocast): " +
              "; ".join(" ".join(l[:5]) for l in layers))
    if a.json:
        with open(a.json, "w") as fh:
            json.dump(out, fh, indent=1)
            fh.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
