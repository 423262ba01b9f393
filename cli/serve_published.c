/*
 * serve_published.c: `placer serve`'s published runs (serve_internal.h).
 * GET /api/published answers {"dense": <placer check-published --json>,
 * "moe": <placer check-published --moe --json>}: the same library calls
 * (pub_check_run, pub_fp8_check_run, pub_moe_check) and the same writers,
 * computed once on the first request (about half a second) and kept.
 *
 * A click on a point loads that run into the explorer: POST /api/layout
 * with "check": {"set", "row"} answers the row as placer layout --json's
 * object, built from the check's own simulation of it, so the step shown
 * is the step check-published prints for the row.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli_json.h"
#include "cluster_file.h"
#include "serve_internal.h"
#include "util.h"

static int is_dir(const char *p) {
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

static int is_file(const char *p) {
    struct stat st;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

/* The check sets once, as placer check-published runs them with its
 * defaults (the same folder rule). Caller holds c->lock. */
static void compute(serve_ctx *c) {
    char msg[512] = "", *buf = NULL, path[4300];
    size_t n = 0;
    if (!c->published_dir[0]) {
        snprintf(c->published_dir, sizeof c->published_dir, "%s/../shared/published-runs", PLACER_SOURCE_DIR);
        if (!is_dir(c->published_dir))
            snprintf(c->published_dir, sizeof c->published_dir, "%s/data/published-runs", PLACER_SOURCE_DIR);
        if (!is_dir(c->published_dir)) snprintf(c->published_dir, sizeof c->published_dir, "data/published-runs");
    }
    pub_check_options_default(&c->pub_opt);
    c->pub_opt.dir = c->published_dir;
    FILE *f = open_memstream(&buf, &n);
    if (!f) return;
    pl_status st = pub_check_run(&c->pub_opt, &c->pub, msg, sizeof msg);
    if (st == PL_OK) {
        /* the FP8 file: the folder's, else the source tree's (check-published's rule) */
        char fdir[4200];
        snprintf(path, sizeof path, "%s/" PUB_FP8_FILE, c->published_dir);
        snprintf(fdir, sizeof fdir, "%s", is_file(path) ? c->published_dir : PLACER_SOURCE_DIR "/data/published-runs");
        pl_status fs = pub_fp8_check_run(fdir, 0, 0, &c->fp8, msg, sizeof msg);
        c->have_fp8 = fs == PL_OK;
        if (fs != PL_OK && fs != PL_ERR_NOT_FOUND) st = fs;
    }
    if (st == PL_OK && (c->moe = malloc(sizeof *c->moe)) != NULL) {
        snprintf(path, sizeof path, "%s/moe-runs.csv", c->published_dir);
        st = pub_moe_check(is_file(path) ? path : NULL, NULL, c->moe, msg, sizeof msg);
    } else if (st == PL_OK) {
        st = PL_ERR_NOMEM;
    }
    if (st != PL_OK) {
        fprintf(f, "{\"error\": ");
        pl_json_string(f, msg[0] ? msg : pl_status_str(st));
        fprintf(f, "}\n");
    } else {
        fprintf(f, "{\"dense\": ");
        cli_json_published(f, &c->pub_opt, &c->pub, c->have_fp8 ? &c->fp8 : NULL);
        fprintf(f, ", \"moe\": ");
        cli_json_published_moe(f, c->moe);
        fprintf(f, "}\n");
    }
    fclose(f);
    c->published_json = buf;
    c->published_len = n;
    c->have_published = st == PL_OK ? 1 : -1;
}

static int ensure(serve_ctx *c) {
    pthread_mutex_lock(&c->lock);
    if (!c->have_published) compute(c);
    const int ok = c->have_published == 1;
    pthread_mutex_unlock(&c->lock);
    return ok;
}

void serve_published(serve_ctx *c, serve_reply *r) {
    const int ok = ensure(c);
    if (!c->published_json) return serve_error(r, 500, "out of memory");
    char *copy = malloc(c->published_len + 1);
    if (!copy) return serve_error(r, 500, "out of memory");
    memcpy(copy, c->published_json, c->published_len + 1);
    serve_json(r, copy, c->published_len);
    if (!ok) r->status = 500;
}

void serve_published_free(serve_ctx *c) {
    if (c->have_published == 1) {
        pub_check_free(&c->pub);
        pub_fp8_free(&c->fp8);
    }
    free(c->moe);
    free(c->published_json);
    c->moe = NULL;
    c->published_json = NULL;
    c->have_published = 0;
}

/* x as layout_eval_run would fill it for a check row's own simulation. */
static int fill(layout_eval_result *x, const char *name, const char *cluster_name, const gpt_config *cfg,
                const layout *l, const layout_result *res, char *msg, size_t len) {
    if (cluster_load(cluster_name, NULL, &x->clu, msg, len) != PL_OK) return -1;
    snprintf(x->model.name, sizeof x->model.name, "%s", name);
    x->model.cfg = *cfg;
    x->lay = *l;
    x->res = *res;
    layout_coords c0, c1;
    memset(&c0, 0, sizeof c0);
    memset(&c1, 0, sizeof c1);
    c1.c[LAYOUT_DIM_PP] = l->pp > 1 ? 1 : 0;
    x->pp_rank0 = layout_rank_of(l, &c0);
    x->pp_rank1 = layout_rank_of(l, &c1);
    x->pp_link = layout_eval_link(&x->clu, x->pp_rank0, x->pp_rank1);
    return 0;
}

void serve_check_layout(serve_ctx *c, json_t *check, serve_reply *r) {
    char msg[512] = "";
    if (!json_is_object(check)) return serve_error(r, 400, "\"check\" must be {\"set\": ..., \"row\": ...}");
    json_t *js = json_object_get(check, "set"), *jr = json_object_get(check, "row");
    if (!json_is_string(js) || !json_is_string(jr) || json_object_size(check) != 2)
        return serve_error(r, 400, "\"check\" must be {\"set\": \"dense\"|\"fp8\"|\"moe\", \"row\": label}");
    const char *set = json_string_value(js), *row = json_string_value(jr);
    if (!ensure(c)) return serve_error(r, 500, "the check sets could not be computed");
    layout_eval_result *x = calloc(1, sizeof *x);
    if (!x) return serve_error(r, 500, "out of memory");
    int found = 0, rc = 0;
    if (!strcmp(set, "dense")) {
        for (int t = 0; t < PUB_TABLE_COUNT && !found; t++)
            for (int j = 0; j < c->pub.n_rows[t] && !found; j++) {
                const pub_row *w = &c->pub.rows[t][j];
                if (strcmp(w->label, row) != 0) continue;
                found = 1;
                const char *cl = t == PUB_LLAMA ? c->pub_opt.cluster_h100 : c->pub_opt.cluster_a100;
                rc = fill(x, w->label, cl, &w->model, &w->lay, &c->pub.res[t][j].res, msg, sizeof msg);
            }
    } else if (!strcmp(set, "fp8")) {
        for (int i = 0; i < c->fp8.n && !found; i++) {
            const pub_fp8_row *w = &c->fp8.rows[i];
            if (w->run.skipped[0] || strcmp(w->run.run_id, row) != 0) continue;
            found = 1;
            rc = fill(x, w->run.run_id, w->run.cluster, &w->run.model, &w->run.lay, &w->res, msg, sizeof msg);
        }
    } else if (!strcmp(set, "moe")) {
        for (int i = 0; i < c->moe->n && !found; i++) {
            const pub_moe_row *w = &c->moe->rows[i];
            if (!w->simulated || strcmp(w->run_id, row) != 0) continue;
            found = 1;
            gpt_config cfg;
            memset(&cfg, 0, sizeof cfg);
            cfg.seq_len = w->seq;
            rc = fill(x, w->model_name, w->cluster, &cfg, &w->lay, &w->res, msg, sizeof msg); /* the shipped model: the explorer selects it */
        }
    } else {
        free(x);
        return serve_error(r, 400, "\"check\".set must be dense, fp8 or moe");
    }
    if (!found || rc) {
        free(x);
        if (!found) snprintf(msg, sizeof msg, "no simulated row '%.80s' in the %s check set", row, set);
        return serve_error(r, found ? 500 : 400, msg);
    }
    char *buf = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    if (!f) {
        free(x);
        return serve_error(r, 500, "out of memory");
    }
    cli_json_layout(f, x, 0, NULL);
    fclose(f);
    free(x);
    serve_json(r, buf, n);
}
