/*
 * test_transfer.c: carrying placements and policies between machines
 * (policy/transfer.h): the two device maps (rank order and speed rank) on
 * hand-made speeds and on a machine listed in two device orders, the
 * policy relabelling (placer_net_permute_devices) as an exact symmetry,
 * the fine-tune start (reinforce_create_transferred), a run's shortlist
 * read from another database, its stored arguments, and the two measures.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "placement.h"
#include "placer_net.h"
#include "policy_fixture.h"
#include "reinforce.h"
#include "store.h"
#include "transfer.h"

/* p with its devices relabelled (transfer_profile_relabel). */
static profile_data *permuted_profile(const profile_data *p, const int *perm) {
    profile_data *q = NULL;
    cr_assert_eq(transfer_profile_relabel(p, perm, &q), PL_OK);
    return q;
}

Test(transfer, rank_order_keeps_indices_compacts_unused_devices_and_merges_neighbours) {
    int map[8];
    char msg[256];
    /* every device used, equal counts: the identity */
    cr_assert_eq(transfer_device_map(TRANSFER_MAP_RANK, 4, NULL, NULL, 4, NULL, map, msg, sizeof msg), PL_OK);
    for (int d = 0; d < 4; d++) cr_assert_eq(map[d], d);
    /* a placement on devices 1 and 3 of 4 goes to the target's first two */
    const int used13[4] = {0, 1, 0, 1};
    cr_assert_eq(transfer_device_map(TRANSFER_MAP_RANK, 4, NULL, used13, 2, NULL, map, msg, sizeof msg), PL_OK);
    cr_assert_eq(map[0], -1);
    cr_assert_eq(map[1], 0);
    cr_assert_eq(map[2], -1);
    cr_assert_eq(map[3], 1);
    /* four used devices onto two: neighbours merge, the order is kept */
    cr_assert_eq(transfer_device_map(TRANSFER_MAP_RANK, 4, NULL, NULL, 2, NULL, map, msg, sizeof msg), PL_OK);
    const int want[4] = {0, 0, 1, 1};
    for (int d = 0; d < 4; d++) cr_assert_eq(map[d], want[d]);
    /* two onto four: the first two */
    cr_assert_eq(transfer_device_map(TRANSFER_MAP_RANK, 2, NULL, NULL, 4, NULL, map, msg, sizeof msg), PL_OK);
    cr_assert_eq(map[0], 0);
    cr_assert_eq(map[1], 1);
}

Test(transfer, speed_rank_pairs_the_fastest_with_the_fastest) {
    int map[8];
    char msg[256];
    /* source: devices 2 and 3 are the fast ones; target: listed fastest first */
    const double s_speed[4] = {1, 1, 3, 3}, t_speed[4] = {5, 5, 2, 2};
    cr_assert_eq(transfer_device_map(TRANSFER_MAP_SPEED, 4, s_speed, NULL, 4, t_speed, map, msg, sizeof msg), PL_OK);
    const int want[4] = {2, 3, 0, 1};
    for (int d = 0; d < 4; d++) cr_assert_eq(map[d], want[d], "device %d -> %d", d, map[d]);
    /* the same by rank order is the identity: the two rules differ here */
    cr_assert_eq(transfer_device_map(TRANSFER_MAP_RANK, 4, s_speed, NULL, 4, t_speed, map, msg, sizeof msg), PL_OK);
    for (int d = 0; d < 4; d++) cr_assert_eq(map[d], d);
    /* a placement on the two fast source devices goes to the two fast
     * target devices; onto a target of one device, both merge into it */
    const int used23[4] = {0, 0, 1, 1};
    const double t_rev[4] = {2, 2, 5, 5};
    cr_assert_eq(transfer_device_map(TRANSFER_MAP_SPEED, 4, s_speed, used23, 4, t_rev, map, msg, sizeof msg), PL_OK);
    cr_assert_eq(map[2], 2);
    cr_assert_eq(map[3], 3);
    cr_assert_eq(map[0], -1);
    /* devices within 2% of each other keep index order (no swap on noise) */
    const double noisy[2] = {1.00, 1.01}, eq[2] = {1, 1};
    cr_assert_eq(transfer_device_map(TRANSFER_MAP_SPEED, 2, noisy, NULL, 2, eq, map, msg, sizeof msg), PL_OK);
    cr_assert_eq(map[0], 0);
    cr_assert_eq(map[1], 1);
    const double apart[2] = {1.00, 1.05};
    cr_assert_eq(transfer_device_map(TRANSFER_MAP_SPEED, 2, apart, NULL, 2, eq, map, msg, sizeof msg), PL_OK);
    cr_assert_eq(map[0], 1);
    cr_assert_eq(map[1], 0);
}

Test(transfer, device_maps_refuse_what_cannot_be_mapped) {
    int map[80];
    char msg[256] = "";
    const int none[2] = {0, 0};
    cr_assert_eq(transfer_device_map(TRANSFER_MAP_RANK, 0, NULL, NULL, 2, NULL, map, msg, sizeof msg), PL_ERR_INVALID);
    cr_assert(strstr(msg, "cannot map 0 devices to 2") != NULL, "%s", msg);
    cr_assert_eq(transfer_device_map(TRANSFER_MAP_RANK, 2, NULL, NULL, 65, NULL, map, msg, sizeof msg), PL_ERR_INVALID);
    cr_assert_eq(transfer_device_map(TRANSFER_MAP_RANK, 2, NULL, none, 2, NULL, map, msg, sizeof msg), PL_ERR_INVALID);
    cr_assert(strstr(msg, "uses no device") != NULL, "%s", msg);
    const double bad[2] = {1, NAN}, ok[2] = {1, 1};
    cr_assert_eq(transfer_device_map(TRANSFER_MAP_SPEED, 2, bad, NULL, 2, ok, map, msg, sizeof msg), PL_ERR_INVALID);
    cr_assert(strstr(msg, "map by rank instead") != NULL, "%s", msg);
    transfer_map m;
    cr_assert_eq(transfer_parse_map("speed", &m, msg, sizeof msg), PL_OK);
    cr_assert_eq(m, TRANSFER_MAP_SPEED);
    cr_assert_eq(transfer_parse_map("rank", &m, msg, sizeof msg), PL_OK);
    cr_assert_eq(m, TRANSFER_MAP_RANK);
    cr_assert_eq(transfer_parse_map("index", &m, msg, sizeof msg), PL_ERR_INVALID);
    cr_assert(strstr(msg, "use speed or rank") != NULL, "%s", msg);
}

/* The mixed machine (2 x H200 + 2 x L40S) and the same machine listed slow
 * devices first: a placement on the H200s keeps its step time through the
 * speed map and loses it through the rank map. */
Test(transfer, speed_map_follows_the_fast_devices_when_a_machine_lists_them_last) {
    fixture a, b;
    fixture_init(&a, "default", "h200x2-l40sx2", 0, GROUPING_COLOCATE, 1, SCHED_GPIPE, 0, 1);
    const int perm[4] = {2, 3, 0, 1}; /* H200s become 2, 3 */
    graph *g = fixture_graph("default");
    fixture_init_with(&b, g, permuted_profile(a.p, perm), GROUPING_COLOCATE, 1, SCHED_GPIPE, 0, 1);
    const int N = a.g->n_nodes;
    int *src = calloc((size_t)N, sizeof *src), *dst = calloc((size_t)N, sizeof *dst);
    for (int i = 0; i < N; i++) src[i] = i < N / 2 ? 0 : 1; /* a split over the two H200s */
    policy_eval e_src, e_speed, e_rank;
    cr_assert_eq(policy_evaluate_nodes(a.ev, src, 1, &e_src), PL_OK);
    int map[4];
    char msg[256];
    cr_assert_eq(transfer_map_placement(TRANSFER_MAP_SPEED, &a.pb, &b.pb, src, dst, map, msg, sizeof msg), PL_OK);
    cr_assert_eq(map[0], 2);
    cr_assert_eq(map[1], 3);
    cr_assert_eq(map[2], -1);
    for (int i = 0; i < N; i++) cr_assert_eq(dst[i], src[i] + 2);
    cr_assert_eq(policy_evaluate_nodes(b.ev, dst, 1, &e_speed), PL_OK);
    cr_assert_float_eq(e_speed.step_us, e_src.step_us, 1e-9 * e_src.step_us);
    cr_assert_eq(transfer_map_placement(TRANSFER_MAP_RANK, &a.pb, &b.pb, src, dst, map, msg, sizeof msg), PL_OK);
    cr_assert_eq(map[0], 0);
    cr_assert_eq(map[1], 1);
    cr_assert_eq(policy_evaluate_nodes(b.ev, dst, 1, &e_rank), PL_OK);
    cr_assert_gt(e_rank.step_us, 1.2 * e_src.step_us, "on the L40S pair: %.1f us against %.1f", e_rank.step_us,
                 e_src.step_us);
    /* a policy map between the two listings: the H200s pair with the H200s */
    int pm[4];
    cr_assert_eq(transfer_policy_map(TRANSFER_MAP_SPEED, &a.pb, &b.pb, NULL, pm, msg, sizeof msg), PL_OK);
    for (int d = 0; d < 4; d++) cr_assert_eq(pm[d], perm[d]);
    /* the relabelled profile is the same machine: a relabelling that is
     * not a permutation is refused */
    profile_data *q = NULL;
    const int bad[4] = {0, 0, 1, 2};
    cr_assert_eq(transfer_profile_relabel(a.p, bad, &q), PL_ERR_INVALID);
    cr_assert_null(q);
    free(src);
    free(dst);
    fixture_fini(&a);
    fixture_fini(&b);
}

/* A policy trained on identical devices labels them arbitrarily: the ones
 * its best placement uses go to the target's fastest. */
Test(transfer, a_policy_map_sends_the_devices_a_policy_uses_to_the_fastest) {
    fixture t4, mixed;
    fixture_init(&t4, "default", "t4x4-pcie", 0, GROUPING_COLOCATE, 1, SCHED_GPIPE, 0, 1);
    fixture_init(&mixed, "default", "h200x2-l40sx2", 0, GROUPING_COLOCATE, 1, SCHED_GPIPE, 0, 1);
    int pm[4];
    char msg[256];
    const double use[4] = {0, 0, 12, 28}; /* the policy placed on T4s 2 and 3 */
    cr_assert_eq(transfer_policy_map(TRANSFER_MAP_SPEED, &t4.pb, &mixed.pb, use, pm, msg, sizeof msg), PL_OK);
    const int want[4] = {2, 3, 1, 0}; /* 3 (most used) -> H200 0, 2 -> H200 1, then 0, 1 -> the L40S */
    for (int d = 0; d < 4; d++) cr_assert_eq(pm[d], want[d], "device %d -> %d", d, pm[d]);
    cr_assert_eq(transfer_policy_map(TRANSFER_MAP_SPEED, &t4.pb, &mixed.pb, NULL, pm, msg, sizeof msg), PL_OK);
    for (int d = 0; d < 4; d++) cr_assert_eq(pm[d], d);
    /* rank order ignores use */
    cr_assert_eq(transfer_policy_map(TRANSFER_MAP_RANK, &t4.pb, &mixed.pb, use, pm, msg, sizeof msg), PL_OK);
    for (int d = 0; d < 4; d++) cr_assert_eq(pm[d], d);
    fixture_fini(&t4);
    fixture_fini(&mixed);
}

Test(transfer, placements_and_policies_between_unequal_device_counts) {
    fixture four, two;
    fixture_init(&four, "default", "t4x4-pcie", 0, GROUPING_COLOCATE, 4, SCHED_1F1B, 0, 1);
    fixture_init(&two, "default", "h200x2-nvlink", 0, GROUPING_COLOCATE, 4, SCHED_1F1B, 0, 1);
    const int N = four.g->n_nodes;
    int *src = calloc((size_t)N, sizeof *src), *dst = calloc((size_t)N, sizeof *dst);
    for (int i = 0; i < N; i++) src[i] = i * 4 / N; /* four stages */
    char msg[256];
    cr_assert_eq(transfer_map_placement(TRANSFER_MAP_SPEED, &four.pb, &two.pb, src, dst, NULL, msg, sizeof msg),
                 PL_OK);
    for (int i = 0; i < N; i++) cr_assert_eq(dst[i], src[i] / 2, "node %d", i);
    cr_assert_eq(placement_validate(dst, N, 2, NULL, 0), PL_OK);
    int pm[4];
    cr_assert_eq(transfer_policy_map(TRANSFER_MAP_SPEED, &four.pb, &two.pb, NULL, pm, msg, sizeof msg), PL_ERR_INVALID);
    cr_assert(strstr(msg, "4 devices and this one 2") != NULL, "%s", msg);
    cr_assert(strstr(msg, "equal device counts") != NULL, "%s", msg);
    /* another graph: refused */
    fixture big;
    fixture_init(&big, "gpt12", "t4x4-pcie", 0, GROUPING_COLOCATE, 4, SCHED_1F1B, 0, 1);
    cr_assert_eq(transfer_map_placement(TRANSFER_MAP_SPEED, &four.pb, &big.pb, src, dst, NULL, msg, sizeof msg),
                 PL_ERR_INVALID);
    cr_assert(strstr(msg, "same graph") != NULL, "%s", msg);
    free(src);
    free(dst);
    fixture_fini(&four);
    fixture_fini(&two);
    fixture_fini(&big);
}

/* Relabelling the network's devices relabels its decisions and nothing
 * else: greedy decodes map through perm and every probability moves with
 * its device. */
Test(transfer, a_relabelled_policy_gives_the_relabelled_placement) {
    const int T = 9, F = 5, D = 4;
    placer_net_config cfg = placer_net_default_config(F, D);
    cfg.stay = 0;
    placer_net *net = NULL;
    cr_assert_eq(placer_net_create(&cfg, 7, &net), PL_OK);
    /* make every weight matter (the initial output layer is small) */
    pl_rng rng;
    pl_rng_seed(&rng, 3);
    for (size_t i = 0; i < net->n_params; i++) net->params[i] += 2.0 * (pl_rng_uniform(&rng) - 0.5);
    double feat[9 * 5];
    for (int i = 0; i < T * F; i++) feat[i] = sin(1.7 * i);
    placer_acts *acts = NULL;
    cr_assert_eq(placer_acts_create(net, T, 1, &acts), PL_OK);
    int a[9], b[9];
    double pa[9 * 4];
    cr_assert_eq(placer_net_forward(net, acts, feat, T, 1, PN_GREEDY, NULL, a, NULL), PL_OK);
    for (int t = 0; t < T; t++) memcpy(pa + t * D, placer_acts_probs(acts, t), sizeof(double) * D);
    int used = 0;
    for (int t = 0; t < T; t++) used |= 1 << a[t];
    cr_assert_gt(__builtin_popcount((unsigned)used), 1, "the decode should use several devices");
    const int perm[4] = {2, 0, 3, 1};
    cr_assert_eq(placer_net_permute_devices(net, perm), PL_OK);
    cr_assert_eq(placer_net_forward(net, acts, feat, T, 1, PN_GREEDY, NULL, b, NULL), PL_OK);
    for (int t = 0; t < T; t++) {
        cr_assert_eq(b[t], perm[a[t]], "unit %d: %d, want %d", t, b[t], perm[a[t]]);
        const double *pb = placer_acts_probs(acts, t);
        for (int d = 0; d < D; d++) cr_assert_float_eq(pb[perm[d]], pa[t * D + d], 1e-12);
    }
    const int bad[4] = {0, 0, 1, 2};
    double before = net->params[0];
    cr_assert_eq(placer_net_permute_devices(net, bad), PL_ERR_INVALID);
    cr_assert_eq(net->params[0], before);
    placer_acts_destroy(acts);
    placer_net_destroy(net);
}

static reinforce *trained(fixture *f, int updates, void **blob, size_t *n) {
    reinforce_options o;
    reinforce_options_default(&o);
    o.updates = updates;
    reinforce *r = NULL;
    char msg[256];
    cr_assert_eq(reinforce_create(f->ev, &o, &r, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_eq(reinforce_train(r, NULL, 0, NULL, NULL, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_eq(reinforce_serialize(r, blob, n), PL_OK);
    return r;
}

Test(transfer, a_transferred_trainer_keeps_the_network_and_starts_its_training_afresh) {
    fixture s, t, two;
    fixture_init(&s, "default", "t4x4-pcie", 0, GROUPING_COLOCATE, 4, SCHED_1F1B, 0, 1);
    fixture_init(&t, "default", "h200x4-nvlink", 0, GROUPING_COLOCATE, 4, SCHED_1F1B, 0, 1);
    fixture_init(&two, "default", "h200x2-nvlink", 0, GROUPING_COLOCATE, 4, SCHED_1F1B, 0, 1);
    void *blob = NULL;
    size_t n = 0;
    reinforce *src = trained(&s, 20, &blob, &n);
    const int U = s.gr->n_groups;
    int *fav_s = calloc((size_t)U, sizeof *fav_s), *fav_t = calloc((size_t)U, sizeof *fav_t);
    policy_eval e;
    cr_assert_eq(reinforce_favourite(src, fav_s, &e), PL_OK);
    char msg[256];
    reinforce *r = NULL;
    const int ident[4] = {0, 1, 2, 3};
    cr_assert_eq(reinforce_create_transferred(t.ev, blob, n, ident, 5, &r, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_eq(reinforce_updates_done(r), 0);
    cr_assert(isinf(reinforce_best_cost(r)), "the source's best-so-far list is dropped");
    cr_assert_eq(reinforce_get_options(r)->updates, 5);
    cr_assert_eq(reinforce_favourite(r, fav_t, &e), PL_OK);
    for (int u = 0; u < U; u++) cr_assert_eq(fav_t[u], fav_s[u], "the network came across: unit %d", u);
    cr_assert_eq(reinforce_train(r, NULL, 0, NULL, NULL, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_eq(reinforce_updates_done(r), 5);
    cr_assert_lt(reinforce_best_cost(r), 1e6, "a best on the target, in the target's time");
    reinforce_destroy(r);
    /* relabelled: the favourite moves with the map */
    const int swap[4] = {1, 0, 3, 2};
    cr_assert_eq(reinforce_create_transferred(t.ev, blob, n, swap, 5, &r, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_eq(reinforce_favourite(r, fav_t, &e), PL_OK);
    for (int u = 0; u < U; u++) cr_assert_eq(fav_t[u], swap[fav_s[u]]);
    reinforce_destroy(r);
    /* another device count, or a map that is not a permutation: refused */
    cr_assert_eq(reinforce_create_transferred(two.ev, blob, n, NULL, 5, &r, msg, sizeof msg), PL_ERR_INVALID);
    cr_assert(strstr(msg, "on 4 devices") != NULL, "%s", msg);
    const int bad[4] = {0, 1, 1, 2};
    cr_assert_eq(reinforce_create_transferred(t.ev, blob, n, bad, 5, &r, msg, sizeof msg), PL_ERR_INVALID);
    cr_assert(strstr(msg, "not a permutation") != NULL, "%s", msg);
    free(fav_s);
    free(fav_t);
    free(blob);
    reinforce_destroy(src);
    fixture_fini(&s);
    fixture_fini(&t);
    fixture_fini(&two);
}

static profile_db *temp_db(char *path, size_t len) {
    snprintf(path, len, "/tmp/placer-test-transfer-XXXXXX");
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    close(fd);
    unlink(path);
    profile_db *db = NULL;
    char msg[256];
    cr_assert_eq(profile_db_open(path, PROFILE_DB_CREATE, &db, msg, sizeof msg), PL_OK, "%s", msg);
    return db;
}

static void drop(const char *path) {
    char b[512];
    unlink(path);
    snprintf(b, sizeof b, "%s-wal", path);
    unlink(b);
    snprintf(b, sizeof b, "%s-shm", path);
    unlink(b);
}

/* The shortlist read back from a run equals the trainer's own top list. */
Test(transfer, a_runs_shortlist_from_its_samples_is_the_trainers_top_list) {
    fixture f;
    fixture_init(&f, "default", "t4x4-pcie", 0, GROUPING_COLOCATE, 4, SCHED_1F1B, 0, 1);
    char path[256];
    profile_db *db = temp_db(path, sizeof path);
    int64_t run = 0;
    cr_assert_eq(profile_db_run_create(db, "reinforce", "--config default --micro-batches 4", &run), PL_OK);
    reinforce_options o;
    reinforce_options_default(&o);
    o.updates = 15;
    reinforce *r = NULL;
    char msg[256];
    cr_assert_eq(reinforce_create(f.ev, &o, &r, msg, sizeof msg), PL_OK);
    cr_assert_eq(reinforce_train(r, db, run, NULL, NULL, msg, sizeof msg), PL_OK, "%s", msg);
    policy_cands *l = NULL;
    cr_assert_eq(policy_cands_create(f.g->n_nodes, f.gr->n_groups, &l), PL_OK);
    cr_assert_eq(reinforce_shortlist(r, l), PL_OK);
    transfer_shortlist s;
    cr_assert_eq(transfer_run_shortlist(db, run, &f.pb, 5, &s, msg, sizeof msg), PL_OK, "%s", msg);
    int k = 0;
    for (int i = 0; i < l->n; i++) {
        if (!strcmp(l->items[i].label, "rl favourite")) continue;
        cr_assert_lt(k, s.n);
        cr_assert_arr_eq(s.node_dev + (size_t)k * s.n_nodes, l->items[i].node_dev, sizeof(int) * (size_t)s.n_nodes,
                         "placement %d", k);
        cr_assert_float_eq(s.step_us[k], l->items[i].ev.step_us, 1e-9);
        k++;
    }
    cr_assert_eq(k, s.n);
    transfer_shortlist_free(&s);
    /* a missing run */
    cr_assert_eq(transfer_run_shortlist(db, run + 7, &f.pb, 5, &s, msg, sizeof msg), PL_ERR_NOT_FOUND);
    cr_assert(strstr(msg, "is not in the database") != NULL, "%s", msg);
    policy_cands_destroy(l);
    reinforce_destroy(r);
    profile_db_close(db);
    drop(path);
    fixture_fini(&f);
}

Test(transfer, a_shortlist_keeps_one_of_each_relabelling_and_puts_ooms_last) {
    fixture f;
    fixture_init(&f, "tiny", "t4x4-pcie", 2, GROUPING_NONE, 1, SCHED_GPIPE, 0, 1);
    const int N = f.g->n_nodes;
    char path[256], msg[256];
    profile_db *db = temp_db(path, sizeof path);
    int64_t run = 0;
    cr_assert_eq(profile_db_run_create(db, "reinforce", "--config tiny", &run), PL_OK);
    char *a = calloc((size_t)N * 2 + 1, 1), *b = calloc((size_t)N * 2 + 1, 1), *c = calloc((size_t)N * 2 + 1, 1);
    for (int i = 0; i < N; i++) {
        a[2 * i] = i < N / 2 ? '0' : '1'; /* split */
        b[2 * i] = i < N / 2 ? '1' : '0'; /* the same split, devices swapped */
        c[2 * i] = '0';
        a[2 * i + 1] = b[2 * i + 1] = c[2 * i + 1] = ',';
    }
    a[2 * N - 1] = b[2 * N - 1] = c[2 * N - 1] = 0;
    cr_assert_eq(profile_db_run_add_sample(db, run, 0, 0, c, 50.0, 10, 1), PL_OK); /* OOM, fastest */
    cr_assert_eq(profile_db_run_add_sample(db, run, 0, 1, b, 90.0, 10, 0), PL_OK);
    cr_assert_eq(profile_db_run_add_sample(db, run, 1, 0, a, 90.0, 10, 0), PL_OK); /* b relabelled: dropped */
    cr_assert_eq(profile_db_run_add_sample(db, run, 1, 1, "junk", 1.0, 10, 0), PL_OK); /* skipped */
    transfer_shortlist s;
    cr_assert_eq(transfer_run_shortlist(db, run, &f.pb, 5, &s, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_eq(s.n, 2);
    cr_assert_eq(s.node_dev[0], 1, "the first of the two relabellings stays");
    cr_assert_eq(s.oom[0], 0);
    cr_assert_eq(s.oom[1], 1, "an out-of-memory sample costs the penalty");
    transfer_shortlist_free(&s);
    cr_assert_eq(transfer_run_shortlist(db, run, &f.pb, 1, &s, msg, sizeof msg), PL_OK);
    cr_assert_eq(s.n, 1);
    transfer_shortlist_free(&s);
    free(a);
    free(b);
    free(c);
    profile_db_close(db);
    drop(path);
    fixture_fini(&f);
}

Test(transfer, a_runs_stored_arguments_give_its_problem) {
    transfer_run_args ra;
    char msg[256];
    const char *args = "--config default,vocab=50257,d_model=384,heads=6,layers=6,seq=256,batch=16 --groups eagle "
                       "--micro-batches 4 --schedule 1f1b --mem-cap 1851840896 --devices 2 --updates 250 "
                       "--samples 8 --pipe-anneal --lr 0.003 --uncalibrated";
    cr_assert_eq(transfer_parse_run_args(args, &ra, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_str_eq(ra.config, "default,vocab=50257,d_model=384,heads=6,layers=6,seq=256,batch=16");
    cr_assert_eq(ra.groups, GROUPING_EAGLE);
    cr_assert_eq(ra.micro_batches, 4);
    cr_assert_eq(ra.order, SCHED_1F1B);
    cr_assert_str_eq(ra.mem_cap, "1851840896");
    cr_assert_eq(ra.devices, 2);
    cr_assert_eq(ra.updates, 250);
    cr_assert_eq(ra.calibrated, 0);
    cr_assert_eq(transfer_parse_run_args("--config default", &ra, msg, sizeof msg), PL_OK);
    cr_assert_eq(ra.groups, GROUPING_COLOCATE);
    cr_assert_eq(ra.micro_batches, 1);
    cr_assert_eq(ra.calibrated, 1);
    static const char *const bad[] = {"", "--groups colocate", "--config default --schedule zz",
                                      "--config default --micro-batches x", "--config default --devices 0",
                                      "--config", "stray --config default"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        cr_assert_eq(transfer_parse_run_args(bad[i], &ra, msg, sizeof msg), PL_ERR_INVALID, "'%s'", bad[i]);
}

Test(transfer, a_run_read_from_a_database_is_checked) {
    char path[256], msg[256];
    profile_db *db = temp_db(path, sizeof path);
    int64_t r1 = 0, r2 = 0;
    cr_assert_eq(profile_db_run_create(db, "reinforce", "--config tiny --micro-batches 2", &r1), PL_OK);
    cr_assert_eq(profile_db_run_create(db, "calibrate", "--count 3", &r2), PL_OK);
    transfer_run_args ra;
    cr_assert_eq(transfer_read_run(db, r1, &ra, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_str_eq(ra.config, "tiny");
    cr_assert_eq(ra.micro_batches, 2);
    cr_assert_eq(transfer_read_run(db, r2, &ra, msg, sizeof msg), PL_ERR_INVALID);
    cr_assert(strstr(msg, "not a placer training run") != NULL, "%s", msg);
    cr_assert_eq(transfer_read_run(db, 99, &ra, msg, sizeof msg), PL_ERR_NOT_FOUND);
    cr_assert(strstr(msg, "run 99 is not in the database") != NULL, "%s", msg);
    profile_db_close(db);
    drop(path);
}

Test(transfer, gain_retained_and_na_within_half_a_percent) {
    /* baseline 100, best 80: a placement at 90 keeps half the gain */
    cr_assert_float_eq(transfer_gain_retained(100, 90, 80), 0.5, 1e-12);
    cr_assert_float_eq(transfer_gain_retained(100, 80, 80), 1.0, 1e-12);
    cr_assert_float_eq(transfer_gain_retained(100, 100, 80), 0.0, 1e-12);
    cr_assert_float_eq(transfer_gain_retained(100, 120, 80), -1.0, 1e-12);
    cr_assert_float_eq(transfer_gain_retained(100, 70, 80), 1.5, 1e-12);
    /* the best within 0.5% of the baseline: nothing to retain */
    cr_assert(isnan(transfer_gain_retained(100, 90, 99.5)));
    cr_assert(isnan(transfer_gain_retained(100, 90, 101)));
    cr_assert(!isnan(transfer_gain_retained(100, 90, 99.4)));
    cr_assert(isnan(transfer_gain_retained(100, INFINITY, 80)));
}

Test(transfer, updates_saved_compares_when_each_curve_reaches_what_scratch_reaches) {
    int uf, us;
    /* from scratch: 7 after the 4th of 5 updates; the fine-tune gets there at the 2nd */
    const double scratch[5] = {12, 10, 9, 7, 7}, good[5] = {9, 7, 6, 6, 6};
    cr_assert_float_eq(transfer_updates_saved(good, 5, scratch, 5, &uf, &us), (4.0 - 2.0) / 4.0, 1e-12);
    cr_assert_eq(uf, 2);
    cr_assert_eq(us, 4);
    /* a fine-tune that gets there later: the fraction of its updates lost */
    const double late[5] = {20, 15, 11, 8, 7};
    cr_assert_float_eq(transfer_updates_saved(late, 5, scratch, 5, &uf, &us), (4.0 - 5.0) / 5.0, 1e-12);
    /* never: a bound, flagged by u_ft = -1 */
    const double never[5] = {20, 15, 11, 8, 8};
    cr_assert_float_eq(transfer_updates_saved(never, 5, scratch, 5, &uf, &us), (4.0 - 6.0) / 6.0, 1e-12);
    cr_assert_eq(uf, -1);
    /* at once, both */
    const double flat[5] = {7, 7, 7, 7, 7};
    cr_assert_float_eq(transfer_updates_saved(flat, 5, flat, 5, &uf, &us), 0.0, 1e-12);
    cr_assert(isnan(transfer_updates_saved(good, 0, scratch, 5, &uf, &us)));
}
