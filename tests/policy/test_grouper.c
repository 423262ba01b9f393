/*
 * test_grouper.c: the learned grouping. Groups from labels; the joint
 * policy's gradient (grouper, EAGLE's link, placer) against central finite
 * differences of its loss; training with a learned grouping resumed from
 * a checkpoint on the identical trajectory, for REINFORCE and PPO.
 *
 * Tolerance as in test_nn.c (h = 1e-6, double precision: agreement to
 * ~1e-8; a wrong sign, index or a missing path gives O(1) errors). The
 * gradient test also checks that the link really carries gradient: with
 * EAGLE, the grouper's parameters get gradient from the placer's term
 * (the loss with the label term's weight made zero still moves them).
 */
#include <criterion/criterion.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "grouper.h"
#include "policy_fixture.h"
#include "reinforce.h"
#include "store.h"

#define FD_H 1e-6

static void check_close(double analytic, double numeric, const char *what, int i) {
    double err = fabs(analytic - numeric);
    double scale = fmax(fabs(analytic), fabs(numeric));
    cr_assert(err <= 1e-8 || err <= 1e-6 * scale, "%s[%d]: analytic %.10g numeric %.10g", what, i, analytic,
              numeric);
}

Test(grouper, labels_become_groups_numbered_by_their_first_node) {
    graph *g = fixture_graph("default");
    grouping *gr = NULL;
    cr_assert_eq(grouping_alloc(g->n_nodes, &gr), PL_OK);
    int labels[40];
    for (int i = 0; i < 40; i++) labels[i] = i < 10 ? 7 : i < 25 ? 3 : (i % 2 ? 7 : 11);
    grouping_assign(gr, g, labels, GROUPING_LEARNED);
    cr_assert_eq(gr->n_groups, 3);
    cr_assert_eq(gr->node_group[0], 0); /* label 7 first */
    cr_assert_eq(gr->node_group[10], 1);
    cr_assert_eq(gr->node_group[26], 2); /* label 11 */
    cr_assert_eq(gr->node_group[27], 0);
    int count[3] = {0};
    for (int i = 0; i < 40; i++) count[gr->node_group[i]]++;
    cr_assert_eq(count[0], 10 + 8);
    cr_assert_eq(count[1], 15);
    cr_assert_eq(count[2], 7);
    for (int k = 0; k < 3; k++) {
        cr_assert_eq(gr->group_start[k + 1] - gr->group_start[k], count[k]);
        for (int q = gr->group_start[k]; q < gr->group_start[k + 1]; q++) {
            cr_assert_eq(gr->node_group[gr->members[q]], k);
            if (q > gr->group_start[k]) cr_assert_lt(gr->members[q - 1], gr->members[q]);
        }
    }
    cr_assert_eq(gr->chain, 0);
    /* the union-find labels of colocate give grouping_build's groups */
    grouping *ref = NULL;
    cr_assert_eq(grouping_build(g, GROUPING_COLOCATE, &ref, NULL, 0), PL_OK);
    int lab2[40];
    for (int i = 0; i < 40; i++) lab2[i] = 100 + 3 * ref->node_group[i];
    grouping_assign(gr, g, lab2, GROUPING_COLOCATE);
    cr_assert_eq(gr->n_groups, ref->n_groups);
    cr_assert(memcmp(gr->node_group, ref->node_group, sizeof(int) * 40) == 0);
    cr_assert(memcmp(gr->features, ref->features, sizeof(double) * (size_t)ref->n_groups * GROUP_N_FEATURES) == 0);
    grouping_destroy(ref);
    grouping_destroy(gr);
    graph_destroy(g);
}

typedef struct {
    graph *g;
    grouper_net *gn;
    grouper_acts *ga;
    placer_net *pn;
    placer_acts *sa[3];
    grouping *sg[3];
    double *nfeat, *sfeat, *dfeat;
    int *labels, *sdev, *node_dev;
    hier_batch b;
} joint;

enum { JK = 3, JG = 4, JD = 3 };

static void joint_init(joint *j, int eagle) {
    memset(j, 0, sizeof *j);
    j->g = fixture_graph("default,layers=2");
    const int N = j->g->n_nodes;
    grouper_config gc = {eagle, NODE_N_FEATURES, JG, 5, 3, 1.0};
    cr_assert_eq(grouper_net_create(&gc, 3, &j->gn), PL_OK);
    pl_rng r;
    pl_rng_seed(&r, 17);
    /* larger weights than the init, so every path matters */
    for (size_t i = 0; i < j->gn->n_params; i++) j->gn->params[i] = 2.0 * pl_rng_uniform(&r) - 1.0;
    cr_assert_eq(grouper_acts_create(j->gn, N, &j->ga), PL_OK);
    const int W = grouper_input_width(j->gn);
    placer_net_config pc = {W, JD, 4, 5, 3, 2, 0.5, 0.0, 0.0};
    cr_assert_eq(placer_net_create(&pc, 5, &j->pn), PL_OK);
    for (size_t i = 0; i < j->pn->size[PN_OUT_W]; i++) placer_net_param(j->pn, PN_OUT_W)[i] = 2.0 * pl_rng_uniform(&r) - 1.0;
    for (int k = 0; k < JK; k++) {
        cr_assert_eq(placer_acts_create(j->pn, JG, 1, &j->sa[k]), PL_OK);
        cr_assert_eq(grouping_alloc(N, &j->sg[k]), PL_OK);
    }
    j->nfeat = malloc(sizeof(double) * (size_t)N * NODE_N_FEATURES);
    node_features(j->g, j->nfeat);
    j->sfeat = calloc((size_t)JK * JG * W, sizeof(double));
    j->dfeat = calloc((size_t)JG * W, sizeof(double));
    j->labels = calloc((size_t)JK * N, sizeof(int));
    j->sdev = calloc((size_t)JK * JG, sizeof(int));
    j->node_dev = calloc((size_t)JK * N, sizeof(int));
    hier_batch b = {JK, N, JG, W, j->g, j->gn, j->ga, j->nfeat, j->pn, j->sa, j->sg, j->labels, j->sfeat, j->sdev,
                    j->dfeat};
    j->b = b;
    double logp[JK];
    cr_assert_eq(hier_sample(&j->b, &r, j->node_dev, logp), PL_OK);
    for (int k = 0; k < JK; k++) cr_assert(isfinite(logp[k]) && logp[k] < 0);
}

static void joint_fini(joint *j) {
    for (int k = 0; k < JK; k++) {
        placer_acts_destroy(j->sa[k]);
        grouping_destroy(j->sg[k]);
    }
    grouper_acts_destroy(j->ga);
    grouper_net_destroy(j->gn);
    placer_net_destroy(j->pn);
    free(j->nfeat);
    free(j->sfeat);
    free(j->dfeat);
    free(j->labels);
    free(j->sdev);
    free(j->node_dev);
    graph_destroy(j->g);
}

static double joint_loss(joint *j, const double *w, double beta) {
    double logp[JK];
    cr_assert_eq(hier_forward_given(&j->b, logp), PL_OK);
    /* hier_loss_backward accumulates gradients as a side effect; the
     * analytic ones were copied before */
    return hier_loss_backward(&j->b, w, beta, NULL);
}

static void check_joint(int eagle) {
    joint j;
    joint_init(&j, eagle);
    const double w[JK] = {0.9, -1.1, 0.4}, beta = 0.05;
    grouper_net_zero_grad(j.gn);
    placer_net_zero_grad(j.pn);
    double logp[JK];
    cr_assert_eq(hier_forward_given(&j.b, logp), PL_OK);
    hier_loss_backward(&j.b, w, beta, NULL);
    double *gg = malloc(sizeof *gg * j.gn->n_params), *pg = malloc(sizeof *pg * j.pn->n_params);
    memcpy(gg, j.gn->grads, sizeof *gg * j.gn->n_params);
    memcpy(pg, j.pn->grads, sizeof *pg * j.pn->n_params);
    for (size_t i = 0; i < j.gn->n_params; i++) {
        double old = j.gn->params[i];
        j.gn->params[i] = old + FD_H;
        double lp = joint_loss(&j, w, beta);
        j.gn->params[i] = old - FD_H;
        double lm = joint_loss(&j, w, beta);
        j.gn->params[i] = old;
        check_close(gg[i], (lp - lm) / (2 * FD_H), eagle ? "eagle grouper" : "grouper", (int)i);
    }
    for (size_t i = 0; i < j.pn->n_params; i++) {
        double old = j.pn->params[i];
        j.pn->params[i] = old + FD_H;
        double lp = joint_loss(&j, w, beta);
        j.pn->params[i] = old - FD_H;
        double lm = joint_loss(&j, w, beta);
        j.pn->params[i] = old;
        check_close(pg[i], (lp - lm) / (2 * FD_H), "placer", (int)i);
    }
    /* the link: the placer's term alone (no label term, no entropy) still
     * moves the grouper with EAGLE, and does not without it */
    grouper_net_zero_grad(j.gn);
    placer_net_zero_grad(j.pn);
    cr_assert_eq(hier_forward_given(&j.b, logp), PL_OK);
    /* weights enter both terms equally, so remove the label term by hand:
     * its gradient is w (P - onehot) on the logits; compute the placer-only
     * gradient as total minus label-only */
    hier_loss_backward(&j.b, w, 0.0, NULL);
    double *tot = malloc(sizeof *tot * j.gn->n_params);
    memcpy(tot, j.gn->grads, sizeof *tot * j.gn->n_params);
    grouper_net_zero_grad(j.gn);
    grouper_forward(j.gn, j.ga, j.nfeat);
    for (int k = 0; k < JK; k++) grouper_add_label_grad(j.ga, j.labels + (size_t)k * j.b.N, w[k], 1.0 / JK);
    grouper_backward(j.gn, j.ga, j.nfeat);
    double diff = 0;
    for (size_t i = 0; i < j.gn->n_params; i++) diff += fabs(tot[i] - j.gn->grads[i]);
    if (eagle) cr_assert_gt(diff, 1e-6, "EAGLE: the placer's loss does not reach the grouper");
    else cr_assert_lt(diff, 1e-12, "hierarchical: the grouper should learn from its labels only");
    free(tot);
    free(gg);
    free(pg);
    joint_fini(&j);
}

Test(grouper, hierarchical_joint_gradient_matches_finite_differences) { check_joint(0); }

Test(grouper, eagle_joint_gradient_through_the_link_matches_finite_differences) { check_joint(1); }

Test(grouper, contiguity_prior_makes_the_first_grouper_prefer_chunks) {
    graph *g = fixture_graph("default");
    const int N = g->n_nodes;
    grouper_config gc = {0, NODE_N_FEATURES, 8, 16, 4, 2.0};
    grouper_net *gn = NULL;
    grouper_acts *ga = NULL;
    cr_assert_eq(grouper_net_create(&gc, 1, &gn), PL_OK);
    cr_assert_eq(grouper_acts_create(gn, N, &ga), PL_OK);
    double *nf = malloc(sizeof *nf * (size_t)N * NODE_N_FEATURES);
    node_features(g, nf);
    grouper_forward(gn, ga, nf);
    const double *P = grouper_probs(ga);
    /* the first node prefers group 0, the last group 7, the middle 3 or 4 */
    int l[40];
    grouper_greedy(ga, l);
    cr_assert_eq(l[0], 0);
    cr_assert_eq(l[N - 1], 7);
    cr_assert(l[N / 2] == 3 || l[N / 2] == 4);
    for (int n = 1; n < N; n++) cr_assert_geq(l[n], l[n - 1], "greedy labels are monotone");
    for (int n = 0; n < N; n++) {
        double s = 0;
        for (int k = 0; k < 8; k++) s += P[(size_t)n * 8 + k];
        cr_assert_float_eq(s, 1.0, 1e-12);
    }
    free(nf);
    grouper_acts_destroy(ga);
    grouper_net_destroy(gn);
    graph_destroy(g);
}

/* Positions in work: a heavy first node moves the boundary of two
 * equal-work chunks from after node 3 (node count) to after node 2. */
Test(grouper, positions_in_work_make_the_first_grouper_prefer_equal_work_chunks) {
    enum { N = 8, G = 2 };
    grouper_config gc = {0, 3, G, 4, 4, 8.0};
    grouper_net *gn = NULL;
    grouper_acts *ga = NULL;
    cr_assert_eq(grouper_net_create(&gc, 1, &gn), PL_OK);
    cr_assert_eq(grouper_acts_create(gn, N, &ga), PL_OK);
    double nf[N * 3] = {0}, w[N] = {6, 1, 1, 1, 1, 1, 1, 4}, bad[N] = {1, 1, -1, 1, 1, 1, 1, 1}, zero[N] = {0};
    cr_assert_eq(grouper_acts_set_positions(gn, ga, bad), PL_ERR_INVALID);
    cr_assert_eq(grouper_acts_set_positions(gn, ga, zero), PL_ERR_INVALID);
    int l[N];
    grouper_forward(gn, ga, nf);
    grouper_greedy(ga, l);
    const int by_count[N] = {0, 0, 0, 0, 1, 1, 1, 1};
    cr_assert_arr_eq(l, by_count, sizeof l, "node-count positions");
    cr_assert_eq(grouper_acts_set_positions(gn, ga, w), PL_OK);
    grouper_forward(gn, ga, nf);
    grouper_greedy(ga, l);
    /* x_n = 3/16, 6.5/16, 7.5/16, 8.5/16, ...: nodes 0-2 in group 0 */
    const int by_work[N] = {0, 0, 0, 1, 1, 1, 1, 1};
    cr_assert_arr_eq(l, by_work, sizeof l, "work positions");
    grouper_acts_destroy(ga);
    grouper_net_destroy(gn);
}

static reinforce_options grouped(int updates, grouper_kind kind, reinforce_algo algo) {
    reinforce_options o;
    reinforce_options_default(&o);
    o.updates = updates;
    o.samples = 4;
    o.hidden = 16;
    o.seed = 3;
    o.grouper = kind;
    o.n_groups = 6;
    o.grouper_hidden = 16;
    o.link_hidden = 4;
    o.algo = algo;
    o.ppo_epochs = 2;
    return o;
}

static void check_resume(grouper_kind kind, reinforce_algo algo) {
    fixture f;
    fixture_init(&f, "default", "t4x4-pcie", 4, GROUPING_LEARNED, 4, SCHED_1F1B, 0, 2);
    char msg[256];
    reinforce_options o = grouped(6, kind, algo), o2 = grouped(2, kind, algo);
    if (algo == ALGO_PPO) o.pipe_prior = o2.pipe_prior = 1.5; /* a checkpoint keeps it (version 3) */
    reinforce *a = NULL, *b = NULL;
    cr_assert_eq(reinforce_create(f.ev, &o, &a, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_eq(reinforce_train(a, NULL, 0, NULL, NULL, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_eq(reinforce_create(f.ev, &o2, &b, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_eq(reinforce_train(b, NULL, 0, NULL, NULL, msg, sizeof msg), PL_OK, "%s", msg);
    void *blob = NULL;
    size_t n = 0;
    cr_assert_eq(reinforce_serialize(b, &blob, &n), PL_OK);
    reinforce_destroy(b);
    cr_assert_eq(reinforce_create_from_checkpoint(f.ev, blob, n, 6, &b, msg, sizeof msg), PL_OK, "%s", msg);
    free(blob);
    cr_assert_eq(reinforce_get_options(b)->grouper, kind);
    cr_assert_eq(reinforce_get_options(b)->pipe_prior, o.pipe_prior);
    cr_assert_eq(reinforce_train(b, NULL, 0, NULL, NULL, msg, sizeof msg), PL_OK, "%s", msg);
    void *ba = NULL, *bb = NULL;
    size_t na = 0, nb = 0;
    cr_assert_eq(reinforce_serialize(a, &ba, &na), PL_OK);
    cr_assert_eq(reinforce_serialize(b, &bb, &nb), PL_OK);
    cr_assert_eq(na, nb);
    cr_assert(memcmp(ba, bb, na) == 0, "resumed state differs");
    /* the shortlist holds node placements that were evaluated */
    policy_cands *c = NULL;
    cr_assert_eq(policy_cands_create(f.g->n_nodes, f.gr->n_groups, &c), PL_OK);
    cr_assert_eq(reinforce_shortlist(a, c), PL_OK);
    cr_assert_geq(c->n, 2);
    cr_assert(c->items[0].ev.cost_us > 0 && isfinite(c->items[0].ev.cost_us));
    cr_assert_eq(c->items[0].ev.cost_us, reinforce_best_cost(a));
    policy_cands_destroy(c);
    free(ba);
    free(bb);
    reinforce_destroy(a);
    reinforce_destroy(b);
    fixture_fini(&f);
}

Test(grouper, hierarchical_reinforce_resume_is_identical) { check_resume(GROUPER_HIER, ALGO_REINFORCE); }
Test(grouper, eagle_ppo_resume_is_identical) { check_resume(GROUPER_EAGLE, ALGO_PPO); }

Test(grouper, learned_grouping_needs_the_nodes_as_units) {
    fixture f;
    fixture_init(&f, "default", "t4x4-pcie", 2, GROUPING_COLOCATE, 1, SCHED_GPIPE, 0, 1);
    char msg[256];
    reinforce_options o = grouped(2, GROUPER_HIER, ALGO_REINFORCE);
    reinforce *r = NULL;
    cr_assert_eq(reinforce_create(f.ev, &o, &r, msg, sizeof msg), PL_ERR_INVALID);
    cr_assert(strstr(msg, "units"), "%s", msg);
    cr_assert_null(r);
    fixture_fini(&f);
}

/* ---- SIGKILL of a training process with a learned grouping -------------- */

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

static void child_train(const char *path, int64_t run, int N) {
    fixture f;
    fixture_init(&f, "default", "t4x4-pcie", 4, GROUPING_EAGLE, 4, SCHED_1F1B, 0, 1);
    profile_db *db = NULL;
    char msg[256];
    if (profile_db_open(path, PROFILE_DB_WRITE, &db, msg, sizeof msg) != PL_OK) _exit(3);
    reinforce_options o = grouped(N, GROUPER_EAGLE, ALGO_PPO);
    reinforce *r = NULL;
    if (reinforce_create(f.ev, &o, &r, msg, sizeof msg) != PL_OK) _exit(4);
    reinforce_train(r, db, run, NULL, NULL, msg, sizeof msg);
    _exit(0);
}

static void db_text(profile_db *db, int64_t run, char **out, int *count);

Test(grouper, eagle_ppo_resumed_after_sigkill_matches_an_uninterrupted_run, .timeout = 120) {
    char path[256];
    snprintf(path, sizeof path, "/tmp/placer-test-grouper-XXXXXX");
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    close(fd);
    unlink(path);
    profile_db *db = NULL;
    char msg[256];
    cr_assert_eq(profile_db_open(path, PROFILE_DB_CREATE, &db, msg, sizeof msg), PL_OK, "%s", msg);
    const int N = 300;
    int64_t run_a = 0, run_b = 0;
    cr_assert_eq(profile_db_run_create(db, "reinforce", "straight", &run_a), PL_OK);
    cr_assert_eq(profile_db_run_create(db, "reinforce", "killed", &run_b), PL_OK);
    profile_db_close(db);
    db = NULL;
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) child_train(path, run_b, N);
    int seen = -1;
    for (int tries = 0; tries < 20000 && seen < 10; tries++) {
        usleep(1000);
        seen = latest_update(path, run_b);
    }
    kill(pid, SIGKILL);
    int status = 0;
    waitpid(pid, &status, 0);
    cr_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "the child was killed, not finished");
    int at_kill = latest_update(path, run_b);
    cr_assert(at_kill >= 10 && at_kill < N - 1, "killed after update %d", at_kill);

    fixture f;
    fixture_init(&f, "default", "t4x4-pcie", 4, GROUPING_EAGLE, 4, SCHED_1F1B, 0, 1);
    cr_assert_eq(profile_db_open(path, PROFILE_DB_WRITE, &db, msg, sizeof msg), PL_OK, "%s", msg);
    void *blob = NULL;
    size_t n = 0;
    int upd = -1;
    cr_assert_eq(reinforce_load_checkpoint(db, run_b, &blob, &n, &upd, msg, sizeof msg), PL_OK);
    reinforce *b = NULL, *a = NULL;
    cr_assert_eq(reinforce_create_from_checkpoint(f.ev, blob, n, 0, &b, msg, sizeof msg), PL_OK, "%s", msg);
    free(blob);
    cr_assert_eq(reinforce_train(b, db, run_b, NULL, NULL, msg, sizeof msg), PL_OK, "%s", msg);
    reinforce_options o = grouped(N, GROUPER_EAGLE, ALGO_PPO);
    cr_assert_eq(reinforce_create(f.ev, &o, &a, msg, sizeof msg), PL_OK);
    cr_assert_eq(reinforce_train(a, db, run_a, NULL, NULL, msg, sizeof msg), PL_OK, "%s", msg);
    void *ba = NULL, *bb = NULL;
    size_t na = 0, nb = 0;
    cr_assert_eq(reinforce_serialize(a, &ba, &na), PL_OK);
    cr_assert_eq(reinforce_serialize(b, &bb, &nb), PL_OK);
    cr_assert_eq(na, nb);
    cr_assert(memcmp(ba, bb, na) == 0, "final states differ after a kill at update %d", at_kill);
    char *ta = NULL, *tb = NULL;
    int ca = 0, cb = 0;
    db_text(db, run_a, &ta, &ca);
    db_text(db, run_b, &tb, &cb);
    cr_assert_eq(ca, N * o.samples);
    cr_assert_eq(cb, N * o.samples, "no committed sample lost, none duplicated");
    cr_assert_str_eq(ta, tb);
    free(ta);
    free(tb);
    free(ba);
    free(bb);
    reinforce_destroy(a);
    reinforce_destroy(b);
    profile_db_close(db);
    unlink(path);
    char side[300];
    snprintf(side, sizeof side, "%s-wal", path);
    unlink(side);
    snprintf(side, sizeof side, "%s-shm", path);
    unlink(side);
    fixture_fini(&f);
}

typedef struct {
    char *buf;
    size_t n, cap;
    int count;
} text_acc;

static int collect(void *ctx, const profile_run_sample *s) {
    text_acc *t = ctx;
    char line[2048];
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

static void db_text(profile_db *db, int64_t run, char **out, int *count) {
    text_acc t = {0};
    cr_assert_eq(profile_db_run_samples(db, run, collect, &t), PL_OK);
    *out = t.buf;
    *count = t.count;
}
