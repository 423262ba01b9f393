/*
 * print_step.h: `placer step`'s output, text or JSON, of a run in this
 * process or over ranks (hw/dist/dist_step.h): the command parses, the
 * runner runs, these print.
 */
#ifndef PLACER_CLI_PRINT_STEP_H
#define PLACER_CLI_PRINT_STEP_H

#include "dist_step.h"

/* The result r of job j on stdout: text, or one JSON object (json != 0).
 * layout: --layout's canonical text, or NULL. */
void print_step(const dist_step_job *j, const dist_step_result *r, const char *layout, int json);

/* In process, PL_ERR_DEVICE_OOM with --json: {"status":"oom",...} with
 * each device's need, static bytes and cap (r->mem) and the message. */
void print_step_oom_json(const dist_step_result *r, const char *msg);

#endif
