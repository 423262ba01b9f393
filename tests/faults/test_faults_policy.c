/*
 * test_faults_policy.c: the placers with their n-th allocation failing, for
 * n = 0, 1, ... up to every allocation of the call: co-location grouping,
 * the evaluator, the network and its workspace, one REINFORCE update
 * (alone, and committed to a database with its samples and checkpoint), a
 * checkpoint round trip, the session train and search open, and every
 * search method on the tiny graph.
 *
 * Each failure must come back as PL_ERR_NOMEM with nothing leaked; a
 * REINFORCE update committed to a database is all there or not at all,
 * also when the failing allocation is one of SQLite's.
 * Evaluators run on one thread, so the allocation count is the same on
 * every run.
 */
#include <criterion/criterion.h>

#include "evaluator.h"
#include "fault_db.h"
#include "fault_sweep.h"
#include "grouping.h"
#include "placer_net.h"
#include "reinforce.h"
#include "search.h"
#include "session.h"

/* The problem: the tiny graph on the four-device T4 spec, colocated,
 * m = 2 with 1F1B, device memory as the cap. */
static fault_db F;
static grouping *GR;
static policy_problem PB;
static policy_evaluator *EV;

static void setup(void) {
    fault_db_init(&F, "policy.db");
    char msg[256] = "";
    cr_assert_eq(grouping_build(F.g, GROUPING_COLOCATE, &GR, msg, sizeof msg), PL_OK, "%s", msg);
    schedule s = schedule_make(2, SCHED_1F1B);
    cr_assert_eq(policy_problem_init(&PB, F.g, GR, F.p, &s, 0, NULL, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_eq(policy_evaluator_create(&PB, 1, &EV), PL_OK);
}

static void teardown(void) {
    policy_evaluator_destroy(EV);
    grouping_destroy(GR);
    fault_db_fini(&F);
}

/* ---- grouping, evaluator, network ----------------------------------------- */

static pl_status op_grouping(void *ctx) {
    (void)ctx;
    gpt_config c;
    gpt_config_parse("default", &c, NULL, 0);
    graph *g = NULL;
    grouping *a = NULL, *b = NULL;
    pl_status st = graph_build_gpt(&c, &g, NULL, 0);
    if (st == PL_OK) st = grouping_build(g, GROUPING_COLOCATE, &a, NULL, 0);
    if (st == PL_OK) st = grouping_build(g, GROUPING_NONE, &b, NULL, 0);
    grouping_destroy(b);
    grouping_destroy(a);
    graph_destroy(g);
    return st;
}

Test(faults_policy, grouping_fails_cleanly_at_every_allocation, .init = setup, .fini = teardown) {
    cr_assert_gt(fault_sweep("policy: graph + grouping (both modes)", op_grouping, NULL, NULL), 2);
}

static pl_status op_evaluator(void *ctx) {
    (void)ctx;
    policy_problem pb;
    schedule s = schedule_make(4, SCHED_GPIPE);
    pl_status st = policy_problem_init(&pb, F.g, GR, F.p, &s, 1 << 30, NULL, NULL, 0);
    if (st != PL_OK) return st;
    policy_evaluator *ev = NULL;
    st = policy_evaluator_create(&pb, 1, &ev);
    if (st == PL_OK) {
        int unit_dev[64] = {0};
        policy_eval e;
        st = policy_evaluate(ev, unit_dev, 1, &e);
    }
    policy_evaluator_destroy(ev);
    return st;
}

Test(faults_policy, evaluator_fails_cleanly_at_every_allocation, .init = setup, .fini = teardown) {
    cr_assert_gt(fault_sweep("policy: problem + evaluator + evaluate", op_evaluator, NULL, NULL), 0);
}

static pl_status op_network(void *ctx) {
    (void)ctx;
    placer_net_config cfg = placer_net_default_config(6, 4);
    placer_net *net = NULL;
    placer_acts *acts = NULL;
    adam_state *adam = NULL;
    pl_status st = placer_net_create(&cfg, 7, &net);
    if (st == PL_OK) st = placer_acts_create(net, 16, 8, &acts);
    if (st == PL_OK) st = adam_create(net->n_params, 1e-3, &adam);
    adam_destroy(adam);
    placer_acts_destroy(acts);
    placer_net_destroy(net);
    return st;
}

Test(faults_policy, network_workspace_and_adam_fail_cleanly_at_every_allocation, .init = setup, .fini = teardown) {
    cr_assert_gt(fault_sweep("policy: network + workspace + Adam", op_network, NULL, NULL), 2);
}

/* ---- REINFORCE ---------------------------------------------------------------- */

static reinforce_options small_options(void) {
    reinforce_options o;
    reinforce_options_default(&o);
    o.updates = 1;
    o.samples = 4;
    o.hidden = 8;
    o.seed = 3;
    return o;
}

/* One update in memory, then the shortlist and a checkpoint round trip. */
static pl_status op_reinforce(void *ctx) {
    (void)ctx;
    reinforce_options o = small_options();
    reinforce *r = NULL, *back = NULL;
    policy_cands *c = NULL;
    void *blob = NULL;
    size_t n = 0;
    pl_status st = reinforce_create(EV, &o, &r, NULL, 0);
    if (st == PL_OK) st = reinforce_train(r, NULL, 0, NULL, NULL, NULL, 0);
    if (st == PL_OK) st = policy_cands_create(F.g->n_nodes, GR->n_groups, &c);
    if (st == PL_OK) st = reinforce_shortlist(r, c);
    if (st == PL_OK) st = reinforce_serialize(r, &blob, &n);
    if (st == PL_OK) st = reinforce_create_from_checkpoint(EV, blob, n, 2, &back, NULL, 0);
    free(blob);
    reinforce_destroy(back);
    policy_cands_destroy(c);
    reinforce_destroy(r);
    return st;
}

Test(faults_policy, one_reinforce_update_and_checkpoint_fail_cleanly_at_every_allocation, .init = setup,
     .fini = teardown) {
    cr_assert_gt(fault_sweep("policy: REINFORCE update + shortlist + checkpoint", op_reinforce, NULL, NULL), 5);
}

/* The same with a learned grouping: EAGLE's grouper and link, two PPO
 * epochs, on the nodes as units (its own grouping and evaluator). */
static pl_status op_eagle_ppo(void *ctx) {
    (void)ctx;
    reinforce_options o = small_options();
    o.grouper = GROUPER_EAGLE;
    o.algo = ALGO_PPO;
    o.ppo_epochs = 2;
    o.n_groups = 3;
    o.grouper_hidden = 4;
    o.link_hidden = 3;
    grouping *gr = NULL;
    policy_problem pb;
    policy_evaluator *ev = NULL;
    reinforce *r = NULL, *back = NULL;
    policy_cands *c = NULL;
    void *blob = NULL;
    size_t n = 0;
    schedule s = schedule_make(2, SCHED_1F1B);
    pl_status st = grouping_build(F.g, GROUPING_EAGLE, &gr, NULL, 0);
    if (st == PL_OK) st = policy_problem_init(&pb, F.g, gr, F.p, &s, 0, NULL, NULL, 0);
    if (st == PL_OK) st = policy_evaluator_create(&pb, 1, &ev);
    if (st == PL_OK) st = reinforce_create(ev, &o, &r, NULL, 0);
    if (st == PL_OK) st = reinforce_train(r, NULL, 0, NULL, NULL, NULL, 0);
    if (st == PL_OK) st = policy_cands_create(F.g->n_nodes, gr->n_groups, &c);
    if (st == PL_OK) st = reinforce_shortlist(r, c);
    if (st == PL_OK) st = reinforce_serialize(r, &blob, &n);
    if (st == PL_OK) st = reinforce_create_from_checkpoint(ev, blob, n, 2, &back, NULL, 0);
    free(blob);
    reinforce_destroy(back);
    policy_cands_destroy(c);
    reinforce_destroy(r);
    policy_evaluator_destroy(ev);
    grouping_destroy(gr);
    return st;
}

Test(faults_policy, one_eagle_ppo_update_and_checkpoint_fail_cleanly_at_every_allocation, .init = setup,
     .fini = teardown) {
    cr_assert_gt(fault_sweep("policy: EAGLE + PPO update + shortlist + checkpoint", op_eagle_ppo, NULL, NULL), 10);
}

/* One update committed to the database under a new run. */
static pl_status op_reinforce_db(void *ctx) {
    (void)ctx;
    reinforce_options o = small_options();
    profile_db *db = NULL;
    reinforce *r = NULL;
    pl_status st = profile_db_open(F.path, PROFILE_DB_WRITE, &db, NULL, 0);
    int64_t run = 0;
    if (st == PL_OK) st = profile_db_run_create(db, "reinforce", "--updates 1", &run);
    if (st == PL_OK) st = reinforce_create(EV, &o, &r, NULL, 0);
    if (st == PL_OK) st = reinforce_train(r, db, run, NULL, NULL, NULL, 0);
    reinforce_destroy(r);
    profile_db_close(db);
    return st;
}

static void check_update_whole(void *ctx, long n, pl_status st) {
    (void)ctx, (void)st;
    fault_db_assert_intact(F.path, n);
    long long bad = fault_db_query(
        F.path, "SELECT count(*) FROM run r WHERE NOT ("
                "((SELECT count(*) FROM run_sample s WHERE s.run_id = r.id) = 4 AND "
                " (SELECT count(*) FROM checkpoint c WHERE c.run_id = r.id) = 1) OR "
                "((SELECT count(*) FROM run_sample s WHERE s.run_id = r.id) = 0 AND "
                " (SELECT count(*) FROM checkpoint c WHERE c.run_id = r.id) = 0))");
    cr_assert_eq(bad, 0, "a run holds half an update after failing allocation %ld", n);
    long long ok = fault_db_query(F.path, "SELECT count(*) FROM checkpoint");
    if (n < 0) cr_assert_geq(ok, 1, "the clean run committed its update");
}

Test(faults_policy, reinforce_update_committed_to_a_database_is_whole_or_absent, .init = setup, .fini = teardown) {
    fault_db_save(&F);
    cr_assert_gt(fault_sweep("policy: REINFORCE update into the store", op_reinforce_db, check_update_whole, NULL), 5);
}

/* The same with SQLite's allocations failing too (inside a prepare, a step
 * or the commit): the store then reports PL_ERR_DB, or SQLite absorbs the
 * failure; the update is still whole or absent. */
static void setup_sqlite(void) {
    cr_assert_eq(failalloc_hook_sqlite(), 0);
    setup();
}

Test(faults_policy, reinforce_update_committed_to_a_database_is_whole_or_absent_when_sqlite_fails,
     .init = setup_sqlite, .fini = teardown) {
    fault_db_save(&F);
    cr_assert_gt(fault_sweep_ex("policy: REINFORCE update into the store (+SQLite)", op_reinforce_db,
                                check_update_whole, NULL, 1),
                 100);
}

/* The session `placer train` and `placer search` open: the store, the
 * graph, grouping, caps, simulator parameters, the evaluator. */
static pl_status op_session(void *ctx) {
    (void)ctx;
    policy_session_options so;
    policy_session_options_default(&so);
    so.db_path = F.path;
    so.threads = 1;
    so.mem_cap = "50%";
    so.devices = 2;
    policy_session *ss = NULL;
    pl_status st = policy_session_open(&so, &ss, NULL, 0);
    policy_session_close(ss);
    return st;
}

Test(faults_policy, session_open_fails_cleanly_at_every_allocation, .init = setup, .fini = teardown) {
    fault_db_save(&F);
    cr_assert_gt(fault_sweep("policy: session open (store, grouping, evaluator)", op_session, NULL, NULL), 5);
}

/* ---- each search method ------------------------------------------------------- */

typedef enum { M_SINGLE, M_HUMAN, M_DP, M_RANDOM, M_ANNEAL, M_LOCAL, M_EXHAUSTIVE } method;

static pl_status op_search(void *ctx) {
    method m = *(method *)ctx;
    policy_cands *c = NULL;
    pl_status st = policy_cands_create(F.g->n_nodes, GR->n_groups, &c);
    if (st != PL_OK) return st;
    double curve[60];
    search_budget b = {60, 8, 5, curve};
    search_exhaustive_info xi;
    switch (m) {
    case M_SINGLE: st = search_single(EV, c); break;
    case M_HUMAN: st = search_human(EV, c); break;
    case M_DP: st = search_dp(EV, c, NULL); break;
    case M_RANDOM: st = search_random(EV, &b, c); break;
    case M_ANNEAL: st = search_anneal(EV, &b, c); break;
    case M_LOCAL: st = search_local(EV, &b, c); break;
    case M_EXHAUSTIVE: st = search_exhaustive(EV, 1e5, c, &xi, NULL, 0); break;
    }
    if (st == PL_OK && c->n < 1) st = PL_ERR_INVALID; /* every method adds its best */
    policy_cands_destroy(c);
    return st;
}

#define SEARCH_TEST(M, NAME)                                                                         \
    Test(faults_policy, search_##NAME##_fails_cleanly_at_every_allocation, .init = setup, .fini = teardown) { \
        method m = M;                                                                                \
        cr_assert_gt(fault_sweep("policy: search " #NAME, op_search, NULL, &m), 0);                 \
    }

SEARCH_TEST(M_SINGLE, single)
SEARCH_TEST(M_HUMAN, human)
SEARCH_TEST(M_DP, dp)
SEARCH_TEST(M_RANDOM, random)
SEARCH_TEST(M_ANNEAL, anneal)
SEARCH_TEST(M_LOCAL, local)
SEARCH_TEST(M_EXHAUSTIVE, exhaustive)
