/*
 * export_files.c: what the export writers share (export_internal.h): a
 * file being written as a memory stream and kept in the export's set, the
 * notes, the README every export writes, numbers written as they read
 * back, a stage's layers over its chunks. Called by the writers only, so
 * that the dispatcher (export_plan.c) calls the writers and nothing calls
 * back.
 */
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "export_internal.h"
#include "schedule.h"

int export_stage_layers(const layout *l, const int *ch, int s) {
    if (schedule_v_chunks(l->sched) == 2 && l->vp == 2) return ch[s] + ch[2 * l->pp - 1 - s];
    int n = 0;
    for (int v = 0; v < l->vp; v++) n += ch[v * l->pp + s];
    return n;
}

int export_stream_open(export_stream *s) {
    s->buf = NULL;
    s->n = 0;
    s->f = open_memstream(&s->buf, &s->n);
    return s->f ? 0 : -1;
}

int export_stream_keep(plan_export_files *out, const char *name, export_stream *s, int write_rc) {
    int rc = write_rc < 0 || ferror(s->f) ? -1 : 0;
    if (fclose(s->f) != 0) rc = -1;
    s->f = NULL;
    if (rc < 0 || out->n >= PLAN_EXPORT_MAX_FILES) {
        free(s->buf);
        s->buf = NULL;
        return -1;
    }
    snprintf(out->name[out->n], sizeof out->name[out->n], "%s", name);
    out->text[out->n++] = s->buf;
    s->buf = NULL;
    return 0;
}

void export_note(plan_export_files *out, const char *fmt, ...) {
    if (out->n_notes >= PLAN_EXPORT_MAX_NOTES) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(out->notes[out->n_notes++], sizeof out->notes[0], fmt, ap);
    va_end(ap);
}

void export_real(double x, char *buf, size_t len) {
    if (x == floor(x) && fabs(x) < 1e15) {
        snprintf(buf, len, "%.0f", x);
        return;
    }
    for (int p = 1; p <= 17; p++) {
        snprintf(buf, len, "%.*g", p, x);
        if (strtod(buf, NULL) == x) return;
    }
}

int export_readme(plan_export_files *out, const plan_export_in *in, plan_framework fw, const char *how) {
    export_stream s;
    if (export_stream_open(&s) < 0) return -1;
    const gpt_config *c = in->cfg;
    char text[LAYOUT_MAX_CHUNKS * 6 + 512];
    layout_format(in->l, text, sizeof text);
    int rc = 0;
    rc |= fprintf(s.f, "placer plan, exported for %s\n\n", plan_framework_version(fw)) < 0;
    rc |= fprintf(s.f, "model:  %s (%d layers, d_model %d, %d heads, sequence %d)\n",
                  in->model_name ? in->model_name : "model", c->n_layers, c->d_model, c->n_heads, c->seq_len) < 0;
    rc |= fprintf(s.f, "layout: %s\n", text) < 0;
    if (in->res)
        rc |= fprintf(s.f, "predicted: %.2f ms per step, %.2f GB of %.2f GB per GPU (placer's simulator)\n",
                      in->res->step_us / 1e3, in->res->mem.total / 1e9, in->res->mem_cap / 1e9) < 0;
    rc |= fprintf(s.f, "\n%s", how) < 0;
    if (out->n_notes) {
        rc |= fprintf(s.f, "\nNotes:\n") < 0;
        for (int i = 0; i < out->n_notes; i++) rc |= fprintf(s.f, "- %s\n", out->notes[i]) < 0;
    }
    return export_stream_keep(out, "README", &s, rc ? -1 : 0);
}
