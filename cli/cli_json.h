/*
 * cli_json.h: the JSON objects the layout path's commands print with
 * --json, written by one function each so that `placer serve` answers its
 * API with exactly the same bytes (json_layout.c, json_plan.c,
 * json_published.c). Each writes to f and returns nothing: a short write
 * shows as the stream's error, which the caller checks (ferror) if it
 * cares. Every pointer is borrowed and must be non-NULL unless said.
 */
#ifndef PLACER_CLI_JSON_H
#define PLACER_CLI_JSON_H

#include <stdio.h>

#include "coll_load.h"
#include "layout_eval.h"
#include "plan_run.h"
#include "published_check.h"
#include "published_fp8.h"
#include "published_moe.h"

/* `placer layout --json`: x as layout_eval_run filled it; hw_flops 1 for
 * --flops hardware (the "tflops_per_gpu" headline); meas the measured
 * collectives used, or NULL. */
void cli_json_layout(FILE *f, const layout_eval_result *x, int hw_flops, const coll_measured *meas);

/* `placer plan --json`: x as plan_run filled it. */
void cli_json_plan(FILE *f, const plan_run_result *x);

/* `placer check-published --json`: o the options run, r the dense tables'
 * result, fp8 the FP8 section's (NULL: no section). */
void cli_json_published(FILE *f, const pub_check_options *o, const pub_check_result *r, const pub_fp8_result *fp8);

/* The FP8 section's object alone (what cli_json_published writes under "fp8"). */
void cli_json_published_fp8(FILE *f, const pub_fp8_result *fp8);

/* `placer check-published --moe --json`: the MoE check set's rows. */
void cli_json_published_moe(FILE *f, const pub_moe_result *r);

#endif
