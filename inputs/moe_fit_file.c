/*
 * moe_fit_file.c: the MoE layer fit's JSON file into a moe_fit
 * (moe_fit_file.h).
 */
#include "moe_fit_file.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "json_doc.h"

#define MOE_FIT_FILE_MAX (4 << 20)

static const char *const STAT_KEYS[] = {"n_fit",   "n_heldout", "rms_fit",     "rms_heldout", "rms_all",
                                        "worst",   "worst_where", "rms_heldout_random"};
#define N_STAT ((int)(sizeof STAT_KEYS / sizeof STAT_KEYS[0]))

/* The number at key of obj into *out (null or absent: *out = 0 when
 * nullable, else an error); scale multiplies it. */
static pl_status num(json_t *obj, const char *key, int nullable, double scale, double *out, const char *where,
                     char *msg, size_t len) {
    json_t *x = json_object_get(obj, key);
    if ((!x || json_is_null(x)) && nullable) {
        *out = 0;
        return PL_OK;
    }
    if (!x || !json_is_number(x) || !isfinite(json_number_value(x)))
        return pl_fail(msg, len, PL_ERR_INVALID, "moe fit file: %s.%s must be a number%s", where, key,
                       nullable ? " or null" : "");
    *out = json_number_value(x) * scale;
    return PL_OK;
}

static pl_status keys_ok(json_t *obj, const char *where, const char *const *own, int n_own, char *msg, size_t len) {
    const char *allowed[24];
    int k = 0;
    for (int i = 0; i < n_own && k < 23; i++) allowed[k++] = own[i];
    for (int i = 0; i < N_STAT && k < 23; i++) allowed[k++] = STAT_KEYS[i];
    allowed[k] = NULL;
    return json_only_keys(obj, "moe fit file: ", where, allowed, msg, len);
}

static int index_of(const char *s, const char *(*name)(int), int n) {
    for (int i = 0; i < n; i++)
        if (!strcmp(s, name(i))) return i;
    return -1;
}
static const char *impl_name(int i) { return moe_gemm_impl_name((moe_gemm_impl)i); }
static const char *prec_name(int i) { return moe_fit_prec_name((moe_fit_prec)i); }
static const char *pass_name(int i) { return moe_pass_name((moe_pass)i); }
static const char *part_name(int i) { return moe_part_name((moe_part)i); }

static pl_status parse_gemm(json_t *gg, moe_fit *f, char *msg, size_t len) {
    if (!json_is_object(gg)) return pl_fail(msg, len, PL_ERR_INVALID, "moe fit file: 'grouped_gemm' must be an object");
    static const char *const own[] = {"c_launch_us", "c_expert_us", "eff", "bw_tb_s", "q", "peak_tflops"};
    const char *ik, *pk, *sk;
    json_t *iv, *pv, *sv;
    json_object_foreach(gg, ik, iv) {
        const int i = index_of(ik, impl_name, MOE_IMPL_COUNT);
        if (i < 0)
            return pl_fail(msg, len, PL_ERR_INVALID,
                           "moe fit file: unknown implementation 'grouped_gemm.%.40s' (torch_grouped_mm, "
                           "cublas_grouped, cublas_loop, cublas_strided, cublas_fp8_loop)", ik);
        if (!json_is_object(iv))
            return pl_fail(msg, len, PL_ERR_INVALID, "moe fit file: grouped_gemm.%s must be an object", ik);
        json_object_foreach(iv, pk, pv) {
            const int p = index_of(pk, prec_name, MOE_FIT_PREC_COUNT);
            if (p < 0 || !json_is_object(pv))
                return pl_fail(msg, len, PL_ERR_INVALID,
                               "moe fit file: grouped_gemm.%s.%.20s: a precision (bf16, fp8) holding an object", ik, pk);
            json_object_foreach(pv, sk, sv) {
                const int s = index_of(sk, pass_name, MOE_PASS_COUNT);
                char where[96];
                snprintf(where, sizeof where, "grouped_gemm.%s.%s.%.20s", ik, pk, sk);
                if (s < 0 || !json_is_object(sv))
                    return pl_fail(msg, len, PL_ERR_INVALID, "moe fit file: %s: a pass (fwd, dgrad, wgrad) holding an object",
                                   where);
                pl_status st = keys_ok(sv, where, own, 6, msg, len);
                if (st != PL_OK) return st;
                moe_gemm_fit g = {.have = 1};
                if ((st = num(sv, "c_launch_us", 0, 1, &g.c_launch_us, where, msg, len)) != PL_OK ||
                    (st = num(sv, "c_expert_us", 0, 1, &g.c_expert_us, where, msg, len)) != PL_OK ||
                    (st = num(sv, "eff", 0, 1, &g.eff, where, msg, len)) != PL_OK ||
                    (st = num(sv, "bw_tb_s", 0, 1e12, &g.bw, where, msg, len)) != PL_OK ||
                    (st = num(sv, "q", 0, 1, &g.q, where, msg, len)) != PL_OK ||
                    (st = num(sv, "peak_tflops", 0, 1e12, &g.peak, where, msg, len)) != PL_OK)
                    return st;
                f->gemm[i][p][s] = g;
            }
        }
    }
    return PL_OK;
}

static pl_status parse_parts(json_t *pp, moe_fit *f, char *msg, size_t len) {
    if (!json_is_object(pp)) return pl_fail(msg, len, PL_ERR_INVALID, "moe fit file: 'parts' must be an object");
    static const char *const own[] = {"c_launch_us", "bw_gb_s", "tflops"};
    const char *ik, *sk;
    json_t *iv, *sv;
    json_object_foreach(pp, ik, iv) {
        const int i = index_of(ik, part_name, MOE_PART_COUNT);
        if (i < 0 || !json_is_object(iv))
            return pl_fail(msg, len, PL_ERR_INVALID, "moe fit file: unknown part 'parts.%.40s' (or not an object)", ik);
        json_object_foreach(iv, sk, sv) {
            const int s = index_of(sk, pass_name, MOE_PASS_COUNT);
            char where[96];
            snprintf(where, sizeof where, "parts.%s.%.20s", ik, sk);
            if (s < 0 || !json_is_object(sv))
                return pl_fail(msg, len, PL_ERR_INVALID, "moe fit file: %s: a pass (fwd, dgrad, wgrad) holding an object",
                               where);
            pl_status st = keys_ok(sv, where, own, 3, msg, len);
            if (st != PL_OK) return st;
            moe_part_fit q = {.have = 1};
            if ((st = num(sv, "c_launch_us", 0, 1, &q.c_launch_us, where, msg, len)) != PL_OK ||
                (st = num(sv, "bw_gb_s", 1, 1e9, &q.bw, where, msg, len)) != PL_OK ||
                (st = num(sv, "tflops", 1, 1e12, &q.flops, where, msg, len)) != PL_OK)
                return st;
            f->part[i][s] = q;
        }
    }
    return PL_OK;
}

static pl_status parse_root(json_t *root, moe_fit *f, char *msg, size_t len) {
    if (!json_is_object(root)) return pl_fail(msg, len, PL_ERR_INVALID, "moe fit file: the top level must be an object");
    static const char *const keys[] = {"card",    "hbm_gb_s", "grouped_gemm", "parts", "models",
                                       "split",   "framework_impl", "sources", NULL};
    pl_status st = json_only_keys(root, "moe fit file: ", "", keys, msg, len);
    if (st != PL_OK) return st;
    json_t *card = json_object_get(root, "card");
    if (!card || !json_is_string(card) || json_string_length(card) < 1 || json_string_length(card) >= MOE_FIT_CARD_LEN ||
        strlen(json_string_value(card)) != json_string_length(card))
        return pl_fail(msg, len, PL_ERR_INVALID, "moe fit file: 'card' must be a string of 1 to %d characters",
                       MOE_FIT_CARD_LEN - 1);
    snprintf(f->card, sizeof f->card, "%s", json_string_value(card));
    json_t *hbm = json_object_get(root, "hbm_gb_s");
    if (hbm) {
        if (!json_is_number(hbm) || !(json_number_value(hbm) > 0) || !isfinite(json_number_value(hbm)))
            return pl_fail(msg, len, PL_ERR_INVALID, "moe fit file: 'hbm_gb_s' must be a number > 0");
        f->hbm_bw = json_number_value(hbm) * 1e9;
    } else if (!strcmp(f->card, "h100")) {
        f->hbm_bw = 3350e9; /* H100 SXM5 80GB datasheet (data/clusters/dgx-h100.json) */
    } else if (!strcmp(f->card, "h200")) {
        f->hbm_bw = 4800e9; /* H200 SXM 141GB datasheet (data/clusters/dgx-h200.json) */
    } else {
        return pl_fail(msg, len, PL_ERR_INVALID,
                       "moe fit file: card '%s' has no known HBM bandwidth: add \"hbm_gb_s\" (GB/s)", f->card);
    }
    json_t *gg = json_object_get(root, "grouped_gemm"), *pp = json_object_get(root, "parts");
    if (!gg || !pp) return pl_fail(msg, len, PL_ERR_INVALID, "moe fit file: 'grouped_gemm' and 'parts' are needed");
    if ((st = parse_gemm(gg, f, msg, len)) != PL_OK || (st = parse_parts(pp, f, msg, len)) != PL_OK) return st;
    return moe_fit_validate(f, msg, len);
}

pl_status moe_fit_parse_json(const char *text, size_t n, moe_fit *out, char *msg, size_t len) {
    if (!out) return pl_fail(msg, len, PL_ERR_INVALID, "moe_fit_parse_json: NULL argument");
    json_t *root = NULL;
    pl_status st = json_doc_parse(text, n, "moe fit file", &root, msg, len);
    if (st != PL_OK) return st;
    moe_fit f;
    memset(&f, 0, sizeof f);
    st = parse_root(root, &f, msg, len);
    json_decref(root);
    if (st == PL_OK) *out = f;
    return pl_one_line(st, msg, len);
}

static pl_status read_fit(const char *text, size_t n, void *out, char *msg, size_t len) {
    return moe_fit_parse_json(text, n, out, msg, len);
}

pl_status moe_fit_load(const char *path, moe_fit *out, char *msg, size_t len) {
    if (!path || !out) return pl_fail(msg, len, PL_ERR_INVALID, "moe_fit_load: NULL argument");
    return json_doc_load(path, MOE_FIT_FILE_MAX, "moe fit", read_fit, out,
                         "a file that fit_sweeps.py moe --json writes", msg, len);
}
