/*
 * moe_runs.c: the MoE check set's CSV rows as model, cluster and layout
 * (moe_runs.h).
 */
#include "moe_runs.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster_file.h"
#include "data_file.h"
#include "model_config.h"
#include "published_runs.h"

#ifndef PLACER_SOURCE_DIR
#define PLACER_SOURCE_DIR "."
#endif

static int cell_int(const pub_csv *c, int r, const char *col, int dflt) {
    const int k = pub_csv_col(c, col);
    if (k < 0) return dflt;
    const char *s = pub_csv_cell(c, r, k);
    if (!s || !*s) return dflt;
    char *end = NULL;
    long v = strtol(s, &end, 10);
    return end != s && v > 0 && v < 100000000 ? (int)v : -1;
}

static const char *cell(const pub_csv *c, int r, const char *col) {
    const int k = pub_csv_col(c, col);
    const char *s = k >= 0 ? pub_csv_cell(c, r, k) : NULL;
    return s ? s : "";
}

static int has(const char *s, const char *w) { return strstr(s, w) != NULL; }

/* One row into *row: its model, cluster and layout, or row->why. */
static void read_row(const pub_csv *c, int r, const char *clusters_dir, pub_moe_run *row) {
    memset(row, 0, sizeof *row);
    snprintf(row->run_id, sizeof row->run_id, "%s", cell(c, r, "run_id"));
    const char *prec = cell(c, r, "precision"), *mfile = cell(c, r, "model_file"), *cname = cell(c, r, "cluster");
    const double tps = atof(cell(c, r, "tokens_per_s_per_gpu"));
    const int gpus = cell_int(c, r, "gpus", 0);
    if (!(tps > 0)) { snprintf(row->why, sizeof row->why, "no published tokens/s"); return; }
    if (strcmp(prec, "bf16") && strcmp(prec, "fp8")) {
        snprintf(row->why, sizeof row->why, "precision '%.40s' not modelled", prec);
        return;
    }
    char model[128];
    snprintf(model, sizeof model, "%s", mfile);
    char *dot = strstr(model, ".json");
    if (dot) *dot = 0;
    gpt_config cfg;
    char m[512];
    cluster cl;
    layout l;
    if (!*model || model_config_load(model, &cfg, NULL, 0, m, sizeof m) != PL_OK) {
        snprintf(row->why, sizeof row->why, "no shipped model '%.60s'", model);
        return;
    }
    snprintf(row->model_name, sizeof row->model_name, "%s", model);
    if (cluster_load(cname, clusters_dir, &cl, m, sizeof m) != PL_OK) {
        snprintf(row->why, sizeof row->why, "no cluster '%.60s'", cname);
        return;
    }
    if (cl.n_groups != 1 || gpus <= 0 || gpus % cl.gpus_per_node) {
        snprintf(row->why, sizeof row->why, "cluster '%.40s' not one group of whole nodes", cname);
        return;
    }
    cl.groups[0].n_nodes = gpus / cl.gpus_per_node;
    /* a job that fills no whole number of NVLink domains (64 GB200 of a 72-GPU NVL72 rack, 256 over
     * four racks): spread evenly over the fewest racks, each rack's share its NVLink domain (NeMo's
     * GB200 rows: 16 compute trays a rack, moe-runs.csv's assumptions) */
    const int dom = cl.nvlink_domain_gpus;
    if (dom > cl.gpus_per_node && gpus % dom) {
        const int racks = (gpus + dom - 1) / dom;
        if (gpus % racks == 0 && (gpus / racks) % cl.gpus_per_node == 0) cl.nvlink_domain_gpus = gpus / racks;
    }
    layout_default(&l);
    l.tp = cell_int(c, r, "tp", 1), l.pp = cell_int(c, r, "pp", 1), l.vp = cell_int(c, r, "vp", 1);
    l.cp = cell_int(c, r, "cp", 1), l.ep = cell_int(c, r, "ep", 1), l.etp = cell_int(c, r, "etp", 1);
    l.micro_batch = cell_int(c, r, "micro_batch", 1), l.global_batch = cell_int(c, r, "global_batch", 0);
    const int seq = cell_int(c, r, "seq", 0);
    if (l.tp < 1 || l.pp < 1 || l.vp < 1 || l.cp < 1 || l.ep < 1 || l.etp < 1 || l.micro_batch < 1 ||
        l.global_batch < 1 || seq < 1) {
        snprintf(row->why, sizeof row->why, "a layout cell is missing or not a count");
        return;
    }
    l.dp = (int)(gpus / ((int64_t)l.tp * l.pp * l.cp));
    l.sp = l.tp > 1;
    l.prec = !strcmp(prec, "fp8") ? PRECISION_FP8 : PRECISION_BF16;
    const char *disp = cell(c, r, "dispatcher"), *rc = cell(c, r, "recompute"), *z = cell(c, r, "zero_fsdp");
    l.dispatcher = has(disp, "DeepEP") || has(disp, "flex") || has(disp, "DeepSeek") ? MOE_DISPATCH_FLEX
                   : has(disp, "allgather")                                          ? MOE_DISPATCH_ALLGATHER
                                                                                     : MOE_DISPATCH_ALLTOALL;
    l.recompute = !strncmp(rc, "none", 4) ? RECOMPUTE_NONE : !strncmp(rc, "full", 4) ? RECOMPUTE_FULL
                                                                                    : RECOMPUTE_SELECTIVE;
    /* "FSDP" (Megatron-Core's FSDP: parameters, gradients and optimizer sharded, each layer's
     * weights gathered for its forward and again for its backward) is zero 3; "ddp (FSDP 0)" says
     * FSDP is off: Megatron's distributed optimizer, zero 1, as the rows with nothing stated */
    l.zero = has(z, "FSDP") && !has(z, "FSDP 0") ? ZERO_3 : ZERO_1;
    cfg.seq_len = seq;
    const char *sched = cell(c, r, "schedule"), *recipe = cell(c, r, "fp8_recipe"), *as = cell(c, r, "assumptions");
    if (l.prec == PRECISION_FP8)
        l.fp8 = has(recipe, "blockwise") ? FP8_RECIPE_BLOCKWISE
                : has(recipe, "current scaling") ? FP8_RECIPE_TENSORWISE : FP8_RECIPE_DELAYED;
    /* DeepSeek's DualPipe: two directions, two chunks a rank */
    if (has(sched, "dualpipe")) {
        l.sched = SCHED_DUALPIPE;
        l.vp = 2;
    }
    if (has(sched, "A2A overlap") || has(as, "A2A overlap")) l.ep_overlap = 1;
    /* memory savings the row's own text names (its source's report) */
    if (has(rc, "RMSNorm and MLA up-projections recomputed")) {
        l.mem |= LAYOUT_MEM_NORM_MLA;
        if (!has(rc, "full") || has(rc, "no full")) l.recompute = RECOMPUTE_NONE;
    }
    if (has(recipe, "BF16 AdamW moments") || has(recipe, "BF16 optimizer states")) l.mem |= LAYOUT_MEM_BF16_MOMENTS;
    if (l.prec == PRECISION_FP8 && has(recipe, "DeepSeek")) l.mem |= LAYOUT_MEM_FP8_ACT;
    if (has(recipe, "FP32 master weights and grads")) l.mem |= LAYOUT_MEM_FP32_GRADS; /* a cost, not a saving */
    if (has(as, "MTP module (depth 1) is trained")) l.mem |= LAYOUT_MEM_MTP_LAST;
    row->forced_balance = has(as, "orced load balance") || has(as, "force-load-balancing");
    /* token drop (NeMo's performance-mode recipes add MegatronTokenDropCallback: capacity factor
     * 1.0, every expert's input padded to the capacity) */
    const char *cap = strstr(as, "capacity factor ");
    if (cap && strstr(cap, "padded")) {
        const double f = atof(cap + strlen("capacity factor "));
        if (f > 0 && f < 100) row->capacity_factor = f;
    }
    /* one or two more chunks than layers (Qwen3-235B's 94 layers on pp 32 x vp 3): the first and last
     * chunks hold only the embedding and the loss, as a Megatron pipeline layout "E|t|...|t|L" does */
    const int K = l.pp * l.vp;
    if (K > cfg.n_layers && K - cfg.n_layers <= 2 && K <= LAYOUT_MAX_CHUNKS) {
        for (int k = 0; k < K; k++) l.stage_layers[k] = 1;
        l.stage_layers[0] = 0;
        if (K - cfg.n_layers == 2) l.stage_layers[K - 1] = 0;
        l.n_stage_layers = K;
    }
    if (layout_validate(&l, &cfg, cluster_n_gpus(&cl), m, sizeof m) != PL_OK) {
        snprintf(row->why, sizeof row->why, "layout: %.140s", m);
        return;
    }
    row->model = cfg;
    row->cl = cl;
    row->lay = l;
    row->gpus = gpus;
    row->seq = seq;
    row->tokens_per_s = tps;
}

pl_status pub_moe_runs_load(const char *csv_path, const char *clusters_dir, pub_moe_run **runs, int *n, char *msg,
                            size_t len) {
    *runs = NULL;
    *n = 0;
    const char *path = csv_path ? csv_path : PLACER_SOURCE_DIR "/data/published-runs/moe-runs.csv";
    char *text = NULL;
    size_t sz = 0;
    pl_status st = data_file_read(path, 16 << 20, "MoE check set", &text, &sz, msg, len);
    if (st != PL_OK) return st;
    pub_csv csv;
    char m[256];
    st = pub_csv_parse(text, sz, &csv, m, sizeof m);
    free(text);
    if (st != PL_OK) return pl_fail(msg, len, st, "%s: %s", path, m);
    if (pub_csv_col(&csv, "run_id") < 0 || pub_csv_col(&csv, "tokens_per_s_per_gpu") < 0) {
        pub_csv_free(&csv);
        return pl_fail(msg, len, PL_ERR_INVALID, "%s: no run_id or tokens_per_s_per_gpu column", path);
    }
    const int rows = csv.n_rows < PUB_MOE_MAX_ROWS ? csv.n_rows : PUB_MOE_MAX_ROWS;
    pub_moe_run *out = calloc((size_t)(rows > 0 ? rows : 1), sizeof *out);
    if (!out) {
        pub_csv_free(&csv);
        return pl_fail(msg, len, PL_ERR_NOMEM, "out of memory");
    }
    for (int r = 0; r < rows; r++) read_row(&csv, r, clusters_dir, &out[r]);
    pub_csv_free(&csv);
    *runs = out;
    *n = rows;
    return PL_OK;
}
