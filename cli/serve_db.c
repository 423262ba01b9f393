/*
 * serve_db.c: GET /api/db, the placement product's view of `placer serve
 * --db FILE` (serve_internal.h): the placer runs with their samples (the
 * RL training curve of placer report's learning section) and the latest
 * confirmation of each setting with its sides (the shortlist's picks
 * against the baselines, placer report's head-to-head tables), read by the
 * same typed store calls placer report uses. The file is the one named on
 * the command line; a client names none. Opened read-only per request.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serve_internal.h"
#include "store.h"
#include "store_calib.h"
#include "util.h"

#define SERVE_DB_MAX_SAMPLES 200000 /* per run: a longer run's tail is cut (the page says so) */
#define SERVE_DB_MAX_CONFIRMS 256

typedef struct {
    FILE *f;
    int64_t n;
} sample_ctx;

static void json_num(FILE *f, double v) {
    if (isfinite(v)) fprintf(f, "%.3f", v);
    else fputs("null", f);
}

static int put_sample(void *ctx, const profile_run_sample *s) {
    sample_ctx *c = ctx;
    if (c->n >= SERVE_DB_MAX_SAMPLES) return 1;
    fprintf(c->f, "%s[%d, %d, ", c->n++ ? ", " : "", s->update, s->sample);
    json_num(c->f, s->step_us);
    fprintf(c->f, ", %d]", s->oom);
    return 0;
}

typedef struct {
    int64_t ids[1024];
    int n;
} run_ids;

static int put_run_id(void *ctx, const profile_run_info *r) {
    run_ids *ids = ctx;
    if (ids->n < 1024) ids->ids[ids->n++] = r->id;
    return 0;
}

typedef struct {
    FILE *f;
    profile_db *db;
    int k;
} runs_ctx;

static int put_run(void *ctx, const profile_run_info *r) {
    runs_ctx *c = ctx;
    fprintf(c->f, "%s\n  {\"id\": %lld, \"method\": ", c->k++ ? "," : "", (long long)r->id);
    pl_json_string(c->f, r->method ? r->method : "");
    fprintf(c->f, ", \"args\": ");
    pl_json_string(c->f, r->args ? r->args : "");
    fprintf(c->f, ", \"created_at\": ");
    pl_json_string(c->f, r->created_at ? r->created_at : "");
    fprintf(c->f, ", \"n_samples\": %lld}", (long long)r->n_samples);
    return 0;
}

typedef struct {
    int64_t id[SERVE_DB_MAX_CONFIRMS];
    char label[SERVE_DB_MAX_CONFIRMS][96];
    char schedule[SERVE_DB_MAX_CONFIRMS][24];
    int m[SERVE_DB_MAX_CONFIRMS];
    int n;
} confirms;

static int put_confirm(void *ctx, const profile_calib_confirm *c) {
    confirms *cs = ctx;
    if (cs->n >= SERVE_DB_MAX_CONFIRMS) return 1;
    cs->id[cs->n] = c->id;
    snprintf(cs->label[cs->n], sizeof cs->label[0], "%s", c->label ? c->label : "");
    snprintf(cs->schedule[cs->n], sizeof cs->schedule[0], "%s", c->schedule ? c->schedule : "");
    cs->m[cs->n++] = c->micro_batches;
    return 0;
}

typedef struct {
    FILE *f;
    int k;
} sides_ctx;

static int put_side(void *ctx, const profile_calib_side *s) {
    sides_ctx *c = ctx;
    fprintf(c->f, "%s{\"side\": ", c->k++ ? ", " : "");
    pl_json_string(c->f, s->side ? s->side : "");
    fprintf(c->f, ", \"placement\": ");
    if (s->placement) pl_json_string(c->f, s->placement);
    else fputs("null", c->f);
    fprintf(c->f, ", \"n\": %d, \"mean_us\": ", s->n);
    json_num(c->f, s->mean_us);
    fprintf(c->f, ", \"se_us\": ");
    json_num(c->f, s->se_us);
    fprintf(c->f, ", \"pred_us\": ");
    json_num(c->f, s->pred_us);
    fputc('}', c->f);
    return 0;
}

void serve_db(serve_ctx *c, serve_reply *r) {
    if (!c->opt.db) { /* no view: the page keeps its tab hidden */
        static const char none[] = "{\"db\": null, \"runs\": [], \"samples\": {}, \"confirms\": []}\n";
        memset(r, 0, sizeof *r);
        r->status = 200;
        r->type = "application/json";
        r->static_body = none;
        r->len = sizeof none - 1;
        return;
    }
    char msg[512] = "";
    profile_db *db = NULL;
    pl_status st = profile_db_open(c->opt.db, PROFILE_DB_READ, &db, msg, sizeof msg);
    if (st != PL_OK) return serve_error(r, 500, msg);
    run_ids *ids = calloc(1, sizeof *ids);
    confirms *cs = calloc(1, sizeof *cs);
    char *buf = NULL;
    size_t n = 0;
    FILE *f = ids && cs ? open_memstream(&buf, &n) : NULL;
    if (!f) {
        free(ids);
        free(cs);
        profile_db_close(db);
        return serve_error(r, 500, "out of memory");
    }
    fprintf(f, "{\"db\": ");
    const char *base = strrchr(c->opt.db, '/');
    pl_json_string(f, base ? base + 1 : c->opt.db);
    fprintf(f, ", \"runs\": [");
    runs_ctx rc = {f, db, 0};
    st = profile_db_runs(db, put_run, &rc);
    fprintf(f, "\n ], \"samples\": {");
    if (st == PL_OK) st = profile_db_runs(db, put_run_id, ids);
    for (int i = 0; st == PL_OK && i < ids->n; i++) {
        sample_ctx sc = {f, 0};
        fprintf(f, "%s\n  \"%lld\": [", i ? "," : "", (long long)ids->ids[i]);
        st = profile_db_run_samples(db, ids->ids[i], put_sample, &sc);
        fputc(']', f);
    }
    fprintf(f, "\n }, \"confirms\": [");
    if (st == PL_OK) st = profile_db_calib_confirms(db, put_confirm, cs);
    for (int i = 0; st == PL_OK && i < cs->n; i++) {
        fprintf(f, "%s\n  {\"label\": ", i ? "," : "");
        pl_json_string(f, cs->label[i]);
        fprintf(f, ", \"schedule\": ");
        pl_json_string(f, cs->schedule[i]);
        fprintf(f, ", \"micro_batches\": %d, \"sides\": [", cs->m[i]);
        sides_ctx sd = {f, 0};
        st = profile_db_calib_sides(db, cs->id[i], put_side, &sd);
        fputs("]}", f);
    }
    fprintf(f, "\n ]}\n");
    fclose(f);
    if (st != PL_OK) {
        snprintf(msg, sizeof msg, "cannot read %s: %s", c->opt.db, profile_db_last_error(db));
        free(buf);
        serve_error(r, 500, msg);
    } else {
        serve_json(r, buf, n);
    }
    free(ids);
    free(cs);
    profile_db_close(db);
}
