/*
 * serve_plan.c: POST /api/plan (serve_api.h). The request is read into the
 * options `placer plan` fills from its command line (plan_run_options,
 * plan_parse_precisions, plan_parse_fixed, cli_stack) and run by the same
 * library call, plan_run. While it searches, the progress seam
 * (plan_progress_fn, plan/plan.h) writes a line {"progress": {...}} at most
 * every 100 ms; the line writer's non-zero return (the client has gone)
 * is handed back to the search, which stops. At the end one line
 * {"result": "plan"} and then placer plan --json's bytes; or one line
 * {"error": ..., "status": N}.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_json.h"
#include "serve_internal.h"
#include "util.h"

struct serve_plan_job {
    json_t *root;            /* the request (the options point into it) */
    plan_run_options run;
    cli_stack stack;
    char path[512];          /* a pasted config's file, or "" */
};

static const char *const PLAN_KEYS[] = {"model", "config", "cluster", "gpus", "global_batch", "seq", "precision",
                                        "top", "max_tp", "max_cp", "max_vp", "max_mbs", "fix", "framework",
                                        "attention", "dp_overlap", "grad_bytes", NULL};

/* The request's options into *j: 0, or -1 with msg. */
static int read_plan(serve_ctx *c, serve_plan_job *j, char *msg, size_t len) {
    json_t *root = j->root;
    plan_run_options *r = &j->run;
    plan_options *o = &r->search;
    plan_options_default(o);
    if (serve_model(c, root, j->path, sizeof j->path, &r->model, msg, len) < 0) return -1;
    if (serve_string(root, "cluster", 200, &r->cluster, msg, len) < 0) return -1;
    if (!r->cluster) return snprintf(msg, len, "no cluster: give \"cluster\" (a shipped name)"), -1;
    if (!serve_shipped_name("cluster", r->cluster, msg, len)) return -1;
    static const struct {
        const char *key;
        long lo, hi;
    } ints[] = {{"gpus", 1, 1L << 30},   {"global_batch", 1, 1L << 30}, {"seq", 1, 1L << 24},
                {"top", 1, PLAN_MAX_TOP}, {"max_tp", 1, 1024},           {"max_cp", 1, 1024},
                {"max_vp", 1, 64},        {"max_mbs", 1, 4096}};
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) {
        long v = 0;
        int got = serve_int(root, ints[i].key, ints[i].lo, ints[i].hi, &v, msg, len);
        if (got < 0) return -1;
        if (!got) continue;
        switch (i) {
        case 0: r->gpus = v; break;
        case 1: r->global_batch = (int)v; break;
        case 2: r->seq = (int)v; break;
        case 3: o->top_k = (int)v; break;
        case 4: o->max_tp = (int)v; break;
        case 5: o->max_cp = (int)v; break;
        case 6: o->max_vp = (int)v; break;
        default: o->max_mbs = (int)v; break;
        }
    }
    const char *prec = NULL, *fix = NULL;
    if (serve_string(root, "precision", 200, &prec, msg, len) < 0) return -1;
    if (prec && plan_parse_precisions(prec, o, msg, len) != PL_OK) return -1;
    if (serve_string(root, "fix", 400, &fix, msg, len) < 0) return -1;
    if (fix && plan_parse_fixed(fix, o, msg, len) != PL_OK) {
        char m[512];
        snprintf(m, sizeof m, "fix: %s", msg);
        snprintf(msg, len, "%s", m);
        return -1;
    }
    if (serve_stack(root, &j->stack, 1, msg, len) < 0) return -1;
    if (j->stack.set) o->sim = &j->stack.params;
    if (j->stack.fw_set) o->framework = j->stack.runs;
    return 0;
}

int serve_plan_parse(serve_ctx *c, const char *body, size_t n, serve_plan_job **job, serve_reply *err) {
    char msg[640] = "";
    *job = NULL;
    serve_plan_job *j = calloc(1, sizeof *j);
    if (!j) return serve_error(err, 500, "out of memory"), 500;
    j->root = serve_body(body, n, PLAN_KEYS, msg, sizeof msg);
    if (!j->root || read_plan(c, j, msg, sizeof msg) < 0) {
        serve_hide_path(msg, sizeof msg, j->path);
        serve_plan_job_free(j);
        return serve_error(err, 400, msg), 400;
    }
    *job = j;
    return 0;
}

void serve_plan_job_free(serve_plan_job *job) {
    if (!job) return;
    serve_model_done(job->path);
    json_decref(job->root);
    free(job);
}

typedef struct {
    serve_line_fn fn;        /* NULL: write into out */
    void *fn_ctx;
    double t_last;           /* us of the last line */
    int cancelled;
} stream;

static int emit(stream *s, const char *text, size_t n) {
    if (s->fn) return s->fn(s->fn_ctx, text, n);
    fwrite(text, 1, n, (FILE *)s->fn_ctx);
    return 0;
}

static int on_progress(void *ctx, const plan_progress *p) {
    stream *s = ctx;
    const double now = pl_now_us();
    if (s->cancelled) return 1;
    if (now - s->t_last < 1e5 && p->done < p->total) return 0;
    s->t_last = now;
    char line[1024];
    int k = snprintf(line, sizeof line,
                     "{\"progress\": {\"done\": %lld, \"total\": %lld, \"pass\": %d, \"n_passes\": %d, "
                     "\"considered\": %lld, \"pruned_memory\": %lld, \"pruned_bound\": %lld, \"simulated\": %lld, "
                     "\"elapsed_s\": %.3f, \"best\": ",
                     (long long)p->done, (long long)p->total, p->pass, p->n_passes, (long long)p->considered,
                     (long long)p->pruned_memory, (long long)p->pruned_bound, (long long)p->simulated, p->elapsed_s);
    if (p->best) {
        char lt[512];
        layout_format(&p->best->l, lt, sizeof lt);
        k += snprintf(line + k, sizeof line - (size_t)k, "{\"layout\": \"%.400s\", \"step_us\": %.3f}}}\n", lt,
                      p->best->res.step_us);
    } else {
        k += snprintf(line + k, sizeof line - (size_t)k, "null}}\n");
    }
    if (k >= (int)sizeof line) return 0;
    if (emit(s, line, (size_t)k)) s->cancelled = 1;
    return s->cancelled;
}

int serve_plan_run(serve_ctx *c, serve_plan_job *job, serve_line_fn fn, void *fn_ctx) {
    (void)c;
    stream s = {fn, fn_ctx, 0, 0};
    plan_run_options o = job->run;
    o.progress = on_progress;
    o.progress_ctx = &s;
    plan_run_result *x = calloc(1, sizeof *x);
    char msg[640] = "";
    if (!x) {
        emit(&s, "{\"error\": \"out of memory\", \"status\": 500}\n", 42);
        return 0;
    }
    pl_status st = plan_run(&o, x, msg, sizeof msg);
    int cancelled = s.cancelled || st == PL_ERR_INTERRUPTED;
    if (cancelled) {
        /* nothing more to say to a client that has gone */
    } else if (st != PL_OK) {
        serve_hide_path(msg, sizeof msg, job->path);
        char *buf = NULL;
        size_t n = 0;
        FILE *f = open_memstream(&buf, &n);
        if (f) {
            fputs("{\"error\": ", f);
            pl_json_string(f, msg[0] ? msg : pl_status_str(st));
            fprintf(f, ", \"status\": %d}\n", serve_status_of(st));
            fclose(f);
            emit(&s, buf, n);
            free(buf);
        }
    } else {
        char *buf = NULL;
        size_t n = 0;
        FILE *f = open_memstream(&buf, &n);
        if (f) {
            fputs("{\"result\": \"plan\"}\n", f);
            cli_json_plan(f, x);
            fclose(f);
            if (emit(&s, buf, n)) cancelled = 1;
            free(buf);
        }
    }
    plan_run_free(x);
    free(x);
    return cancelled;
}
