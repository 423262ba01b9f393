/*
 * test_sim_trace.c: the Chrome trace is valid JSON with one named track per
 * device and per link, and events named by node, phase and micro-batch.
 * Parsed back with python3's json module (present here and in CI).
 */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sim.h"
#include "sim_fixtures.h"

Test(sim_trace, chrome_trace_is_valid_json_with_named_tracks) {
    gpt_config cfg;
    graph *g = NULL;
    cr_assert_eq(gpt_config_parse("default", &cfg, NULL, 0), PL_OK);
    cr_assert_eq(graph_build_gpt(&cfg, &g, NULL, 0), PL_OK);
    profile_data *p = simfix_roofline_profile(g, 4);
    snprintf(p->devices[1].name, sizeof p->devices[1].name, "odd \"quoted\\\" name");
    sim_ctx *ctx = NULL;
    cr_assert_eq(sim_ctx_create(g, p, 4, &ctx), PL_OK);
    int dev[64];
    for (int i = 0; i < g->n_nodes; i++) dev[i] = (i * 3 / g->n_nodes + (i == 7)) % 3; /* 3 devices, one detour */
    schedule s = schedule_make(2, SCHED_1F1B);
    sim_result r;
    cr_assert_eq(sim_run(ctx, dev, &s, NULL, NULL, &r), PL_OK);
    cr_assert_eq(sim_write_chrome_trace(ctx, stdout), PL_ERR_INVALID, "not traced");
    sim_ctx_set_trace(ctx, 1);
    cr_assert_eq(sim_run(ctx, dev, &s, NULL, NULL, &r), PL_OK);
    char path[] = "/tmp/placer-sim-trace-XXXXXX";
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    FILE *f = fdopen(fd, "w");
    cr_assert_eq(sim_write_chrome_trace(ctx, f), PL_OK);
    fclose(f);
    int n_ev = 0;
    sim_events(ctx, &n_ev);
    char cmd[1024];
    /* python checks: parses; X events count; track names for 3 devices and
     * the used links; event names like "attn.3 F mb1" */
    snprintf(cmd, sizeof cmd,
             "python3 -c \"import json,sys; d=json.load(open('%s')); ev=d['traceEvents'];"
             "x=[e for e in ev if e['ph']=='X']; assert len(x)==%d, len(x);"
             "names={(e['pid'],e['tid']):e['args']['name'] for e in ev if e['name']=='thread_name'};"
             "assert sum(1 for k in names if k[0]==1)==3, names;"
             "links={(e['pid'],e['tid']) for e in x if e['pid']==2}; assert links and all(k in names for k in links), names;"
             "assert any(e['name']=='attn.3 F mb1' for e in x);"
             "assert any(e['name'].endswith(' act mb0') for e in x);"
             "assert any(e['name'].endswith(' grad mb1') for e in x);"
             "assert all(e['dur']>=0 and e['ts']>=0 for e in x)\"",
             path, n_ev);
    int rc = system(cmd);
    unlink(path);
    cr_assert_eq(rc, 0, "python3 rejected the trace (rc %d)", rc);
    sim_ctx_destroy(ctx);
    profile_data_destroy(p);
    graph_destroy(g);
}

Test(sim_trace, events_are_sorted_by_start) {
    graph *g = simfix_chain_graph(6, 8);
    profile_data *p = simfix_unit_profile(g, 3, 1, 1.0, 2.0, 1.0, 0);
    sim_ctx *ctx = NULL;
    cr_assert_eq(sim_ctx_create(g, p, 8, &ctx), PL_OK);
    sim_ctx_set_trace(ctx, 1);
    int dev[6] = {0, 0, 1, 2, 1, 0};
    schedule s = schedule_make(8, SCHED_1F1B);
    sim_result r;
    cr_assert_eq(sim_run(ctx, dev, &s, NULL, NULL, &r), PL_OK, "%s", sim_last_error(ctx));
    int n = 0;
    const sim_event *ev = sim_events(ctx, &n);
    /* forwards, backwards, AdamW and one ZERO per device, transfers (a
     * chain has one consumer per node: no ADD) */
    cr_assert_eq(n, 2 * 8 * 6 + 3 + 3 + r.n_transfers);
    for (int e = 1; e < n; e++) cr_assert(ev[e].start_us >= ev[e - 1].start_us);
    char msg[256];
    cr_assert(simfix_check_trace(g, dev, 8, 0, ev, n, 1e-9, msg, sizeof msg), "%s", msg);
    sim_ctx_destroy(ctx);
    profile_data_destroy(p);
    graph_destroy(g);
}
