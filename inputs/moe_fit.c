/*
 * moe_fit.c: the measured MoE layer's constants as data (moe_fit.h): the
 * names the fit file uses and the checks every fit passes before the
 * layout simulator prices a layer with it. The compiled-in values are
 * moe_fit_builtin.c's (generated).
 */
#include "moe_fit.h"

#include <math.h>
#include <string.h>

static const char *const IMPL_NAMES[MOE_IMPL_COUNT] = {"torch_grouped_mm", "cublas_grouped", "cublas_loop",
                                                       "cublas_strided", "cublas_fp8_loop"};
static const char *const PASS_NAMES[MOE_PASS_COUNT] = {"fwd", "dgrad", "wgrad"};
static const char *const PREC_NAMES[MOE_FIT_PREC_COUNT] = {"bf16", "fp8"};
static const char *const PART_NAMES[MOE_PART_COUNT] = {"router_gate", "router_topk",    "permute",    "unpermute",
                                                       "swiglu",      "act_cast",       "weight_cast", "shared_mlp",
                                                       "shared_mlp_fp8", "swiglu_shared", "fp8_cast"};

const char *moe_gemm_impl_name(moe_gemm_impl i) {
    return (unsigned)i < MOE_IMPL_COUNT ? IMPL_NAMES[i] : "unknown";
}
const char *moe_pass_name(moe_pass p) { return (unsigned)p < MOE_PASS_COUNT ? PASS_NAMES[p] : "unknown"; }
const char *moe_fit_prec_name(moe_fit_prec p) { return (unsigned)p < MOE_FIT_PREC_COUNT ? PREC_NAMES[p] : "unknown"; }
const char *moe_part_name(moe_part p) { return (unsigned)p < MOE_PART_COUNT ? PART_NAMES[p] : "unknown"; }

int moe_gemm_impl_from_name(const char *s) {
    if (!s) return -1;
    for (int i = 0; i < MOE_IMPL_COUNT; i++)
        if (!strcmp(s, IMPL_NAMES[i])) return i;
    return -1;
}

static int fin(double x) { return isfinite(x); }

pl_status moe_fit_validate(const moe_fit *f, char *msg, size_t len) {
    if (!f) return pl_fail(msg, len, PL_ERR_INVALID, "moe fit: NULL");
    if (!fin(f->hbm_bw) || !(f->hbm_bw > 0))
        return pl_fail(msg, len, PL_ERR_INVALID, "moe fit %s: the card's HBM bandwidth must be > 0", f->card);
    int full_bf16 = 0;
    for (int i = 0; i < MOE_IMPL_COUNT; i++)
        for (int p = 0; p < MOE_FIT_PREC_COUNT; p++) {
            int passes = 0;
            for (int s = 0; s < MOE_PASS_COUNT; s++) {
                const moe_gemm_fit *g = &f->gemm[i][p][s];
                if (!g->have) continue;
                passes++;
                if (!fin(g->c_launch_us) || g->c_launch_us < 0 || !fin(g->c_expert_us) || g->c_expert_us < 0 ||
                    !fin(g->eff) || !(g->eff > 0) || g->eff > 1.5 || !fin(g->bw) || !(g->bw > 0) || !fin(g->q) ||
                    !(g->q > 1) || !fin(g->peak) || !(g->peak > 0))
                    return pl_fail(msg, len, PL_ERR_INVALID,
                                   "moe fit %s: grouped_gemm.%s.%s.%s: c_launch_us and c_expert_us >= 0, eff in (0, "
                                   "1.5], bw_tb_s > 0, q > 1 and peak_tflops > 0 are needed",
                                   f->card, IMPL_NAMES[i], PREC_NAMES[p], PASS_NAMES[s]);
            }
            if (p == MOE_FIT_BF16 && passes == MOE_PASS_COUNT) full_bf16 = 1;
        }
    if (!full_bf16)
        return pl_fail(msg, len, PL_ERR_INVALID,
                       "moe fit %s: no bf16 grouped-GEMM implementation with all of fwd, dgrad and wgrad", f->card);
    for (int i = 0; i < MOE_PART_COUNT; i++)
        for (int s = 0; s < MOE_PASS_COUNT; s++) {
            const moe_part_fit *q = &f->part[i][s];
            if (!q->have) continue;
            if (!fin(q->c_launch_us) || q->c_launch_us < 0 || !fin(q->bw) || q->bw < 0 || !fin(q->flops) ||
                q->flops < 0)
                return pl_fail(msg, len, PL_ERR_INVALID,
                               "moe fit %s: parts.%s.%s: c_launch_us, bw_gb_s and tflops must be finite and >= 0",
                               f->card, PART_NAMES[i], PASS_NAMES[s]);
        }
    static const int need[][2] = {{MOE_PART_ROUTER_GATE, MOE_PASS_FWD}, {MOE_PART_ROUTER_TOPK, MOE_PASS_FWD},
                                  {MOE_PART_PERMUTE, MOE_PASS_FWD},     {MOE_PART_PERMUTE, MOE_PASS_DGRAD},
                                  {MOE_PART_UNPERMUTE, MOE_PASS_FWD},   {MOE_PART_UNPERMUTE, MOE_PASS_DGRAD},
                                  {MOE_PART_SWIGLU, MOE_PASS_FWD},      {MOE_PART_SWIGLU, MOE_PASS_DGRAD}};
    for (size_t i = 0; i < sizeof need / sizeof need[0]; i++)
        if (!f->part[need[i][0]][need[i][1]].have)
            return pl_fail(msg, len, PL_ERR_INVALID, "moe fit %s: parts.%s.%s is missing (the layer needs it)",
                           f->card, PART_NAMES[need[i][0]], PASS_NAMES[need[i][1]]);
    return PL_OK;
}
