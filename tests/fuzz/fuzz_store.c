/*
 * fuzz_store.c: libFuzzer target for the profile-store readers fed damaged
 * database files. Each input is written to a file, which is then opened
 * read-only and read the way the commands read it: the profile (as the
 * simulator loads it), the graph list, the machine and its links, step
 * anchors, simulator parameters, the runs with their samples and
 * checkpoints (each checkpoint restored into a placer), the measurements
 * (as calibration loads them), and the whole policy session that train and
 * search open.
 *
 * Seeds are small valid databases (tests/fuzz/seeds/store/, made by
 * tests/fuzz/make_store_seeds.sh with 512-byte pages and a rollback journal),
 * so that most mutations land in records rather than in the header.
 * A reader may refuse a file (any status) but must not crash, leak, hang or
 * trip a sanitizer; a profile it accepts must simulate without crashing.
 */
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "calib_db.h"
#include "profile_data.h"
#include "reinforce.h"
#include "session.h"
#include "sim.h"
#include "store.h"

static char path[PATH_MAX];

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    snprintf(path, sizeof path, "/tmp/placer-fuzz-store-%d.db", (int)getpid());
    return 0;
}

static void remove_all(void) {
    char side[PATH_MAX + 16];
    unlink(path);
    const char *sfx[] = {"-wal", "-shm", "-journal"};
    for (int i = 0; i < 3; i++) {
        snprintf(side, sizeof side, "%s%s", path, sfx[i]);
        unlink(side);
    }
}

typedef struct {
    int64_t ids[16];
    int n;
    int64_t samples;
} runs_seen;

static int on_run(void *ctx, const profile_run_info *r) {
    runs_seen *rs = ctx;
    if (!r->method || !r->args || !r->created_at) abort(); /* borrowed strings are never NULL */
    if (rs->n < 16) rs->ids[rs->n++] = r->id;
    return 0;
}

static int on_sample(void *ctx, const profile_run_sample *s) {
    runs_seen *rs = ctx;
    if (!s->placement) abort();
    (void)strlen(s->placement);
    return ++rs->samples > 5000; /* enough */
}

static int on_measurement(void *ctx, int64_t id, const profile_measurement *m, const char *at) {
    (void)id;
    int *n = ctx;
    if (!m->graph_key || !m->placement || !m->schedule || !m->purpose || !at) abort();
    return ++*n > 5000;
}

/* A loaded profile must be usable: simulate two placements on it (the
 * simulator may refuse, e.g. a NaN cost, but must not crash). */
static void simulate(const gpt_config *cfg, const profile_data *p) {
    graph *g = NULL;
    if (cfg->n_layers > 64 || graph_build_gpt(cfg, &g, NULL, 0) != PL_OK) return;
    sim_ctx *ctx = NULL;
    if (sim_ctx_create(g, p, 4, &ctx) == PL_OK) {
        int *place = calloc((size_t)g->n_nodes, sizeof(int));
        if (place) {
            sim_result r;
            schedule s1 = schedule_make(1, SCHED_GPIPE);
            sim_run(ctx, place, &s1, NULL, NULL, &r);
            for (int i = 0; i < g->n_nodes; i++) place[i] = i * p->n_devices / g->n_nodes;
            schedule s2 = schedule_make(cfg->batch % 2 == 0 ? 2 : 1, SCHED_1F1B);
            sim_run(ctx, place, &s2, NULL, NULL, &r);
        }
        free(place);
    }
    sim_ctx_destroy(ctx);
    graph_destroy(g);
}

static void read_everything(void) {
    char msg[512];
    profile_db *db = NULL;
    if (profile_db_open(path, PROFILE_DB_READ, &db, msg, sizeof msg) != PL_OK) {
        if (db) abort(); /* on error *out is NULL */
        return;
    }
    (void)profile_db_opened_version(db);
    {
        /* the collective curves, as profile show reads them (schema 2) */
        profile_coll_point *cp = NULL;
        int ncp = 0;
        if (profile_db_collective_points(db, &cp, &ncp) == PL_OK && ncp > 0 && !cp) abort();
        for (int i = 0; i < ncp; i++)
            if (!(cp[i].us > 0) || cp[i].ranks < 2) abort(); /* the store refuses such rows */
        free(cp);
    }

    /* the profile, as simulate/search/train load it */
    profile_data *p = NULL;
    gpt_config cfg;
    pl_status st = profile_db_load_profile(db, NULL, &p, &cfg, msg, sizeof msg);
    char key[128] = "";
    if (st == PL_OK) {
        simulate(&cfg, p);
        gpt_config_key(&cfg, key, sizeof key);
        double us = 0, sp = 0;
        for (int d = 0; d < p->n_devices && d < 4; d++) profile_db_get_step_anchor(db, key, d, 1, &us, &sp);
        for (int a = 0; a < p->n_devices && a < 4; a++)
            for (int b = 0; b < p->n_devices && b < 4; b++) {
                char kind[32];
                if (a != b) profile_db_link_kind(db, a, b, kind, sizeof kind);
            }
        double vals[SIM_N_PARAMS] = {0};
        const char *names[SIM_N_PARAMS];
        for (int i = 0; i < SIM_N_PARAMS; i++) names[i] = sim_param_name(i);
        int found = 0;
        profile_db_load_sim_params(db, key, SIM_N_PARAMS, names, vals, &found);
    } else if (p) {
        abort(); /* on error nothing is handed out */
    }
    profile_data_destroy(p);

    profile_db_graph_info *gi = NULL;
    int ng = 0;
    if (profile_db_list_graphs(db, &gi, &ng) == PL_OK && ng > 0 && !gi) abort();
    for (int i = 0; i < ng && i < 4; i++) {
        profile_data *q = NULL;
        if (profile_db_load_profile(db, &gi[i].cfg, &q, NULL, msg, sizeof msg) == PL_OK) simulate(&gi[i].cfg, q);
        profile_data_destroy(q);
    }
    free(gi);
    profile_db_machine_row mr;
    profile_db_machine(db, &mr);

    runs_seen rs;
    memset(&rs, 0, sizeof rs);
    profile_db_runs(db, on_run, &rs);
    for (int i = 0; i < rs.n && i < 4; i++) {
        profile_db_run_samples(db, rs.ids[i], on_sample, &rs);
        void *blob = NULL;
        size_t n = 0;
        int upd = -1;
        if (profile_db_checkpoint_load(db, rs.ids[i], -1, &upd, &blob, &n) == PL_OK && !blob) abort();
        free(blob);
    }
    int nm = 0;
    profile_db_measurements(db, NULL, on_measurement, &nm);
    profile_db_measurements(db, "calibrate", on_measurement, &nm);

    /* calibration's view: the model and its stored measurements */
    calib_model m;
    memset(&m, 0, sizeof m);
    if (calib_model_load(db, NULL, &m, msg, sizeof msg) == PL_OK) {
        calib_dataset *d = NULL;
        if (calib_dataset_create(m.g->n_nodes, &d) == PL_OK) {
            int skipped = 0;
            calib_db_load_dataset(db, m.key, "calibrate", m.p->n_devices, d, &skipped, msg, sizeof msg);
        }
        calib_dataset_destroy(d);
    }
    calib_model_free(&m);
    profile_db_close(db);

    /* the session train and search open, and each run's checkpoint restored */
    policy_session_options so;
    policy_session_options_default(&so);
    so.db_path = path;
    so.threads = 1;
    policy_session *ss = NULL;
    if (policy_session_open(&so, &ss, msg, sizeof msg) == PL_OK) {
        for (int i = 0; i < rs.n && i < 4; i++) {
            void *blob = NULL;
            size_t n = 0;
            int upd = -1;
            if (reinforce_load_checkpoint(ss->db, rs.ids[i], &blob, &n, &upd, msg, sizeof msg) == PL_OK) {
                reinforce *r = NULL;
                if (reinforce_create_from_checkpoint(ss->ev, blob, n, 0, &r, msg, sizeof msg) == PL_OK) {
                    policy_cands *c = NULL;
                    if (policy_cands_create(ss->g->n_nodes, ss->gr->n_groups, &c) == PL_OK)
                        reinforce_shortlist(r, c);
                    policy_cands_destroy(c);
                }
                reinforce_destroy(r);
            }
            free(blob);
        }
    }
    policy_session_close(ss);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    remove_all();
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) abort();
    if (size && write(fd, data, size) != (ssize_t)size) abort();
    close(fd);
    read_everything();
    remove_all();
    return 0;
}
