/*
 * serve_api.h: what `placer serve` answers, apart from the socket. One
 * function takes a request (method, path, body) and returns a reply
 * (status, content type, body); serve_http.c puts it on the wire with
 * libmicrohttpd, and the fuzz target (tests/fuzz/fuzz_serve.c) calls it
 * directly. The JSON endpoints answer exactly what the commands print with
 * --json, through the same library calls and the same writers (cli_json.h):
 *
 *   GET  /api/models      shipped model names with their sizes
 *   GET  /api/clusters    shipped cluster names with GPUs and memory
 *   POST /api/layout      placer layout --json of the body's layout
 *   POST /api/validate    for each value of each dimension tried, why the
 *                         layout would be invalid (the library's line), or null
 *   POST /api/trace       one pipeline replica's ops per rank (layout_sim_ops)
 *   POST /api/plan        placer plan --json, streamed after progress lines
 *                         (serve_plan_parse / serve_plan_run)
 *   GET  /api/published   placer check-published --json and --moe --json
 *   GET  /api/db          with --db: the RL runs and confirmations of placer report
 *   GET  / and /web/...   the page's files, embedded at build time
 *
 * No file path comes from a client: models, clusters and frameworks are
 * shipped names (a text holding '/' or ".json" is refused), or a model's
 * config.json text pasted into "config" (at most SERVE_MAX_CONFIG bytes),
 * which the server writes to a private temporary file of its own. Bad
 * input is HTTP 400 with {"error": "<one line>"}; the server keeps
 * serving.
 */
#ifndef PLACER_CLI_SERVE_API_H
#define PLACER_CLI_SERVE_API_H

#include <stddef.h>

#include "status.h"

#define SERVE_MAX_BODY (1 << 20)         /* bytes of a request body */
#define SERVE_MAX_CONFIG (256 * 1024)    /* bytes of a pasted config.json */

typedef struct {
    const char *db;            /* --db: a profile database for the placement view, or NULL */
    const char *published_dir; /* the check sets' folder; NULL: check-published's default */
} serve_options;

typedef struct serve_ctx serve_ctx;

typedef struct {
    int status;                /* HTTP status */
    const char *type;          /* content type (static) */
    char *body;                /* heap, or NULL with static_body set */
    const char *static_body;   /* an embedded file (not freed) */
    size_t len;
} serve_reply;

/* A server's state: the options (borrowed, must outlive it), a private
 * temporary folder for pasted configs, the check sets once computed.
 * PL_ERR_IO when the folder cannot be made, PL_ERR_NOMEM. */
pl_status serve_ctx_create(const serve_options *o, serve_ctx **out, char *msg, size_t len);

/* Remove the temporary folder and free; accepts NULL. */
void serve_ctx_destroy(serve_ctx *c);

/* Answer one request into *r (free with serve_reply_free). body may be
 * NULL when n is 0. Thread-safe: requests may run at once. POST /api/plan
 * here runs the plan to its end and answers the whole stream at once. */
void serve_handle(serve_ctx *c, const char *method, const char *url, const char *body, size_t n, serve_reply *r);

void serve_reply_free(serve_reply *r);

/* ---- POST /api/plan, streamed ---------------------------------------------- */

/* Receives the stream's text: progress lines {"progress": {...}}, then one
 * line {"result": "plan"} and the plan's JSON (placer plan --json's bytes,
 * several lines) to the end, or one line {"error": "...", "status": N}.
 * Return non-zero to cancel the plan (a client gone). */
typedef int (*serve_line_fn)(void *ctx, const char *text, size_t n);

typedef struct serve_plan_job serve_plan_job;

/* Parse a plan request: 0 and *job (free with serve_plan_job_free), or the
 * HTTP status of the error with *err filled (the 400 reply). */
int serve_plan_parse(serve_ctx *c, const char *body, size_t n, serve_plan_job **job, serve_reply *err);

/* Run the job, writing the stream through fn. Returns 1 when fn cancelled
 * it, 0 otherwise (an error is written into the stream). */
int serve_plan_run(serve_ctx *c, serve_plan_job *job, serve_line_fn fn, void *fn_ctx);

void serve_plan_job_free(serve_plan_job *job);

#endif
