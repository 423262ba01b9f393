/*
 * moe_compute.c: one MoE layer's compute from the measured parts
 * (moe_compute.h has the model; inputs/moe_fit.h the constants' form).
 *
 * Where the figures come from:
 *   every constant    the fit of the MoE layer sweep on one H100 80GB HBM3
 *                     (2026-12-06; benchmarks/hw/results/moe_layer_fit_h100.json,
 *                     compiled in as moe_fit_builtin; rows and rms in the .md
 *                     beside it), or the file given with --moe-fit
 *   bytes and FLOPs   of each part: benchmarks/hw/moe_parts_torch.py's, which
 *                     the fit divided by
 *   stacks            torchtitan 0.2.2 runs torch._grouped_mm (w1, w3, w2
 *                     apart), its own permutation (histc, argsort, gathers,
 *                     padding to 8 rows an expert) and, under autocast with
 *                     fp32 parameters, fp32 activations and per-forward weight
 *                     casts; Megatron-Core runs Transformer Engine's
 *                     GroupedLinear (one cuBLAS GEMM per expert on several
 *                     streams: cublas_loop; FP8 cublas_fp8_loop) and its fused
 *                     permutation (data/frameworks/ says so per profile)
 *   expert spread     a log-normal of the rows per expert at the stated
 *                     coefficient of variation, in quantile bins (the
 *                     inverse normal by Acklam's rational approximation,
 *                     relative error below 1.2e-9)
 */
#include "moe_compute.h"

#include <math.h>
#include <string.h>

#include "model_params.h"

const char *moe_time_part_name(moe_time_part p) {
    static const char *const n[MOE_T_COUNT] = {"router", "permute", "experts", "tails", "shared"};
    return (unsigned)p < MOE_T_COUNT ? n[p] : "unknown";
}

/* ---- the grouped GEMMs ---------------------------------------------------- */

/* The fit of impl in prec for pass, or the nearest one the fit has:
 * another cuBLAS loop of the precision, then any bf16 implementation with
 * the pass (FP8 then priced at bf16's constants). *fp8 gets whether the
 * constants are FP8's. NULL when the fit has none (validate refuses that). */
static const moe_gemm_fit *gemm_fit(const moe_fit *f, moe_gemm_impl impl, precision prec, moe_pass pass, int *fp8) {
    const int want8 = prec == PRECISION_FP8;
    static const moe_gemm_impl order8[] = {MOE_IMPL_CUBLAS_FP8_LOOP, MOE_IMPL_TORCH_GROUPED_MM};
    static const moe_gemm_impl order16[] = {MOE_IMPL_CUBLAS_LOOP, MOE_IMPL_TORCH_GROUPED_MM, MOE_IMPL_CUBLAS_GROUPED,
                                            MOE_IMPL_CUBLAS_STRIDED};
    if (want8) {
        if ((unsigned)impl < MOE_IMPL_COUNT && f->gemm[impl][MOE_FIT_FP8][pass].have)
            return *fp8 = 1, &f->gemm[impl][MOE_FIT_FP8][pass];
        for (size_t i = 0; i < sizeof order8 / sizeof order8[0]; i++)
            if (f->gemm[order8[i]][MOE_FIT_FP8][pass].have) return *fp8 = 1, &f->gemm[order8[i]][MOE_FIT_FP8][pass];
    }
    *fp8 = 0;
    if ((unsigned)impl < MOE_IMPL_COUNT && f->gemm[impl][MOE_FIT_BF16][pass].have) return &f->gemm[impl][MOE_FIT_BF16][pass];
    for (size_t i = 0; i < sizeof order16 / sizeof order16[0]; i++)
        if (f->gemm[order16[i]][MOE_FIT_BF16][pass].have) return &f->gemm[order16[i]][MOE_FIT_BF16][pass];
    return NULL;
}

/* One expert GEMM of M x N x K: the fit's roofline with its knee q (us). */
static double expert_gemm_us(const moe_gemm_fit *g, double P, double bw, double bin, double M, double N, double K) {
    const double tc = 2.0 * M * N * K / (P * g->eff) * 1e6;
    const double tm = ((M * K + N * K) * bin + M * N * 2.0) / bw * 1e6;
    const double hi = tc > tm ? tc : tm, lo = tc > tm ? tm : tc;
    return g->c_expert_us + (hi > 0 ? hi * pow(1.0 + pow(lo / hi, g->q), 1.0 / g->q) : 0.0);
}

/* A pass of the grouped GEMMs over experts given as (rows, weight) pairs
 * (weight: how many experts have those rows; NULL: one each). */
static double grouped_pass_us(const cluster_gpu *gpu, const moe_fit *f, moe_gemm_impl impl, precision prec,
                              int fp32_gemm, moe_pass pass, const double *rows, const double *weight, int n, double h,
                              double fl, int gated) {
    int fp8 = 0;
    const moe_gemm_fit *g = gemm_fit(f, impl, prec, pass, &fp8);
    if (!g) return 0.0;
    precision pp = fp32_gemm ? PRECISION_FP32 : fp8 ? PRECISION_FP8 : PRECISION_BF16;
    double P = (unsigned)pp < PRECISION_COUNT ? gpu->peak_flops[pp] : 0.0;
    if (!(P > 0)) P = gpu->peak_flops[PRECISION_BF16];
    if (!(P > 0)) P = g->peak;
    const double bw = g->bw * (gpu->hbm_bw > 0 && f->hbm_bw > 0 ? gpu->hbm_bw / f->hbm_bw : 1.0);
    const double bin = fp32_gemm ? 4.0 : fp8 ? 1.0 : 2.0;
    const int torch = impl == MOE_IMPL_TORCH_GROUPED_MM;
    /* the pass's GEMMs (M, N, K) at t rows: torch runs w1, w3 (gated), w2 apart; cuBLAS fc1, fc2 */
    double dims[3][3];
    int ng = 0;
    const double up = gated ? 2.0 * fl : fl;
    for (int gi = 0; gi < 3; gi++) dims[gi][0] = dims[gi][1] = dims[gi][2] = 0;
    if (torch) {
        const int nw = gated ? 2 : 1; /* w1 (and w3), then w2 */
        for (int gi = 0; gi < nw + 1; gi++) {
            const int w2 = gi == nw;
            if (pass == MOE_PASS_FWD) { dims[gi][1] = w2 ? h : fl; dims[gi][2] = w2 ? fl : h; }
            else if (pass == MOE_PASS_DGRAD) { dims[gi][1] = w2 ? fl : h; dims[gi][2] = w2 ? h : fl; }
            else { dims[gi][0] = w2 ? fl : h; dims[gi][1] = w2 ? h : fl; }
        }
        ng = nw + 1;
    } else {
        if (pass == MOE_PASS_FWD) { dims[0][1] = up; dims[0][2] = h; dims[1][1] = h; dims[1][2] = fl; }
        else if (pass == MOE_PASS_DGRAD) { dims[0][1] = h; dims[0][2] = up; dims[1][1] = fl; dims[1][2] = h; }
        else { dims[0][0] = h; dims[0][1] = up; dims[1][0] = fl; dims[1][1] = h; }
        ng = 2;
    }
    double t = 0.0;
    int any = 0;
    for (int e = 0; e < n; e++) {
        const double we = weight ? weight[e] : 1.0;
        if (!(rows[e] > 0) || !(we > 0)) continue;
        any = 1;
        for (int gi = 0; gi < ng; gi++) {
            double M = dims[gi][0], N = dims[gi][1], K = dims[gi][2];
            if (pass == MOE_PASS_WGRAD) K = rows[e]; /* the weight gradient reduces over the rows */
            else M = rows[e];
            t += we * expert_gemm_us(g, P, bw, bin, M, N, K);
        }
    }
    return any ? t + ng * g->c_launch_us : 0.0;
}

double moe_grouped_gemm_us(const cluster_gpu *gpu, const moe_fit *f, moe_gemm_impl impl, precision prec,
                           moe_pass pass, const double *rows, int n_experts, int64_t h, int64_t f_local, int gated) {
    if (!gpu || !f || !rows || n_experts < 1 || (unsigned)pass >= MOE_PASS_COUNT) return 0.0;
    return grouped_pass_us(gpu, f, impl, prec, 0, pass, rows, NULL, n_experts, (double)h, (double)f_local, gated);
}

/* ---- the spread of rows over a rank's experts ------------------------------ */

/* The standard normal's inverse CDF (Acklam's algorithm). */
static double norm_inv(double p) {
    static const double a[] = {-3.969683028665376e+01, 2.209460984245205e+02, -2.759285104469687e+02,
                               1.383577518672690e+02,  -3.066479806614716e+01, 2.506628277459239e+00};
    static const double b[] = {-5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02,
                               6.680131188771972e+01,  -1.328068155288572e+01};
    static const double c[] = {-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00,
                               -2.549732539343734e+00, 4.374664141464968e+00,  2.938163982698783e+00};
    static const double d[] = {7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00,
                               3.754408661907416e+00};
    const double lo = 0.02425;
    if (p < lo) {
        const double q = sqrt(-2 * log(p));
        return (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
               ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
    }
    if (p > 1 - lo) return -norm_inv(1 - p);
    const double q = p - 0.5, r = q * q;
    return (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q /
           (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1);
}

#define MOE_BINS 16

/* rows R over El experts at coefficient of variation cv: at most MOE_BINS
 * (rows, weight) pairs of a log-normal's quantiles, scaled to sum to R. */
static int spread(double R, int El, double cv, double *rows, double *weight) {
    if (!(cv > 0) || El <= 1) {
        rows[0] = R / (El > 0 ? El : 1);
        weight[0] = El > 0 ? El : 1;
        return 1;
    }
    const int nb = El < MOE_BINS ? El : MOE_BINS;
    const double s2 = log(1.0 + cv * cv), s = sqrt(s2), w = (double)El / nb;
    double sum = 0.0;
    for (int i = 0; i < nb; i++) {
        rows[i] = exp(s * norm_inv((i + 0.5) / nb) - 0.5 * s2);
        weight[i] = w;
        sum += rows[i] * w;
    }
    for (int i = 0; i < nb; i++) rows[i] *= sum > 0 ? R / sum : 0.0;
    return nb;
}

/* ---- the other parts ------------------------------------------------------- */

typedef struct {
    const moe_fit *f;
    double bw_scale;   /* gpu HBM / the card's */
    double fl_scale;   /* gpu bf16 peak / the card's */
    double launch_us;  /* a fused kernel's launch (compute_params.kernel_overhead_us) */
} part_ctx;

/* c_launch + bytes / BW + FLOPs / R of part in pass (0 when the fit has
 * no such part). */
static double part_us(const part_ctx *c, moe_part part, moe_pass pass, double bytes, double flops) {
    const moe_part_fit *q = &c->f->part[part][pass];
    if (!q->have) return 0.0;
    double t = q->c_launch_us;
    if (q->bw > 0) t += bytes / (q->bw * c->bw_scale) * 1e6;
    if (q->flops > 0) t += flops / (q->flops * c->fl_scale) * 1e6;
    return t;
}

/* A fused kernel (Transformer Engine's permute, unpermute and casts): one
 * launch and its bytes moved once at the measured elementwise bandwidth
 * (the act_cast part's, a single-pass copy; else 70% of HBM). */
static double fused_us(const part_ctx *c, double bytes) {
    const moe_part_fit *q = &c->f->part[MOE_PART_ACT_CAST][MOE_PASS_FWD];
    const double bw = q->have && q->bw > 0 ? q->bw * c->bw_scale : 0.7 * c->f->hbm_bw * c->bw_scale;
    return c->launch_us + bytes / bw * 1e6;
}

static int resolved(int v, int dflt) { return v >= 0 ? v : dflt; }

pl_status moe_layer_time_us(const cluster_gpu *gpu, const gpt_config *cfg, const layout *l, const moe_params *mpp,
                            const compute_params *cpp, const moe_loads *loads, moe_layer_time *out) {
    if (!out) return PL_ERR_INVALID;
    memset(out, 0, sizeof *out);
    if (!gpu || !cfg || !l || !gpt_is_moe(cfg) || l->ep < 1 || cfg->n_experts % l->ep) return PL_ERR_INVALID;
    moe_params md;
    compute_params cd;
    if (!mpp) moe_params_default(&md), mpp = &md;
    if (!cpp) compute_params_default(&cd), cpp = &cd;
    moe_fit fb;
    const moe_fit *f = mpp->fit;
    if (!f) moe_fit_builtin(&fb), f = &fb;
    else if (moe_fit_validate(f, NULL, 0) != PL_OK) return PL_ERR_INVALID;
    const int El = cfg->n_experts / l->ep, etp = l->etp > 0 ? l->etp : 1, tp = l->tp > 0 ? l->tp : 1;
    const double cp = l->cp > 0 ? l->cp : 1, mbs = l->micro_batch > 0 ? l->micro_batch : 1;
    const double T = mbs * ceil(cfg->seq_len / cp), n = T / tp, k = cfg->top_k, h = cfg->d_model;
    const double E = cfg->n_experts, fl = (double)cfg->moe_d_ff / etp;
    const int gated = cfg->mlp == MLP_SWIGLU;
    /* the rows of the priced rank */
    double R = n * k * etp * moe_load_factor(mpp, cfg, l);
    double cv = mpp->expert_cv;
    const double *share = NULL;
    if (loads) {
        if (loads->tokens_per_gpu) {
            if (loads->n_gpus < 1) return PL_ERR_INVALID;
            int b = 0;
            for (int i = 0; i < loads->n_gpus; i++) {
                const double v = loads->tokens_per_gpu[i];
                if (!isfinite(v) || v < 0) return PL_ERR_INVALID;
                if (v > loads->tokens_per_gpu[b]) b = i;
            }
            out->busiest = b;
            R = loads->tokens_per_gpu[b];
        }
        if (loads->expert_share) {
            if (loads->n_local != El) return PL_ERR_INVALID;
            double s = 0;
            for (int i = 0; i < El; i++) {
                if (!isfinite(loads->expert_share[i]) || loads->expert_share[i] < 0) return PL_ERR_INVALID;
                s += loads->expert_share[i];
            }
            if (fabs(s - 1.0) > 1e-6) return PL_ERR_INVALID;
            share = loads->expert_share;
        }
        if (loads->expert_cv >= 0) cv = loads->expert_cv;
    }
    out->rows = R;
    /* the stack's choices (-1: Megatron's) */
    const precision prec = l->prec;
    const int fp8 = prec == PRECISION_FP8;
    const int impl = resolved(mpp->gemm_impl, fp8 ? MOE_IMPL_CUBLAS_FP8_LOOP : MOE_IMPL_CUBLAS_LOOP);
    const int fp32_act = resolved(mpp->fp32_act, 0), wcast = resolved(mpp->weight_cast, 0);
    const int fused = resolved(mpp->fused_permute, 1), fp32_gemm = resolved(mpp->fp32_gemm, 0);
    const double x = fp32_act ? 4.0 : 2.0;
    part_ctx c = {f, 1.0, 1.0, cpp->kernel_overhead_us};
    if (gpu->hbm_bw > 0 && f->hbm_bw > 0) c.bw_scale = gpu->hbm_bw / f->hbm_bw;
    {
        double ref = 0;
        for (int i = 0; i < MOE_IMPL_COUNT && !(ref > 0); i++)
            if (f->gemm[i][MOE_FIT_BF16][MOE_PASS_FWD].have) ref = f->gemm[i][MOE_FIT_BF16][MOE_PASS_FWD].peak;
        if (ref > 0 && gpu->peak_flops[PRECISION_BF16] > 0) c.fl_scale = gpu->peak_flops[PRECISION_BF16] / ref;
    }
    double (*u)[MOE_PASS_COUNT] = out->us;
    /* router */
    const double gb = 2.0 * (n * h + E * h + n * E), gf = 2.0 * n * h * E;
    for (int p = 0; p < MOE_PASS_COUNT; p++) u[MOE_T_ROUTER][p] += part_us(&c, MOE_PART_ROUTER_GATE, (moe_pass)p, gb, gf);
    u[MOE_T_ROUTER][MOE_PASS_FWD] += part_us(&c, MOE_PART_ROUTER_TOPK, MOE_PASS_FWD, 12.0 * n * E + 12.0 * n * k, 0);
    u[MOE_T_ROUTER][MOE_PASS_DGRAD] += part_us(&c, MOE_PART_ROUTER_TOPK, MOE_PASS_DGRAD, 12.0 * n * E + 8.0 * n * k, 0);
    /* permutation: torch's sort, histogram, gathers and padding (the fitted part), or one fused kernel
     * reading and writing the routed rows */
    const double P = R + 8.0 * El; /* rows padded to 8 an expert */
    const double pb = 2.0 * R * h * x + 2.0 * P * h * x + 32.0 * R;
    if (fused) {
        u[MOE_T_PERMUTE][MOE_PASS_FWD] += fused_us(&c, 2.0 * R * h * x);
        u[MOE_T_PERMUTE][MOE_PASS_DGRAD] += fused_us(&c, 2.0 * R * h * x + n * h * x);
    } else {
        u[MOE_T_PERMUTE][MOE_PASS_FWD] += part_us(&c, MOE_PART_PERMUTE, MOE_PASS_FWD, pb, 0);
        u[MOE_T_PERMUTE][MOE_PASS_DGRAD] += part_us(&c, MOE_PART_PERMUTE, MOE_PASS_DGRAD, pb + n * h * x, 0);
    }
    /* the grouped GEMMs over the rank's experts */
    double rows[MOE_BINS], wt[MOE_BINS];
    double *rr = rows, *ww = wt;
    double own_rows[MOE_BINS * 16], own_w[MOE_BINS * 16];
    int nb;
    if (share && El <= (int)(sizeof own_rows / sizeof own_rows[0])) {
        for (int i = 0; i < El; i++) own_rows[i] = R * share[i], own_w[i] = 1.0;
        rr = own_rows, ww = own_w, nb = El;
    } else if (share) { /* many local experts: the shares' own spread, binned */
        double m = 0, v = 0;
        for (int i = 0; i < El; i++) m += share[i];
        m /= El;
        for (int i = 0; i < El; i++) v += (share[i] - m) * (share[i] - m);
        nb = spread(R, El, m > 0 ? sqrt(v / El) / m : 0.0, rows, wt);
    } else {
        nb = spread(R, El, cv, rows, wt);
    }
    for (int p = 0; p < MOE_PASS_COUNT; p++)
        u[MOE_T_EXPERTS][p] = grouped_pass_us(gpu, f, (moe_gemm_impl)impl, prec, fp32_gemm, (moe_pass)p, rr, ww, nb, h, fl, gated);
    /* tails: the activation, unpermute + combine, casts */
    const double act_f = gated ? 6.0 : 4.0, act_b = gated ? 10.0 : 6.0;
    u[MOE_T_TAILS][MOE_PASS_FWD] += part_us(&c, MOE_PART_SWIGLU, MOE_PASS_FWD, act_f * R * fl, 0);
    u[MOE_T_TAILS][MOE_PASS_DGRAD] += part_us(&c, MOE_PART_SWIGLU, MOE_PASS_DGRAD, act_b * R * fl, 0);
    if (fused) { /* read the rows and their scores, write the tokens; backward both ways */
        u[MOE_T_TAILS][MOE_PASS_FWD] += fused_us(&c, R * h * x + n * h * x + 4.0 * R);
        u[MOE_T_TAILS][MOE_PASS_DGRAD] += fused_us(&c, 2.0 * (R * h * x + n * h * x) + 4.0 * R);
    } else {
        const double ub = 2.0 * P * h * x + 2.0 * R * h * x + 4.0 * R * h + n * h * x;
        u[MOE_T_TAILS][MOE_PASS_FWD] += part_us(&c, MOE_PART_UNPERMUTE, MOE_PASS_FWD, ub, 2.0 * R * h);
        u[MOE_T_TAILS][MOE_PASS_DGRAD] += part_us(&c, MOE_PART_UNPERMUTE, MOE_PASS_DGRAD, ub + 4.0 * R * h, 4.0 * R * h);
    }
    if (fp32_act) {
        u[MOE_T_TAILS][MOE_PASS_FWD] += part_us(&c, MOE_PART_ACT_CAST, MOE_PASS_FWD, 12.0 * R * h, 0);
        u[MOE_T_TAILS][MOE_PASS_DGRAD] += part_us(&c, MOE_PART_ACT_CAST, MOE_PASS_DGRAD, 12.0 * R * h, 0);
    }
    if (wcast) {
        const double wp = (double)El * (gated ? 3.0 : 2.0) * fl * h;
        u[MOE_T_TAILS][MOE_PASS_FWD] += part_us(&c, MOE_PART_WEIGHT_CAST, MOE_PASS_FWD, 6.0 * wp, 0);
        u[MOE_T_TAILS][MOE_PASS_DGRAD] += part_us(&c, MOE_PART_WEIGHT_CAST, MOE_PASS_DGRAD, 6.0 * wp, 0);
    }
    if (fp8) { /* the routed rows and the experts' hidden rows cast to FP8, forward and again in backward:
                * torch's dynamic tensorwise casts (amax, scale, cast: the fitted part), or one fused pass */
        const double cb = 5.0 * R * (h + fl);
        const double t8 = fused ? fused_us(&c, 3.0 * R * (h + fl)) : part_us(&c, MOE_PART_FP8_CAST, MOE_PASS_FWD, cb, 0);
        u[MOE_T_TAILS][MOE_PASS_FWD] += t8;
        u[MOE_T_TAILS][MOE_PASS_DGRAD] += t8;
    }
    /* shared experts: a dense MLP of width S / tp on the T tokens */
    if (cfg->shared_d_ff > 0) {
        const double S = (double)cfg->shared_d_ff / tp, g3 = gated ? 3.0 : 2.0;
        const double sf = 2.0 * g3 * T * h * S, sb = 2.0 * (g3 * h * S + 3.0 * T * h + 3.0 * T * S);
        const moe_part mlp = fp8 && c.f->part[MOE_PART_SHARED_MLP_FP8][MOE_PASS_FWD].have ? MOE_PART_SHARED_MLP_FP8
                                                                                          : MOE_PART_SHARED_MLP;
        for (int p = 0; p < MOE_PASS_COUNT; p++)
            u[MOE_T_SHARED][p] += part_us(&c, mlp, (moe_pass)p, mlp == MOE_PART_SHARED_MLP_FP8 ? sb / 2 : sb, sf);
        u[MOE_T_SHARED][MOE_PASS_FWD] += part_us(&c, MOE_PART_SWIGLU_SHARED, MOE_PASS_FWD, act_f * T * S, 0);
        u[MOE_T_SHARED][MOE_PASS_DGRAD] += part_us(&c, MOE_PART_SWIGLU_SHARED, MOE_PASS_DGRAD, act_b * T * S, 0);
        out->fwd_flops += sf;
    }
    for (int q = 0; q < MOE_T_COUNT; q++) {
        out->fwd_us += u[q][MOE_PASS_FWD];
        out->bwd_us += u[q][MOE_PASS_DGRAD] + u[q][MOE_PASS_WGRAD];
    }
    out->fwd_flops += gf + 2.0 * n * k * h * ((gated ? 2.0 : 1.0) * fl + fl) * etp;
    return PL_OK;
}
