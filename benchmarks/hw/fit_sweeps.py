#!/usr/bin/env python3
"""Tables and fitted constants from the raw output of the GEMM sweeps
(no GPU needed): fp8_gemm_sweep.cu, grouped_gemm_sweep.cu and
grouped_mm_torch.py. Prints markdown; fp8_gemm_sweep.md and
grouped_gemm_sweep.md hold what it printed for the committed results.

  python3 benchmarks/hw/fit_sweeps.py fp8 benchmarks/hw/results/fp8_gemm_sweep_h200.txt
  python3 benchmarks/hw/fit_sweeps.py grouped benchmarks/hw/results/grouped_gemm_sweep_h200.txt \
      benchmarks/hw/results/grouped_mm_torch_h200.txt
  python3 benchmarks/hw/fit_sweeps.py moe --card h100 --json OUT.json [--cublas FILE] \
      [--torch FILE] [--parts FILE] > moe_layer_fit.md     # issue 33: see moe_layer_sweep.md

The GEMM model is the layout simulator's (sim/layout/compute_model.c,
gemm_shape_factor): efficiency = base * max over tiles and split-k of
w * tile * wave * k / (k + k_half), H200 with 132 SMs; TFLOP/s =
peak * efficiency with the datasheet dense peaks (bf16 989, fp8 1979).
"""

import collections
import math
import statistics as st
import sys

PEAK = {"bf16": 989e12, "fp8": 1979e12}
SMS = 132
TILES = [(256, 128, 1.0), (128, 256, 1.0), (128, 128, 0.9), (128, 64, 0.8), (64, 128, 0.8), (64, 64, 0.65)]


def shape_factor(m, n, k, batch=1, k_half=256.0):
    """compute_model.c's gemm_shape_factor, transcribed."""
    best = 0.0
    for tm_, tn_, w in TILES:
        tm, tn = math.ceil(m / tm_), math.ceil(n / tn_)
        tile_eff = m * n / (tm * tm_ * tn * tn_)
        sk = 1
        while sk <= 8:
            ks = math.ceil(k / sk)
            if sk > 1 and ks < 1024:
                break
            tiles = tm * tn * batch * sk
            wave = tiles / (math.ceil(tiles / SMS) * SMS)
            e = w * tile_eff * wave * (ks / (ks + k_half)) * (0.95 if sk > 1 else 1.0)
            best = max(best, e)
            sk *= 2
    return best


def fit_base(pts, peak, k_half):
    """pts: (m, n, k, batch, tflops). The base that minimises the squared
    log error, and the rms / worst relative error of the model with it."""
    logs = [math.log(t * 1e12 / (peak * shape_factor(m, n, k, b, k_half))) for m, n, k, b, t in pts]
    base = math.exp(st.mean(logs))
    errs = [peak * base * shape_factor(m, n, k, b, k_half) / (t * 1e12) - 1 for m, n, k, b, t in pts]
    return base, math.sqrt(st.mean(e * e for e in errs)), max(abs(e) for e in errs)


def fit_best(pts, peak):
    best = None
    for kh in (64, 128, 192, 256, 384, 512, 768, 1024):
        b, rms, worst = fit_base(pts, peak, kh)
        if best is None or rms < best[2]:
            best = (kh, b, rms, worst)
    return best


# ----------------------------------------------------------------------------- fp8

def fp8_report(path):
    gem = collections.defaultdict(dict)
    casts = []
    checks = []
    warm = []
    for line in open(path):
        f = line.split()
        if not f:
            continue
        if f[0] == "gemm":
            key = (f[1], f[2], f[3], int(f[4]), int(f[5]), int(f[6]), int(f[7]), int(f[8]))
            gem[key][f[9]] = float(f[11]) if f[11] != "nan" else None
        elif f[0] == "cast":
            casts.append((f[1], int(f[2]), int(f[3]), float(f[4]), float(f[5]), float(f[6])))
        elif f[0] == "check":
            checks.append(" ".join(f[1:]))
        elif line.startswith("# warm-up") or line.startswith("# device"):
            warm.append(line.strip("# \n"))
    kinds = ["bf16", "fp8_tensorwise", "fp8_tensorwise_fastacc", "fp8_block128"]
    out = []
    p = out.append
    p(f"Device: {warm[0] if warm else '?'}; " + "; ".join(warm[1:]))
    p("")
    p(f"Checks ({len(checks)}): " + ", ".join(checks))
    p("")
    p("### Every pass, all 432 shapes (TFLOP/s: mean / min / max)")
    p("")
    p("| pass | bf16 | fp8 tensorwise | fp8 tensorwise fast-acc | fp8 1x128 / 128x128 blocks |")
    p("|---|---:|---:|---:|---:|")
    for ps in ("fwd", "dgrad", "wgrad", "all"):
        cells = []
        for kd in kinds:
            v = [x[kd] for k, x in gem.items() if (ps == "all" or k[2] == ps) and x.get(kd)]
            cells.append(f"{st.mean(v):.0f} / {min(v):.0f} / {max(v):.0f}")
        p(f"| {ps} | " + " | ".join(cells) + " |")
    p("")
    p("### FP8 / bf16 time ratio (speed-up) by model, tp and tokens (mean over the 12 GEMMs of a layer: "
      "QKV, attention out, MLP in, MLP out, each fwd / dgrad / wgrad)")
    p("")
    p("| model | tp | tokens | bf16 TFLOP/s | tw TFLOP/s | tw / bf16 | tw fast / bf16 | block / bf16 | "
      "layer time bf16 (ms) | layer time tw (ms) |")
    p("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    groups = collections.defaultdict(list)
    for k, x in gem.items():
        groups[(k[0], k[3], k[4])].append((k, x))
    order = {"llama-3-8b": 0, "llama-3-70b": 1, "llama-3-405b": 2}
    for g in sorted(groups, key=lambda g: (order.get(g[0], 9), g[1], g[2])):
        xs = groups[g]
        r = {kd: st.mean(x[kd] / x["bf16"] for _, x in xs) for kd in kinds[1:]}
        # whole-layer time: sum of the 12 GEMM times
        t = {}
        for kd in ("bf16", "fp8_tensorwise"):
            t[kd] = sum(2 * k[5] * k[6] * k[7] / (x[kd] * 1e12) for k, x in xs) * 1e3
        fl = sum(2 * k[5] * k[6] * k[7] for k, _ in xs)
        p(f"| {g[0]} | {g[1]} | {g[2]} | {fl / (t['bf16'] * 1e-3) / 1e12:.0f} | "
          f"{fl / (t['fp8_tensorwise'] * 1e-3) / 1e12:.0f} | {r['fp8_tensorwise']:.2f} | "
          f"{r['fp8_tensorwise_fastacc']:.2f} | {r['fp8_block128']:.2f} | {t['bf16']:.3f} | "
          f"{t['fp8_tensorwise']:.3f} |")
    p("")
    p("### Ratio against the work of one GEMM (2mnk, binned by powers of two)")
    p("")
    p("| 2mnk (GFLOP) | shapes | bf16 TFLOP/s | tw / bf16 | tw fast / bf16 | block / bf16 |")
    p("|---:|---:|---:|---:|---:|---:|")
    b = collections.defaultdict(list)
    for k, x in gem.items():
        b[int(math.log2(2 * k[5] * k[6] * k[7]))].append(x)
    for L in sorted(b):
        xs = b[L]
        p(f"| {2 ** L / 1e9:.0f}-{2 ** (L + 1) / 1e9:.0f} | {len(xs)} | {st.mean(x['bf16'] for x in xs):.0f} | "
          + " | ".join(f"{st.mean(x[kd] / x['bf16'] for x in xs):.2f}" for kd in kinds[1:]) + " |")
    p("")
    p("### Fit: the simulator's GEMM model (base x shape factor) per precision, all 432 shapes")
    p("")
    p("| kind | peak (TFLOP/s) | k_half | base | rms error | worst | base, k_half 256 | rms at 256 |")
    p("|---|---:|---:|---:|---:|---:|---:|---:|")
    for kd in kinds:
        for ps in (("fwd", "dgrad", "wgrad"),) + ((("fwd", "dgrad"), ("wgrad",)) if kd == "fp8_block128" else ()):
            pts = [(k[5], k[6], k[7], 1, x[kd]) for k, x in gem.items() if x.get(kd) and k[2] in ps]
            peak = PEAK["bf16" if kd == "bf16" else "fp8"]
            kh, base, rms, worst = fit_best(pts, peak)
            b256, r256, _ = fit_base(pts, peak, 256)
            name = kd if len(ps) == 3 else f"{kd} ({'/'.join(ps)})"
            p(f"| {name} | {peak / 1e12:.0f} | {kh} | {base:.3f} | {rms * 100:.1f}% | {worst * 100:.0f}% | "
              f"{b256:.3f} | {r256 * 100:.1f}% |")
    p("")
    p("### FP8 casts (bf16 in, e4m3 out), bandwidth counting bytes read + written")
    p("")
    sizes = sorted({(c[1], c[2]) for c in casts})
    p("| kernel | bytes per element | " + " | ".join(f"{r}x{c} GB/s (of copy)" for r, c in sizes) + " |")
    p("|---|---:|" + "---:|" * len(sizes))
    bpe = {"copy_d2d_bf16": "4", "amax": "2", "cast_known_scale": "3", "cast_plus_amax_fused": "3",
           "tensorwise_dynamic_amax_then_cast": "5 (2 passes)", "transpose_cast": "3",
           "cast_and_transpose_cast_fused_amax": "4", "block1x128_cast": "3 + 1/32"}
    names = []
    for c in casts:
        if c[0] not in names:
            names.append(c[0])
    for nm in names:
        cells = []
        for sz in sizes:
            c = next(c for c in casts if c[0] == nm and (c[1], c[2]) == sz)
            cells.append(f"{c[4]:.0f} ({c[5]:.2f})")
        p(f"| {nm} | {bpe.get(nm, '?')} | " + " | ".join(cells) + " |")
    return "\n".join(out)


# ----------------------------------------------------------------------------- grouped

def kind_dims(kind, h, f, t):
    return {"fc1_fwd": (t, 2 * f, h), "fc2_fwd": (t, h, f), "fc1_dgrad": (t, h, 2 * f),
            "fc2_dgrad": (t, f, h), "fc1_wgrad": (h, 2 * f, t), "fc2_wgrad": (f, h, t)}[kind]


DIMS = {"mixtral-8x7b": (4096, 14336), "qwen3-30b-a3b": (2048, 768), "deepseek-v3": (7168, 2048)}
KINDS = ["fc1_fwd", "fc2_fwd", "fc1_dgrad", "fc2_dgrad", "fc1_wgrad", "fc2_wgrad"]


def knee(m, mh, q):
    """m / (m^q + mh^q)^(1/q): m / mh below the knee, 1 above it (q = 1: m / (m + mh))."""
    return m / (m ** q + mh ** q) ** (1.0 / q)


def fit_hyper(pts, qs=(1.0,)):
    """eff = e_inf * knee(m; m_half, q) by least squares on log eff over grids of m_half and q.
    Returns (e_inf, m_half, rms, worst, q)."""
    best = None
    for q in qs:
        for mh in [2 ** (i / 8) for i in range(0, 8 * 13)]:
            logs = [math.log(e) - math.log(knee(m, mh, q)) for m, e in pts]
            ei = math.exp(st.mean(logs))
            errs = [ei * knee(m, mh, q) / e - 1 for m, e in pts]
            rms = math.sqrt(st.mean(x * x for x in errs))
            if best is None or rms < best[2]:
                best = (ei, mh, rms, max(abs(x) for x in errs), q)
    return best


def roofline_time(E, M, N, K, base, bw, k_half=256.0, overhead_us=0.0):
    """The simulator's batched GEMM at peak * base * shape, or the bytes of the
    E GEMMs (A, B read once, C written once, bf16) at bw, whichever is longer."""
    fl = 2.0 * M * N * K * E
    tc = fl / (PEAK["bf16"] * base * shape_factor(M, N, K, E, k_half))
    tm = 2.0 * E * (M * K + N * K + M * N) / bw
    return max(tc, tm) + overhead_us * 1e-6


def grouped_report(path, torch_path=None):
    rows = collections.defaultdict(dict)  # (model, E, m, dist, kind) -> {method: (ms, tflops)}
    ref = None
    checks = []
    for line in open(path):
        f = line.split()
        if not f:
            continue
        if f[0] == "grouped" and f[-1] == "ok":
            rows[(f[1], int(f[2]), int(f[3]), f[4], f[5])][f[6]] = (float(f[7]), float(f[8]))
        elif f[0] == "reference":
            ref = float(f[4])
        elif f[0] == "check":
            checks.append(" ".join(f[1:]))
    out = []
    p = out.append
    p(f"Checks: {', '.join(checks)}. Dense bf16 8192^3 TN reference in the same run: {ref:.0f} TFLOP/s.")
    p("")
    ms_all = sorted({k[2] for k in rows})
    cfgs = sorted({(k[0], k[1]) for k in rows}, key=lambda c: (list(DIMS).index(c[0]), c[1]))
    # ---- table 1: all six GEMMs of a layer, best bf16 method, as TFLOP/s
    p("### Expert layer (all six GEMMs: fc1/fc2 forward, data and weight gradients), uniform "
      "tokens, bf16: TFLOP/s of the whole batch by method")
    p("")
    p("Each cell: loop / grouped / strided / fp8_loop, and in brackets the dense GEMM of the same FLOPs.")
    p("")
    p("| m (tokens / expert) | " + " | ".join(f"{c[0]} E={c[1]}" for c in cfgs) + " |")
    p("|---:|" + "---|" * len(cfgs))

    def layer_tflops(c, m, dist, method):
        t = 0.0
        fl = 0.0
        for kd in KINDS:
            r = rows.get((c[0], c[1], m, dist, kd), {})
            if method == "best":
                cand = [r[x][0] for x in ("loop", "grouped", "strided") if x in r]
                if not cand:
                    return None
                ms = min(cand)
            else:
                if method not in r:
                    return None
                ms = r[method][0]
            M, N, K = kind_dims(kd, *DIMS[c[0]], m)
            fl += 2.0 * M * N * K * c[1]
            t += ms
        return fl / (t * 1e-3) / 1e12

    for m in ms_all:
        cells = []
        for c in cfgs:
            v = [layer_tflops(c, m, "uniform", x) for x in ("loop", "grouped", "strided", "fp8_loop", "dense")]
            cells.append(" / ".join(f"{x:.0f}" if x else "-" for x in v[:4]) + f" [{v[4]:.0f}]")
        p(f"| {m} | " + " | ".join(cells) + " |")
    p("")
    # ---- table 2: efficiency of the best bf16 method vs dense-peak and per kind
    p("### Efficiency of the best bf16 method (min of loop, grouped, strided) against the bf16 peak "
      "(989 TFLOP/s), per GEMM kind, uniform")
    p("")
    for c in cfgs:
        p(f"{c[0]}, E = {c[1]}:")
        p("")
        p("| m | " + " | ".join(KINDS) + " | layer | random / uniform, time per FLOP (best of loop, grouped) |")
        p("|---:|" + "---:|" * (len(KINDS) + 2))
        for m in ms_all:
            cells = []
            for kd in KINDS:
                r = rows.get((c[0], c[1], m, "uniform", kd), {})
                cand = [r[x][1] for x in ("loop", "grouped", "strided") if x in r]
                cells.append(f"{max(cand) * 1e12 / PEAK['bf16']:.3f}" if cand else "-")
            lt = layer_tflops(c, m, "uniform", "best")
            # random vs uniform: summed best-of-(loop, grouped) times, flops differ slightly, so TFLOP/s ratio
            ru = []
            for kd in KINDS:
                u = rows.get((c[0], c[1], m, "uniform", kd), {})
                rr = rows.get((c[0], c[1], m, "random", kd), {})
                cu = [u[x][1] for x in ("loop", "grouped") if x in u]
                cr = [rr[x][1] for x in ("loop", "grouped") if x in rr]
                if cu and cr:
                    ru.append(max(cu) / max(cr))
            cells.append(f"{lt * 1e12 / PEAK['bf16']:.3f}" if lt else "-")
            cells.append(f"{st.mean(ru):.2f}" if ru else "-")
            p(f"| {m} | " + " | ".join(cells) + " |")
        p("")
    # ---- fits
    p("### Fits")
    p("")
    p("(a) Per model and local expert count, the whole layer's efficiency (the six GEMMs, best bf16 "
      "method, uniform) against tokens per expert m: eff(m) = e_inf * m / (m + m_half), least squares on "
      "log eff over the 9 points m = 16 .. 4096.")
    p("")
    p("A sharper knee fits better: eff(m) = e_inf * m / (m^q + m_half^q)^(1/q) (q = 1 is the form "
      "above; at large q, eff = e_inf * min(1, m / m_half): a roofline, linear in m while the expert "
      "weights' bytes bound the GEMM).")
    p("")
    p("| model | E | e_inf | m_half | rms (q = 1) | worst | q | e_inf | m_half | rms | worst |")
    p("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    allpts = []
    qs = (1.0, 1.5, 2.0, 3.0, 4.0)
    for c in cfgs:
        pts = []
        for m in ms_all:
            lt = layer_tflops(c, m, "uniform", "best")
            if lt:
                pts.append((m, lt * 1e12 / PEAK["bf16"]))
        allpts += pts
        a = fit_hyper(pts)
        b = fit_hyper(pts, qs)
        p(f"| {c[0]} | {c[1]} | {a[0]:.3f} | {a[1]:.0f} | {a[2] * 100:.1f}% | {a[3] * 100:.0f}% | "
          f"{b[4]:g} | {b[0]:.3f} | {b[1]:.0f} | {b[2] * 100:.1f}% | {b[3] * 100:.0f}% |")
    a = fit_hyper(allpts)
    b = fit_hyper(allpts, qs)
    p(f"| all five together | | {a[0]:.3f} | {a[1]:.0f} | {a[2] * 100:.1f}% | {a[3] * 100:.0f}% | "
      f"{b[4]:g} | {b[0]:.3f} | {b[1]:.0f} | {b[2] * 100:.1f}% | {b[3] * 100:.0f}% |")
    p("")
    p("(b) The simulator's own model, per GEMM: the batched GEMM (batch = E) at peak x base x shape "
      "factor, or reading A and B and writing C once at HBM bandwidth, whichever is longer "
      "(roofline), plus a fixed cost per batch. Against every uniform point (5 configurations x 9 m x "
      "6 kinds = 270 GEMM batches), best bf16 method; first row without the fixed cost, second with "
      "it, third the simulator's present constants:")
    p("")
    pts = []
    for (mdl, E, m, dist, kd), r in rows.items():
        if dist != "uniform":
            continue
        cand = [r[x][0] for x in ("loop", "grouped", "strided") if x in r]
        if cand:
            pts.append((mdl, E, m, kd, min(cand)))
    def score(base, bw, kh, c0):
        errs = []
        for mdl, E, m, kd, ms in pts:
            M, N, K = kind_dims(kd, *DIMS[mdl], m)
            errs.append((roofline_time(E, M, N, K, base, bw, kh, c0) / (ms * 1e-3) - 1, mdl, E, m, kd))
        rms = math.sqrt(st.mean(e[0] ** 2 for e in errs))
        return rms, max(errs, key=lambda e: abs(e[0]))

    p("| base | bandwidth (TB/s) | k_half | overhead per batch (us) | rms error | worst (where) | points |")
    p("|---:|---:|---:|---:|---:|---:|---:|")
    for c0s in ((0.0,), (0.0, 5.0, 10.0, 15.0, 20.0)):
        best = None
        for base in [0.60 + 0.01 * i for i in range(26)]:
            for bw in (3.0e12, 3.4e12, 3.6e12, 3.8e12, 4.0e12, 4.2e12):
                for kh in (128, 256, 512):
                    for c0 in c0s:
                        rms, worst = score(base, bw, kh, c0)
                        if best is None or rms < best[4]:
                            best = (base, bw, kh, c0, rms, worst)
        base, bw, kh, c0, rms, w = best
        p(f"| {base:.2f} | {bw / 1e12:.1f} | {kh} | {c0:.0f} | {rms * 100:.1f}% | "
          f"{abs(w[0]) * 100:.0f}% ({w[1]} E={w[2]} m={w[3]} {w[4]}) | {len(pts)} |")
    rms, w = score(0.738, 4.0e12, 256, 2.0)
    p(f"| 0.738 (gemm_sweep) | 4.0 | 256 | 2 (kernel_overhead_us) | {rms * 100:.1f}% | "
      f"{abs(w[0]) * 100:.0f}% ({w[1]} E={w[2]} m={w[3]} {w[4]}) | {len(pts)} |")
    p("")
    # ---- torch._grouped_mm
    if torch_path:
        tg = collections.defaultdict(dict)
        for line in open(torch_path):
            f = line.split()
            if f and f[0] == "torch_grouped_mm" and f[6] != "nan":
                tg[(f[1], int(f[2]), int(f[3]))][(f[4], f[5])] = float(f[7])
        p("### torch._grouped_mm (what torchtitan's and HF's MoE layers call): a SwiGLU expert MLP, "
          "TFLOP/s (efficiency against 989)")
        p("")
        tcfgs = sorted({(k[0], k[1]) for k in tg}, key=lambda c: (list(DIMS).index(c[0]), c[1]))
        p("| m | " + " | ".join(f"{c[0]} E={c[1]} fwd+bwd uniform / random" for c in tcfgs) + " |")
        p("|---:|" + "---|" * len(tcfgs))
        for m in sorted({k[2] for k in tg}):
            cells = []
            for c in tcfgs:
                d = tg.get((c[0], c[1], m), {})
                u, r = d.get(("uniform", "fwd_bwd")), d.get(("random", "fwd_bwd"))
                cells.append(f"{u:.0f} ({u * 1e12 / PEAK['bf16']:.2f}) / {r:.0f}" if u and r else "-")
            p(f"| {m} | " + " | ".join(cells) + " |")
        p("")
        p("(c) eff(m) = e_inf * m / (m^q + m_half^q)^(1/q) for torch._grouped_mm forward + backward, "
          "uniform (efficiency against 989):")
        p("")
        p("| model | E | q | e_inf | m_half | rms | worst |")
        p("|---|---:|---:|---:|---:|---:|---:|")
        for c in tcfgs:
            pts = [(m, tg[(c[0], c[1], m)][("uniform", "fwd_bwd")] * 1e12 / PEAK["bf16"])
                   for m in sorted({k[2] for k in tg}) if ("uniform", "fwd_bwd") in tg.get((c[0], c[1], m), {})]
            if len(pts) >= 3:
                ei, mh, rms, worst, q = fit_hyper(pts, (1.0, 1.5, 2.0, 3.0, 4.0))
                p(f"| {c[0]} | {c[1]} | {q:g} | {ei:.3f} | {mh:.0f} | {rms * 100:.1f}% | {worst * 100:.0f}% |")
    return "\n".join(out)


def main():
    if len(sys.argv) >= 2 and sys.argv[1] == "moe":
        import moe_fit  # the MoE layer's fit lives beside this file
        return moe_fit.main(sys.argv[2:])
    if len(sys.argv) < 3 or sys.argv[1] not in ("fp8", "grouped"):
        print(__doc__)
        return 2
    if sys.argv[1] == "fp8":
        print(fp8_report(sys.argv[2]))
    else:
        print(grouped_report(sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else None))
    return 0


if __name__ == "__main__":
    sys.exit(main())
