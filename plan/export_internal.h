/* export_internal.h: helpers the export writers share (not installed). */
#ifndef PLACER_PLAN_EXPORT_INTERNAL_H
#define PLACER_PLAN_EXPORT_INTERNAL_H

#include <stdio.h>

#include "export_plan.h"
#include "framework_keys.h"

/* PL_OK when chunk_layers has pp * vp entries >= 0 summing to the layers
 * (only the first and the last chunk, which hold the embedding and the
 * head, may be empty). */
pl_status export_check_chunks(const gpt_config *cfg, const layout *l, const int *chunk_layers, char *msg,
                              size_t len);

/* 1 when every chunk holds the same number of layers. */
static inline int export_chunks_uniform(const layout *l, const int *chunk_layers) {
    for (int c = 1; c < l->pp * l->vp; c++)
        if (chunk_layers[c] != chunk_layers[0]) return 0;
    return 1;
}

/* Layers of pipeline stage s over its vp chunks (interleaved: chunks s,
 * s + pp, ...; V orders: chunks s and 2 pp - 1 - s). */
int export_stage_layers(const layout *l, const int *chunk_layers, int s);

/* One file being written: a memory stream. */
typedef struct {
    FILE *f;
    char *buf;
    size_t n;
} export_stream;

/* Open s (0, or -1 when out of memory). */
int export_stream_open(export_stream *s);
/* Close s and keep its text as out's next file called name: 0, or -1 (the
 * text freed) when writing failed or out has no room. */
int export_stream_keep(plan_export_files *out, const char *name, export_stream *s, int write_rc);

/* Add a note (printf-style); dropped past PLAN_EXPORT_MAX_NOTES. */
void export_note(plan_export_files *out, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The README every export writes: what the plan is (its text form, the
 * prediction), the framework's pinned version, how to run the files
 * (how: lines of text), the notes. 0, or -1 when writing failed. */
int export_readme(plan_export_files *out, const plan_export_in *in, plan_framework fw, const char *how);

/* A number as the shortest decimal that reads back the same ("500000",
 * "1e-05"). */
void export_real(double x, char *buf, size_t len);

/* The writers (export_megatron.c, export_torchtitan.c, export_deepspeed.c,
 * export_json.c): in is checked (chunks add up, the framework runs it). */
pl_status export_megatron_build(const plan_export_in *in, plan_export_files *out, char *msg, size_t len);
pl_status export_torchtitan_build(const plan_export_in *in, plan_export_files *out, char *msg, size_t len);
pl_status export_deepspeed_build(const plan_export_in *in, plan_export_files *out, char *msg, size_t len);
pl_status export_json_build(const plan_export_in *in, plan_export_files *out, char *msg, size_t len);
/* One layout as the JSON object (plan_export_json), full = 1 adding the
 * json export's fields. */
int export_json_object(FILE *f, const plan_export_in *in, int full);

#endif
