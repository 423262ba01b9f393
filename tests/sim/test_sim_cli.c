/*
 * test_sim_cli.c: `placer simulate` end to end: the prediction for people
 * and as JSON (checked against the library), calibrated parameters used by
 * default, the trace file, and one stderr line with exit 2 for bad input.
 * The database is a spec profile written into a temporary file.
 */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sim.h"
#include "spec.h"
#include "store.h"

static char db_path[64], out_path[64], err_path[64], tmp_path[64];

/* Write the h200x4-nvlink spec profile of the default GPT into a new file;
 * with_params also stores fitted simulator parameters. */
static void make_db(int with_params) {
    snprintf(db_path, sizeof db_path, "/tmp/placer-simcli-%d.db", (int)getpid());
    snprintf(out_path, sizeof out_path, "/tmp/placer-simcli-%d.out", (int)getpid());
    snprintf(err_path, sizeof err_path, "/tmp/placer-simcli-%d.err", (int)getpid());
    snprintf(tmp_path, sizeof tmp_path, "/tmp/placer-simcli-%d.tmp", (int)getpid());
    unlink(db_path);
    char msg[512] = "";
    gpt_config cfg;
    graph *g = NULL;
    profile_data *p = NULL;
    profile_db *db = NULL;
    cr_assert_eq(gpt_config_parse("default", &cfg, msg, sizeof msg), PL_OK);
    cr_assert_eq(graph_build_gpt(&cfg, &g, msg, sizeof msg), PL_OK);
    int sizes[3] = {4, 8, 16};
    cr_assert_eq(spec_profile_build(spec_find("h200x4-nvlink"), g, sizes, 3, &p), PL_OK);
    cr_assert_eq(profile_db_open(db_path, PROFILE_DB_CREATE, &db, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_eq(profile_db_save_profile(db, &cfg, p, msg, sizeof msg), PL_OK, "%s", msg);
    if (with_params) {
        const char *names[SIM_N_PARAMS];
        double vals[SIM_N_PARAMS] = {5.0, 10.0, 0.1, 200.0, 1.25, 1.5, 40.0, 0.5};
        for (int i = 0; i < SIM_N_PARAMS; i++) names[i] = sim_param_name(i);
        char key[64];
        gpt_config_key(&cfg, key, sizeof key);
        cr_assert_eq(profile_db_save_sim_params(db, key, SIM_N_PARAMS, names, vals, "test"), PL_OK);
    }
    profile_db_close(db);
    profile_data_destroy(p);
    graph_destroy(g);
}

static void drop_db(void) {
    char path[96];
    unlink(db_path);
    snprintf(path, sizeof path, "%s-wal", db_path);
    unlink(path);
    snprintf(path, sizeof path, "%s-shm", db_path);
    unlink(path);
    unlink(out_path);
    unlink(err_path);
    unlink(tmp_path);
}

/* Run placer simulate --db DB <args>; stdout and stderr go to files.
 * Returns the exit status (-1 when it did not exit normally). */
static int simulate(const char *args) {
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "'%s' simulate --db '%s' %s >'%s' 2>'%s'", PLACER_BIN, db_path, args, out_path,
             err_path);
    int rc = system(cmd);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

static int count_lines(const char *path, char *first, size_t len) {
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f);
    int n = 0, c, last = '\n';
    size_t k = 0;
    while ((c = fgetc(f)) != EOF) {
        if (n == 0 && c != '\n' && k + 1 < len) first[k++] = (char)c;
        if (c == '\n') n++;
        last = c;
    }
    if (last != '\n') n++;
    if (len) first[k] = 0;
    fclose(f);
    return n;
}

static const char *P4 = "0,0,0,0,0,0,0,0,0,0,1,1,1,1,1,1,1,1,1,1,2,2,2,2,2,2,2,2,2,2,3,3,3,3,3,3,3,3,3,3";

Test(sim_cli, prints_the_prediction_for_people) {
    make_db(0);
    char args[512];
    snprintf(args, sizeof args, "--placement %s --micro-batches 4 --schedule 1f1b", P4);
    cr_assert_eq(simulate(args), 0);
    FILE *f = fopen(out_path, "r");
    char buf[8192];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = 0;
    fclose(f);
    /* cuts at nodes 10, 20, 30 cross 1 + 2 + 2 (producer, device) pairs */
    static const char *want[] = {"ms (predicted)", "gpu3", "bubble", "transfers  40",
                                 "gpu0 -> gpu1: 4 activations", "verdict    fits in memory", "params     neutral"};
    for (size_t k = 0; k < sizeof want / sizeof want[0]; k++)
        cr_assert(strstr(buf, want[k]) != NULL, "missing '%s' in:\n%s", want[k], buf);
    drop_db();
}

Test(sim_cli, json_matches_the_library_and_calibrated_params_are_the_default) {
    make_db(1);
    /* the library's own prediction with the same parameters */
    gpt_config cfg;
    graph *g = NULL;
    profile_data *p = NULL;
    cr_assert_eq(gpt_config_parse("default", &cfg, NULL, 0), PL_OK);
    cr_assert_eq(graph_build_gpt(&cfg, &g, NULL, 0), PL_OK);
    int sizes[3] = {4, 8, 16};
    cr_assert_eq(spec_profile_build(spec_find("h200x4-nvlink"), g, sizes, 3, &p), PL_OK);
    sim_ctx *ctx = NULL;
    cr_assert_eq(sim_ctx_create(g, p, 8, &ctx), PL_OK);
    int dev[40];
    cr_assert_eq(placement_parse(P4, 40, 4, dev, NULL, 0), PL_OK);
    schedule s = schedule_make(8, SCHED_GPIPE);
    sim_params cal = {5.0, 10.0, 0.1, 200.0, 1.25, 1.5, 40.0, 0.5};
    sim_result rc, rn;
    cr_assert_eq(sim_run(ctx, dev, &s, NULL, &cal, &rc), PL_OK);
    cr_assert_eq(sim_run(ctx, dev, &s, NULL, NULL, &rn), PL_OK);

    char args[512], cmd[1024];
    snprintf(args, sizeof args, "--placement %s -m 8 --schedule gpipe --json", P4);
    cr_assert_eq(simulate(args), 0);
    snprintf(cmd, sizeof cmd,
             "python3 -c \"import json; d=json.load(open('%s')); assert d['params']['source']=='calibrated', d;"
             "assert abs(d['step_us']-%.6f)<1e-3, d['step_us']; assert len(d['devices'])==4;"
             "assert d['transfers']['count']==%d; assert d['oom'] is False and d['oom_device'] is None;"
             "assert abs(d['devices'][3]['peak_bytes']-%lld)==0\"",
             out_path, rc.step_us, rc.n_transfers, (long long)rc.peak_bytes[3]);
    cr_assert_eq(system(cmd), 0, "calibrated JSON does not match the library");
    snprintf(args, sizeof args, "--placement %s -m 8 --schedule gpipe --json --params neutral", P4);
    cr_assert_eq(simulate(args), 0);
    snprintf(cmd, sizeof cmd,
             "python3 -c \"import json; d=json.load(open('%s')); assert d['params']['source']=='neutral';"
             "assert abs(d['step_us']-%.6f)<1e-3, d['step_us']\"",
             out_path, rn.step_us);
    cr_assert_eq(system(cmd), 0, "neutral JSON does not match the library");
    cr_assert(rc.step_us > rn.step_us);
    sim_ctx_destroy(ctx);
    profile_data_destroy(p);
    graph_destroy(g);
    drop_db();
}

Test(sim_cli, writes_a_trace_and_reads_a_placement_file) {
    make_db(0);
    FILE *f = fopen(tmp_path, "w");
    fprintf(f, "%s\n", "0,1,0,1,2,2,2,3,3,3, 3,3,3,3,3,3,3,3,3,3,\n2,2,2,2,2,2,2,2,2,2,1,1,1,1,1,1,1,1,1,0");
    fclose(f);
    char args[512], trace[96], cmd[512];
    snprintf(trace, sizeof trace, "%s.json", tmp_path);
    snprintf(args, sizeof args, "--placement-file %s -m 2 --trace %s", tmp_path, trace);
    cr_assert_eq(simulate(args), 0);
    snprintf(cmd, sizeof cmd,
             "python3 -c \"import json; d=json.load(open('%s')); assert any(e['ph']=='X' for e in d['traceEvents'])\"",
             trace);
    cr_assert_eq(system(cmd), 0);
    unlink(trace);
    drop_db();
}

Test(sim_cli, bad_input_is_one_stderr_line_and_exit_2) {
    make_db(0);
    char p41[256], junk[256], range[256], empty[256];
    snprintf(p41, sizeof p41, "--placement %s,0", P4);
    snprintf(junk, sizeof junk, "--placement x%s", P4 + 1);
    snprintf(range, sizeof range, "--placement 4%s", P4 + 1);
    snprintf(empty, sizeof empty, "--placement %.10s,%s", P4, P4 + 12);
    char sched[256], mb[256], cap[256], chunks[256], inter[256];
    snprintf(sched, sizeof sched, "--placement %s --schedule zerobubble", P4);
    snprintf(mb, sizeof mb, "--placement %s -m 3", P4);
    snprintf(cap, sizeof cap, "--placement %s --mem-cap 12parsecs", P4);
    snprintf(chunks, sizeof chunks, "--placement %s --chunks 2", P4);
    snprintf(inter, sizeof inter, "--placement %s --schedule interleaved --chunks 2 -m 4", P4);
    const char *cases[] = {p41,   junk, range, empty,  "--placement ''", "", sched, mb, cap, chunks, inter,
                           "--placement-file /nonexistent/placement", "--frobnicate"};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        int rc = simulate(cases[k]);
        char first[256];
        int lines = count_lines(err_path, first, sizeof first);
        cr_assert_eq(rc, 2, "'%s' exited %d", cases[k], rc);
        cr_assert_eq(lines, 1, "'%s' printed %d stderr lines", cases[k], lines);
        cr_assert(strncmp(first, "placer simulate: ", 17) == 0, "%s", first);
    }
    /* a missing database is bad input too */
    char cmd[512];
    snprintf(cmd, sizeof cmd, "'%s' simulate --db /nonexistent/x.db --placement 0 2>/dev/null", PLACER_BIN);
    int rc = system(cmd);
    int exit2 = WIFEXITED(rc) && WEXITSTATUS(rc) == 2;
    cr_assert(exit2, "missing database: status %d", rc);
    drop_db();
}
