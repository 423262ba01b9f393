/*
 * test_reinforce.c: REINFORCE training against the simulator. Determinism
 * of a resumed run (after a cooperative stop and after a real SIGKILL of a
 * child process), checkpoint validation, and that training finds known
 * optima.
 */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "policy_fixture.h"
#include "reinforce.h"
#include "search.h"
#include "store.h"

static void temp_db(char *path, size_t len) {
    snprintf(path, len, "/tmp/placer-test-policy-XXXXXX");
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    close(fd);
    unlink(path); /* profile_db_open(CREATE) wants a missing or empty file */
}

static void remove_db(const char *path) {
    char buf[512];
    unlink(path);
    snprintf(buf, sizeof buf, "%s-wal", path);
    unlink(buf);
    snprintf(buf, sizeof buf, "%s-shm", path);
    unlink(buf);
}

static reinforce_options small_options(int updates) {
    reinforce_options o;
    reinforce_options_default(&o);
    o.updates = updates;
    o.samples = 6;
    o.hidden = 16;
    o.seed = 11;
    return o;
}

/* Collect a run's samples as one string for comparison. */
typedef struct {
    char *buf;
    size_t n, cap;
    int count;
} sample_text;

static int collect(void *ctx, const profile_run_sample *s) {
    sample_text *t = ctx;
    char line[1024];
    int k = snprintf(line, sizeof line, "%d/%d %s %.17g %lld %d\n", s->update, s->sample, s->placement, s->step_us,
                     (long long)s->peak_bytes, s->oom);
    if (t->n + (size_t)k + 1 > t->cap) {
        t->cap = (t->cap + (size_t)k + 1) * 2;
        t->buf = realloc(t->buf, t->cap);
    }
    memcpy(t->buf + t->n, line, (size_t)k + 1);
    t->n += (size_t)k;
    t->count++;
    return 0;
}

static sample_text run_samples(profile_db *db, int64_t run) {
    sample_text t = {0};
    cr_assert_eq(profile_db_run_samples(db, run, collect, &t), PL_OK);
    return t;
}

static int stop_at(void *ud, const reinforce_progress *p) { return p->update + 1 >= *(int *)ud; }

/* Straight run of N updates vs k updates, stop, resume to N. */
Test(reinforce, resume_after_stop_continues_the_identical_trajectory) {
    fixture f;
    fixture_init(&f, "default", "t4x4-pcie", 4, GROUPING_COLOCATE, 4, SCHED_1F1B, 0, 2);
    char path[256];
    temp_db(path, sizeof path);
    profile_db *db = NULL;
    char msg[256];
    cr_assert_eq(profile_db_open(path, PROFILE_DB_CREATE, &db, msg, sizeof msg), PL_OK, "%s", msg);
    const int N = 12, k = 5;
    reinforce_options o = small_options(N);
    int64_t run_a = 0, run_b = 0;
    cr_assert_eq(profile_db_run_create(db, "reinforce", "straight", &run_a), PL_OK);
    cr_assert_eq(profile_db_run_create(db, "reinforce", "stopped", &run_b), PL_OK);

    reinforce *a = NULL;
    cr_assert_eq(reinforce_create(f.ev, &o, &a, msg, sizeof msg), PL_OK);
    cr_assert_eq(reinforce_train(a, db, run_a, NULL, NULL, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_eq(reinforce_updates_done(a), N);

    reinforce *b = NULL;
    cr_assert_eq(reinforce_create(f.ev, &o, &b, msg, sizeof msg), PL_OK);
    int stop = k;
    cr_assert_eq(reinforce_train(b, db, run_b, stop_at, &stop, msg, sizeof msg), PL_ERR_INTERRUPTED);
    cr_assert_eq(reinforce_updates_done(b), k);
    reinforce_destroy(b); /* all that survives is in the store */

    void *blob = NULL;
    size_t n = 0;
    int upd = -1;
    cr_assert_eq(reinforce_load_checkpoint(db, run_b, &blob, &n, &upd, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_eq(upd, k - 1);
    cr_assert_eq(reinforce_create_from_checkpoint(f.ev, blob, n, 0, &b, msg, sizeof msg), PL_OK, "%s", msg);
    free(blob);
    cr_assert_eq(reinforce_updates_done(b), k);
    cr_assert_eq(reinforce_train(b, db, run_b, NULL, NULL, msg, sizeof msg), PL_OK, "%s", msg);

    /* identical final state: parameters, Adam moments, generator, baseline, best list */
    void *ba = NULL, *bb = NULL;
    size_t na = 0, nb = 0;
    cr_assert_eq(reinforce_serialize(a, &ba, &na), PL_OK);
    cr_assert_eq(reinforce_serialize(b, &bb, &nb), PL_OK);
    cr_assert_eq(na, nb);
    cr_assert(memcmp(ba, bb, na) == 0, "final training states differ");
    const placer_net *na_net = reinforce_get_net(a), *nb_net = reinforce_get_net(b);
    cr_assert_arr_eq(na_net->params, nb_net->params, sizeof(double) * na_net->n_params);
    /* identical samples, all logged */
    sample_text ta = run_samples(db, run_a), tb = run_samples(db, run_b);
    cr_assert_eq(ta.count, N * o.samples);
    cr_assert_eq(tb.count, N * o.samples);
    cr_assert_str_eq(ta.buf, tb.buf);
    /* only the latest checkpoint is kept */
    void *old = NULL;
    size_t old_n = 0;
    cr_assert_eq(profile_db_checkpoint_load(db, run_a, 0, NULL, &old, &old_n), PL_ERR_NOT_FOUND);
    cr_assert_eq(profile_db_checkpoint_load(db, run_a, N - 1, NULL, &old, &old_n), PL_OK);
    free(old);
    free(ta.buf);
    free(tb.buf);
    free(ba);
    free(bb);
    reinforce_destroy(a);
    reinforce_destroy(b);
    profile_db_close(db);
    remove_db(path);
    fixture_fini(&f);
}

/* The child trains run `run` to N updates, logging to the file; it is killed
 * with SIGKILL somewhere after update `kill_after`. */
static void child_train(const char *path, int64_t run, int N) {
    fixture f;
    fixture_init(&f, "default", "t4x4-pcie", 4, GROUPING_COLOCATE, 4, SCHED_1F1B, 0, 2);
    profile_db *db = NULL;
    char msg[256];
    if (profile_db_open(path, PROFILE_DB_WRITE, &db, msg, sizeof msg) != PL_OK) _exit(3);
    reinforce_options o = small_options(N);
    reinforce *r = NULL;
    if (reinforce_create(f.ev, &o, &r, msg, sizeof msg) != PL_OK) _exit(4);
    reinforce_train(r, db, run, NULL, NULL, msg, sizeof msg);
    _exit(0);
}

static int latest_update(const char *path, int64_t run) {
    profile_db *db = NULL;
    if (profile_db_open(path, PROFILE_DB_READ, &db, NULL, 0) != PL_OK) return -1;
    void *blob = NULL;
    size_t n = 0;
    int upd = -1;
    if (profile_db_checkpoint_load(db, run, -1, &upd, &blob, &n) != PL_OK) upd = -1;
    free(blob);
    profile_db_close(db);
    return upd;
}

Test(reinforce, resume_after_sigkill_of_a_training_process_is_identical, .timeout = 120) {
    char path[256];
    temp_db(path, sizeof path);
    profile_db *db = NULL;
    char msg[256];
    cr_assert_eq(profile_db_open(path, PROFILE_DB_CREATE, &db, msg, sizeof msg), PL_OK, "%s", msg);
    const int N = 400;
    int64_t run_a = 0, run_b = 0;
    cr_assert_eq(profile_db_run_create(db, "reinforce", "straight", &run_a), PL_OK);
    cr_assert_eq(profile_db_run_create(db, "reinforce", "killed", &run_b), PL_OK);
    profile_db_close(db);
    db = NULL;

    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) child_train(path, run_b, N);
    /* kill it mid-run: after a few committed updates, at no particular point */
    int seen = -1;
    for (int tries = 0; tries < 20000 && seen < 20; tries++) {
        usleep(1000);
        seen = latest_update(path, run_b);
    }
    kill(pid, SIGKILL);
    int status = 0;
    waitpid(pid, &status, 0);
    int killed = WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;
    cr_assert(killed, "the child was killed, not finished");
    int at_kill = latest_update(path, run_b);
    cr_assert(at_kill >= 20 && at_kill < N - 1, "killed after update %d", at_kill);

    /* resume in this process, and train the straight run too */
    fixture f;
    fixture_init(&f, "default", "t4x4-pcie", 4, GROUPING_COLOCATE, 4, SCHED_1F1B, 0, 2);
    cr_assert_eq(profile_db_open(path, PROFILE_DB_WRITE, &db, msg, sizeof msg), PL_OK, "%s", msg);
    void *blob = NULL;
    size_t n = 0;
    int upd = -1;
    cr_assert_eq(reinforce_load_checkpoint(db, run_b, &blob, &n, &upd, msg, sizeof msg), PL_OK);
    reinforce *b = NULL, *a = NULL;
    cr_assert_eq(reinforce_create_from_checkpoint(f.ev, blob, n, 0, &b, msg, sizeof msg), PL_OK, "%s", msg);
    free(blob);
    cr_assert_eq(reinforce_train(b, db, run_b, NULL, NULL, msg, sizeof msg), PL_OK, "%s", msg);
    reinforce_options o = small_options(N);
    cr_assert_eq(reinforce_create(f.ev, &o, &a, msg, sizeof msg), PL_OK);
    cr_assert_eq(reinforce_train(a, db, run_a, NULL, NULL, msg, sizeof msg), PL_OK, "%s", msg);
    void *ba = NULL, *bb = NULL;
    size_t na = 0, nb = 0;
    cr_assert_eq(reinforce_serialize(a, &ba, &na), PL_OK);
    cr_assert_eq(reinforce_serialize(b, &bb, &nb), PL_OK);
    cr_assert_eq(na, nb);
    cr_assert(memcmp(ba, bb, na) == 0, "final training states differ after a kill at update %d", at_kill);
    sample_text ta = run_samples(db, run_a), tb = run_samples(db, run_b);
    cr_assert_eq(ta.count, N * o.samples);
    cr_assert_eq(tb.count, N * o.samples, "no committed sample lost, none duplicated");
    cr_assert_str_eq(ta.buf, tb.buf);
    free(ta.buf);
    free(tb.buf);
    free(ba);
    free(bb);
    reinforce_destroy(a);
    reinforce_destroy(b);
    profile_db_close(db);
    remove_db(path);
    fixture_fini(&f);
}

Test(reinforce, damaged_or_foreign_checkpoints_are_refused) {
    fixture f;
    fixture_init(&f, "tiny", "t4x4-pcie", 2, GROUPING_COLOCATE, 1, SCHED_GPIPE, 0, 1);
    reinforce_options o = small_options(3);
    reinforce *r = NULL;
    char msg[256];
    cr_assert_eq(reinforce_create(f.ev, &o, &r, msg, sizeof msg), PL_OK);
    cr_assert_eq(reinforce_train(r, NULL, 0, NULL, NULL, msg, sizeof msg), PL_OK);
    void *blob = NULL;
    size_t n = 0;
    cr_assert_eq(reinforce_serialize(r, &blob, &n), PL_OK);
    reinforce *x = NULL;
    cr_assert_eq(reinforce_create_from_checkpoint(f.ev, blob, n - 1, 0, &x, msg, sizeof msg), PL_ERR_INVALID);
    cr_assert_null(x);
    ((unsigned char *)blob)[0] ^= 0xff;
    cr_assert_eq(reinforce_create_from_checkpoint(f.ev, blob, n, 0, &x, msg, sizeof msg), PL_ERR_INVALID);
    ((unsigned char *)blob)[0] ^= 0xff;
    cr_assert_eq(reinforce_create_from_checkpoint(f.ev, blob, n, 0, &x, msg, sizeof msg), PL_OK);
    reinforce_destroy(x);
    /* another problem shape (more units) is refused with a message */
    fixture g;
    fixture_init(&g, "tiny,layers=3", "t4x4-pcie", 2, GROUPING_COLOCATE, 1, SCHED_GPIPE, 0, 1);
    cr_assert_eq(reinforce_create_from_checkpoint(g.ev, blob, n, 0, &x, msg, sizeof msg), PL_ERR_INVALID);
    cr_assert(strstr(msg, "units") != NULL, "%s", msg);
    free(blob);
    reinforce_destroy(r);
    fixture_fini(&g);
    fixture_fini(&f);
}

Test(reinforce, bad_options_are_refused) {
    fixture f;
    fixture_init(&f, "tiny", "t4x4-pcie", 2, GROUPING_COLOCATE, 1, SCHED_GPIPE, 0, 1);
    reinforce_options o = small_options(3);
    reinforce *r = NULL;
    char msg[256] = "";
    o.samples = 0;
    cr_assert_eq(reinforce_create(f.ev, &o, &r, msg, sizeof msg), PL_ERR_INVALID);
    o = small_options(3);
    o.baseline = BASELINE_LOO;
    o.samples = 1;
    cr_assert_eq(reinforce_create(f.ev, &o, &r, msg, sizeof msg), PL_ERR_INVALID);
    o = small_options(3);
    o.lr = -1;
    cr_assert_eq(reinforce_create(f.ev, &o, &r, msg, sizeof msg), PL_ERR_INVALID);
    cr_assert_null(r);
    fixture_fini(&f);
}

/* A clear optimum: device 1 is three times faster than device 0 at
 * everything, links are slow, so the whole model belongs on device 1. The
 * final policy itself (its greedy decode) must say so. */
Test(reinforce, training_learns_an_obvious_placement_as_its_favourite) {
    graph *g = fixture_graph("default");
    profile_data *p = fixture_profile("t4x4-pcie", g, 2);
    for (int k = 0; k < p->n_mb; k++)
        for (int i = 0; i < p->n_nodes; i++)
            for (int ph = 0; ph < PHASE_COUNT; ph++) p->cost_us[profile_cost_index(p, 0, k, i, ph)] *= 3.0;
    fixture f;
    fixture_init_with(&f, g, p, GROUPING_COLOCATE, 1, SCHED_GPIPE, 0, 2);
    for (int uniform = 0; uniform < 2; uniform++) {
        reinforce_options o;
        reinforce_options_default(&o);
        o.updates = 150;
        o.stay = uniform ? 0.0 : 0.75; /* with and without the prior */
        reinforce *r = NULL;
        char msg[256];
        cr_assert_eq(reinforce_create(f.ev, &o, &r, msg, sizeof msg), PL_OK);
        cr_assert_eq(reinforce_train(r, NULL, 0, NULL, NULL, msg, sizeof msg), PL_OK);
        int fav[13];
        policy_eval e;
        cr_assert_eq(reinforce_favourite(r, fav, &e), PL_OK);
        for (int u = 0; u < 13; u++) cr_assert_eq(fav[u], 1, "unit %d on device %d (prior %g)", u, fav[u], o.stay);
        reinforce_destroy(r);
    }
    fixture_fini(&f);
}

/* The exhaustive optimum of the default GPT's 13 groups on the two-H200
 * spec at m = 4, 1F1B is found within the default 250 x 8 budget. */
Test(reinforce, training_finds_the_exhaustive_optimum_on_h200x2_m4) {
    fixture f;
    fixture_init(&f, "default", "h200x2-nvlink", 2, GROUPING_COLOCATE, 4, SCHED_1F1B, 0, 2);
    policy_cands *c = NULL;
    cr_assert_eq(policy_cands_create(f.g->n_nodes, f.gr->n_groups, &c), PL_OK);
    char msg[256];
    cr_assert_eq(search_exhaustive(f.ev, 1e6, c, NULL, msg, sizeof msg), PL_OK);
    double opt = c->items[0].ev.cost_us;
    reinforce_options o;
    reinforce_options_default(&o);
    reinforce *r = NULL;
    cr_assert_eq(reinforce_create(f.ev, &o, &r, msg, sizeof msg), PL_OK);
    cr_assert_eq(reinforce_train(r, NULL, 0, NULL, NULL, msg, sizeof msg), PL_OK);
    cr_assert(ieee_ulp_eq(dbl, reinforce_best_cost(r), opt, 0), "best found %.3f vs optimum %.3f",
              reinforce_best_cost(r), opt);
    /* the shortlist: top-k distinct up to relabelling, best first, then the favourite */
    policy_cands *s = NULL;
    cr_assert_eq(policy_cands_create(f.g->n_nodes, f.gr->n_groups, &s), PL_OK);
    cr_assert_eq(reinforce_shortlist(r, s), PL_OK);
    cr_assert_eq(s->n, o.top_k + 1);
    cr_assert_str_eq(s->items[s->n - 1].label, "rl favourite");
    for (int i = 1; i < s->n - 1; i++) cr_assert_geq(s->items[i].ev.cost_us, s->items[i - 1].ev.cost_us);
    for (int i = 0; i < s->n - 1; i++)
        for (int j = 0; j < i; j++) {
            int same = 1, swapped = 1;
            for (int u = 0; u < 13; u++) {
                same &= s->items[i].unit_dev[u] == s->items[j].unit_dev[u];
                swapped &= s->items[i].unit_dev[u] == 1 - s->items[j].unit_dev[u];
            }
            int distinct = !same && !swapped;
            cr_assert(distinct, "shortlist entries %d and %d are the same placement", i, j);
        }
    policy_cands_destroy(s);
    policy_cands_destroy(c);
    reinforce_destroy(r);
    fixture_fini(&f);
}

/* The network reads any sequence length: train on a 4-layer graph, then
 * place an 8-layer one with the same net (the generalisation benchmark). */
Test(reinforce, retarget_places_a_longer_graph_with_the_same_network) {
    fixture a, b;
    fixture_init(&a, "default,layers=4", "t4x4-pcie", 2, GROUPING_COLOCATE, 4, SCHED_1F1B, 0, 2);
    fixture_init(&b, "default,layers=8", "t4x4-pcie", 2, GROUPING_COLOCATE, 4, SCHED_1F1B, 0, 2);
    reinforce_options o = small_options(10);
    reinforce *r = NULL;
    char msg[256];
    cr_assert_eq(reinforce_create(a.ev, &o, &r, msg, sizeof msg), PL_OK);
    cr_assert_eq(reinforce_train(r, NULL, 0, NULL, NULL, msg, sizeof msg), PL_OK);
    cr_assert_eq(reinforce_retarget(r, b.ev, 15), PL_OK);
    int fav[64];
    policy_eval e;
    cr_assert_eq(reinforce_favourite(r, fav, &e), PL_OK);
    for (int u = 0; u < b.gr->n_groups; u++) cr_assert(fav[u] == 0 || fav[u] == 1);
    cr_assert_eq(reinforce_train(r, NULL, 0, NULL, NULL, msg, sizeof msg), PL_OK);
    cr_assert_eq(reinforce_updates_done(r), 15);
    cr_assert(isfinite(reinforce_best_cost(r)));
    reinforce_destroy(r);
    fixture_fini(&a);
    fixture_fini(&b);
}
