/* calib_fixture.h: shared set-up for the calib tests: a graph with a spec
 * profile (no hardware needed) and a scratch profile database. */
#ifndef PLACER_TESTS_CALIB_FIXTURE_H
#define PLACER_TESTS_CALIB_FIXTURE_H

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "graph.h"
#include "profile_data.h"
#include "spec.h"
#include "store.h"

typedef struct {
    gpt_config cfg;
    graph *g;
    profile_data *p;
    char key[PROFILE_NAME_LEN];
} fx_model;

/* The graph of config `conf` with the spec profile `machine` at micro-batch
 * sizes batch, batch/2, batch/4. */
static inline void fx_model_make(fx_model *m, const char *conf, const char *machine) {
    char msg[256];
    cr_assert_eq(gpt_config_parse(conf, &m->cfg, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_eq(graph_build_gpt(&m->cfg, &m->g, msg, sizeof msg), PL_OK, "%s", msg);
    const machine_spec *s = spec_find(machine);
    cr_assert_not_null(s);
    int mb[3] = {m->cfg.batch, m->cfg.batch / 2, m->cfg.batch / 4};
    int n_mb = m->cfg.batch >= 4 ? 3 : 1;
    cr_assert_eq(spec_profile_build(s, m->g, mb, n_mb, &m->p), PL_OK);
    gpt_config_key(&m->cfg, m->key, sizeof m->key);
}

static inline void fx_model_free(fx_model *m) {
    profile_data_destroy(m->p);
    graph_destroy(m->g);
}

/* A fresh database file in /tmp holding m's profile; path gets its name. */
static inline profile_db *fx_db_make(const fx_model *m, char *path, size_t len) {
    snprintf(path, len, "/tmp/placer-calib-test-XXXXXX");
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    close(fd);
    unlink(path);
    char msg[256];
    profile_db *db = NULL;
    cr_assert_eq(profile_db_open(path, PROFILE_DB_CREATE, &db, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_eq(profile_db_save_profile(db, &m->cfg, m->p, msg, sizeof msg), PL_OK, "%s", msg);
    return db;
}

/* Remove a database file and its WAL companions. */
static inline void fx_db_remove(const char *path) {
    char b[512];
    unlink(path);
    snprintf(b, sizeof b, "%s-wal", path);
    unlink(b);
    snprintf(b, sizeof b, "%s-shm", path);
    unlink(b);
}

#endif
