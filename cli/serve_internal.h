/*
 * serve_internal.h: what the server's files share (serve_api.h is the
 * outside): the server's state, replies, and reading the request bodies,
 * which every endpoint does the same way:
 *   serve_api.c        dispatch, models, clusters, layout, validate, trace
 *   serve_request.c    a request body's JSON: its keys, names, numbers, the
 *                      model (a shipped name or pasted config text)
 *   serve_plan.c       the plan and its progress stream
 *   serve_published.c  the check sets, and a check row as a layout
 *   serve_db.c         the placement product's view (--db)
 */
#ifndef PLACER_CLI_SERVE_INTERNAL_H
#define PLACER_CLI_SERVE_INTERNAL_H

#include <jansson.h>
#include <pthread.h>
#include <stdio.h>

#include "cli_opts.h"
#include "layout_eval.h"
#include "published_check.h"
#include "published_fp8.h"
#include "published_moe.h"
#include "serve_api.h"

struct serve_ctx {
    serve_options opt;
    char tmpdir[256];            /* private folder for pasted configs (mode 0700) */
    char published_dir[4096];    /* the check sets' folder as resolved */
    pthread_mutex_t lock;        /* guards the check sets below */
    int have_published;          /* 1: computed (published_json holds the answer) */
    char *published_json;        /* GET /api/published's body */
    size_t published_len;
    pub_check_options pub_opt;   /* as run */
    pub_check_result pub;        /* dense tables */
    pub_fp8_result fp8;          /* FP8 section */
    int have_fp8;
    pub_moe_result *moe;         /* MoE set (heap) */
};

/* ---- replies ---- */

/* status with {"error": line} (line cut to one line). */
void serve_error(serve_reply *r, int status, const char *line);

/* A JSON reply from a memory stream's text (takes buf). */
void serve_json(serve_reply *r, char *buf, size_t len);

/* HTTP status for a library status: 400 for bad input (cli_exit_code 2),
 * 500 otherwise. */
int serve_status_of(pl_status st);

/* ---- request bodies ---- */

/* Parse body as a JSON object whose keys are all in allowed (NULL-ended):
 * the root, or NULL with msg set. */
json_t *serve_body(const char *body, size_t n, const char *const *allowed, char *msg, size_t len);

/* Optional string key: 0 absent (*out NULL), 1 present, -1 bad (msg). max
 * bytes at most. */
int serve_string(json_t *root, const char *key, size_t max, const char **out, char *msg, size_t len);

/* Optional integer key in lo..hi: 0 absent, 1 present, -1 bad (msg). */
int serve_int(json_t *root, const char *key, long lo, long hi, long *out, char *msg, size_t len);

/* A name the library reads as a shipped name, never a path: 1 ok, 0 with
 * "<what> '<text>': ..." in msg. */
int serve_shipped_name(const char *what, const char *text, char *msg, size_t len);

/* The model text for the library from "model" (a shipped name or preset)
 * or "config" (pasted config.json, written into the server's folder; the
 * path goes into path_buf, which serve_model_done removes). 0, or -1 with
 * msg. */
int serve_model(serve_ctx *c, json_t *root, char *path_buf, size_t path_len, const char **model, char *msg,
                size_t len);
void serve_model_done(char *path_buf);

/* Replace the private path in msg by "pasted config" (messages name the
 * file they read). */
void serve_hide_path(char *msg, size_t len, const char *path);

/* The stack keys ("framework", "attention", "dp_overlap", "grad_bytes")
 * through cli_stack_set, as the commands' options. plans as cli_stack.plans.
 * 0, or -1 with msg. */
int serve_stack(json_t *root, cli_stack *s, int plans, char *msg, size_t len);

/* ---- endpoints in other files ---- */

/* GET /api/published. */
void serve_published(serve_ctx *c, serve_reply *r);

/* A check row as placer layout --json's object: "check": {"set": "dense" |
 * "fp8" | "moe", "row": label}. 0 and *r filled (200 or 400). */
void serve_check_layout(serve_ctx *c, json_t *check, serve_reply *r);

/* GET /api/db. */
void serve_db(serve_ctx *c, serve_reply *r);

/* Free the check sets. */
void serve_published_free(serve_ctx *c);

#endif
