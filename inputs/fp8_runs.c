/*
 * fp8_runs.c: the FP8 check set's CSV rows as models and layouts
 * (fp8_runs.h).
 */
#include "fp8_runs.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data_file.h"
#include "model_config.h"
#include "published_runs.h"

static const char *col(const pub_csv *c, int r, const char *name) {
    int k = pub_csv_col(c, name);
    return k < 0 ? NULL : pub_csv_cell(c, r, k);
}

static int int_of(const char *s, int dflt) {
    if (!s || !*s) return dflt;
    char *end;
    long v = strtol(s, &end, 10);
    return (*end || v < 1 || v > 1000000000L) ? -1 : (int)v;
}

/* One CSV row into *w (w->skipped says why it is not simulated). */
static void row_of(const pub_csv *c, int r, pub_fp8_run *w) {
    memset(w, 0, sizeof *w);
    snprintf(w->run_id, sizeof w->run_id, "%s", col(c, r, "run_id"));
    snprintf(w->cluster, sizeof w->cluster, "%s", col(c, r, "cluster"));
    const char *mf = col(c, r, "model_file"), *prec = col(c, r, "precision"), *recipe = col(c, r, "fp8_recipe");
    const char *fs = col(c, r, "zero_fsdp");
    w->published_tokens = strtod(col(c, r, "tokens_per_s_per_gpu"), NULL);
    if (strcmp(prec, "fp8")) {
        snprintf(w->skipped, sizeof w->skipped, "precision %s", prec);
        return;
    }
    if (strstr(w->run_id, "lora") || strstr(w->run_id, "sft")) {
        snprintf(w->skipped, sizeof w->skipped, "fine-tuning (no full backward of the base weights)");
        return;
    }
    if (!*mf) {
        snprintf(w->skipped, sizeof w->skipped, "no model file shipped");
        return;
    }
    char name[64], m[256];
    snprintf(name, sizeof name, "%.*s", (int)(strlen(mf) > 5 ? strlen(mf) - 5 : strlen(mf)), mf); /* drop .json */
    if (model_config_load(name, &w->model, NULL, 0, m, sizeof m) != PL_OK) {
        snprintf(w->skipped, sizeof w->skipped, "model: %.140s", m);
        return;
    }
    const int tp = int_of(col(c, r, "tp"), 1), pp = int_of(col(c, r, "pp"), 1), vp = int_of(col(c, r, "vp"), 1);
    const int cp = int_of(col(c, r, "cp"), 1), mbs = int_of(col(c, r, "micro_batch"), 1);
    const int gbs = int_of(col(c, r, "global_batch"), 1), seq = int_of(col(c, r, "seq"), 1);
    const int gpus = int_of(col(c, r, "gpus"), 1);
    if (tp < 1 || pp < 1 || vp < 1 || cp < 1 || mbs < 1 || gbs < 1 || seq < 1 || gpus < 1 ||
        gpus % (tp * pp * cp) != 0 || !(w->published_tokens > 0)) {
        snprintf(w->skipped, sizeof w->skipped, "a layout or throughput cell is not a positive integer");
        return;
    }
    w->gpus = gpus;
    w->model.seq_len = seq;
    layout *l = &w->lay;
    layout_default(l);
    l->tp = tp;
    l->sp = tp > 1;
    l->pp = pp;
    l->vp = vp;
    l->cp = cp;
    l->dp = gpus / (tp * pp * cp);
    l->micro_batch = mbs;
    l->global_batch = gbs;
    /* "FSDP 1" is NeMo's Megatron FSDP (use_mcore_fsdp): NeMo's performance
     * scripts (NVIDIA/NeMo: performance/helpers.py, set_mcore_fsdp_configs, in
     * the r2.3.0 / r2.4.0 branches of the 25.04 / 25.07 containers) set
     * data_parallel_sharding_strategy "optim_grads_params": weights,
     * gradients and optimizer all sharded, the weights gathered per unit
     * and freed after use, FP8 transpose caches not kept
     * (keep_fp8_transpose_cache_when_using_custom_fsdp False). That is zero
     * 3, not Llama 3's fsdp (whole weights between forward and backward). */
    l->zero = strstr(fs, "FSDP 1") ? ZERO_3 : ZERO_1;
    l->recompute = RECOMPUTE_NONE;
    l->prec = PRECISION_FP8;
    l->fp8 = strstr(recipe, "current") ? FP8_RECIPE_TENSORWISE : FP8_RECIPE_DELAYED;
    if (layout_validate(l, &w->model, 0, m, sizeof m) != PL_OK)
        snprintf(w->skipped, sizeof w->skipped, "layout: %.140s", m);
}

pl_status pub_fp8_runs_load(const char *dir, pub_fp8_run **runs, int *n, char *msg, size_t len) {
    *runs = NULL;
    *n = 0;
    char path[4200], m[320] = "";
    snprintf(path, sizeof path, "%s/%s", dir ? dir : ".", PUB_FP8_FILE);
    FILE *probe = fopen(path, "rb");
    if (!probe) return pl_fail(msg, len, PL_ERR_NOT_FOUND, "%s: not found", path);
    fclose(probe);
    char *buf = NULL;
    size_t got = 0;
    pl_status st = data_file_read(path, 4 << 20, "FP8 check set", &buf, &got, msg, len);
    if (st != PL_OK) return st;
    pub_csv csv;
    st = pub_csv_parse(buf, got, &csv, m, sizeof m);
    free(buf);
    if (st != PL_OK) return pl_fail(msg, len, st, "%s: %s", path, m);
    static const char *const need[] = {"run_id", "model_file", "gpus", "cluster", "precision", "fp8_recipe", "tp",
                                       "pp", "vp", "cp", "zero_fsdp", "micro_batch", "global_batch", "seq",
                                       "tokens_per_s_per_gpu"};
    for (size_t i = 0; i < sizeof need / sizeof need[0]; i++)
        if (pub_csv_col(&csv, need[i]) < 0) {
            pub_csv_free(&csv);
            return pl_fail(msg, len, PL_ERR_INVALID, "%s: no column '%s'", path, need[i]);
        }
    const int rows = csv.n_rows < PUB_FP8_MAX_ROWS ? csv.n_rows : PUB_FP8_MAX_ROWS;
    pub_fp8_run *out = calloc((size_t)(rows > 0 ? rows : 1), sizeof *out);
    if (!out) {
        pub_csv_free(&csv);
        return pl_fail(msg, len, PL_ERR_NOMEM, "out of memory");
    }
    for (int i = 0; i < rows; i++) row_of(&csv, i, &out[i]);
    pub_csv_free(&csv);
    *runs = out;
    *n = rows;
    return PL_OK;
}
