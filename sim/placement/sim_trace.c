/*
 * sim_trace.c: what a run leaves behind for people: its events (every
 * compute op and one event per transfer, when tracing is on), its critical
 * path (the chain of what fixed each op's start, back from the op that
 * ended last; built on demand, re-running an untraced step once to get the
 * ops' records), and the Chrome Trace Event JSON of a traced run.
 */
#include "sim_internal.h"

#include <stdio.h>
#include <stdlib.h>

#include "util.h"

const sim_event *sim_critical_path(const sim_ctx *ctx, int *n) {
    if (!ctx || ctx->last_op < 0 || ctx->n_ops == 0) {
        if (n) *n = 0;
        return NULL;
    }
    sim_lazy *lz = ctx->lazy;
    if (!lz->crit_built && !ctx->recorded) {
        /* the last run did not write its ops' records: run it again with
         * them (same inputs, same results). The context was created
         * writable by sim_ctx_create; const here only says that what the
         * caller can observe does not change. */
        sim_ctx *c = (sim_ctx *)ctx;
        sim_result again;
        const int trace_on = c->trace_on; /* tracing turned on since: no events now */
        c->trace_on = 0;
        c->force_record = 1;
        pl_status st = sim_run(c, c->dev, &c->last_sched, NULL, &c->last_prm, &again);
        c->force_record = 0;
        c->trace_on = trace_on;
        if (st != PL_OK) { /* cannot happen: it succeeded before */
            if (n) *n = 0;
            return NULL;
        }
    }
    if (!lz->crit_built) {
        int len = 0;
        for (int o = ctx->last_op; o >= 0; o = ctx->chain[o].pred) len++;
        int w = len;
        for (int o = ctx->last_op; o >= 0; o = ctx->chain[o].pred) sim_op_event(ctx, o, &ctx->crit[--w]);
        lz->crit_len = len;
        lz->crit_built = 1;
    }
    if (n) *n = lz->crit_len;
    return ctx->crit;
}

pl_status sim_write_chrome_trace(const sim_ctx *ctx, FILE *f) {
    if (!ctx || !f) return PL_ERR_INVALID;
    if (!ctx->have_events) return PL_ERR_INVALID;
    const int D = ctx->D;
    const graph *g = ctx->g;
    fprintf(f, "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n");
    fprintf(f, "{\"ph\":\"M\",\"pid\":1,\"tid\":0,\"name\":\"process_name\",\"args\":{\"name\":\"devices\"}},\n");
    fprintf(f, "{\"ph\":\"M\",\"pid\":2,\"tid\":0,\"name\":\"process_name\",\"args\":{\"name\":\"links\"}},\n");
    fprintf(f, "{\"ph\":\"M\",\"pid\":1,\"tid\":0,\"name\":\"process_sort_index\",\"args\":{\"sort_index\":1}},\n");
    fprintf(f, "{\"ph\":\"M\",\"pid\":2,\"tid\":0,\"name\":\"process_sort_index\",\"args\":{\"sort_index\":2}}");
    for (int d = 0; d < D; d++) {
        if (ctx->n_on[d] == 0) continue;
        fprintf(f, ",\n{\"ph\":\"M\",\"pid\":1,\"tid\":%d,\"name\":\"thread_name\",\"args\":{\"name\":\"gpu%d ", d, d);
        pl_json_text(f, ctx->p->devices[d].name);
        fprintf(f, "\"}},\n{\"ph\":\"M\",\"pid\":1,\"tid\":%d,\"name\":\"thread_sort_index\",\"args\":"
                   "{\"sort_index\":%d}}",
                d, d);
    }
    /* name the links that carried something */
    for (int s = 0; s < D; s++)
        for (int t = 0; t < D; t++) {
            if (s == t) continue;
            int usedl = 0;
            for (int e = 0; e < ctx->n_events && !usedl; e++)
                usedl = ctx->events[e].device == s && ctx->events[e].dst_device == t;
            if (!usedl) continue;
            fprintf(f,
                    ",\n{\"ph\":\"M\",\"pid\":2,\"tid\":%d,\"name\":\"thread_name\",\"args\":{\"name\":\"link "
                    "gpu%d -> gpu%d\"}},\n{\"ph\":\"M\",\"pid\":2,\"tid\":%d,\"name\":\"thread_sort_index\","
                    "\"args\":{\"sort_index\":%d}}",
                    s * D + t, s, t, s * D + t, s * D + t);
        }
    for (int e = 0; e < ctx->n_events; e++) {
        const sim_event *ev = &ctx->events[e];
        int link = ev->dst_device >= 0;
        int pid = link ? 2 : 1;
        int tid = link ? ev->device * D + ev->dst_device : ev->device;
        fprintf(f, ",\n{\"ph\":\"X\",\"pid\":%d,\"tid\":%d,\"ts\":%.3f,\"dur\":%.3f,\"name\":\"", pid, tid,
                ev->start_us, ev->end_us - ev->start_us);
        if (ev->node < 0) {
            fprintf(f, "%s\",\"cat\":\"%s\",\"args\":{}}", sim_event_kind_name(ev->kind),
                    ev->kind == SIM_EV_OPT ? "opt" : "compute");
            continue;
        }
        pl_json_text(f, g->nodes[ev->node].name);
        fprintf(f, " %s mb%d\",\"cat\":\"%s\",\"args\":{\"node\":%d,\"mb\":%d", sim_event_kind_name(ev->kind),
                ev->micro_batch, link ? "transfer" : "compute", ev->node, ev->micro_batch);
        if (link)
            fprintf(f, ",\"bytes\":%lld,\"src\":%d,\"dst\":%d",
                    (long long)(ctx->p->node_mem[ev->node].out_bytes_per_sample * ctx->mb), ev->device,
                    ev->dst_device);
        fprintf(f, "}}");
    }
    fprintf(f, "\n]}\n");
    return ferror(f) ? PL_ERR_IO : PL_OK;
}
