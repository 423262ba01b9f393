/* test_grouping.c: co-location groups of the GPT graph and their expansion. */
#include <criterion/criterion.h>

#include "graph.h"
#include "grouping.h"

static graph *build(const char *text) {
    gpt_config cfg;
    char msg[256];
    cr_assert_eq(gpt_config_parse(text, &cfg, msg, sizeof msg), PL_OK, "%s", msg);
    graph *g = NULL;
    cr_assert_eq(graph_build_gpt(&cfg, &g, msg, sizeof msg), PL_OK, "%s", msg);
    return g;
}

Test(grouping, default_gpt_colocates_40_nodes_into_13_groups) {
    graph *g = build("default");
    grouping *gr = NULL;
    cr_assert_eq(grouping_build(g, GROUPING_COLOCATE, &gr, NULL, 0), PL_OK);
    cr_assert_eq(gr->n_nodes, 40);
    cr_assert_eq(gr->n_groups, 13);
    cr_assert(gr->chain, "the grouped GPT is a chain of groups");
    /* embedding alone; block l: {ln1, attn, res1}, {ln2, mlp, res2}; the last
     * res2 joins ln_f, head and loss */
    cr_assert_eq(gr->group_start[1] - gr->group_start[0], 1);
    cr_assert_eq(gr->members[0], 0);
    for (int l = 0; l < 6; l++) {
        int k = 1 + 2 * l;
        cr_assert_eq(gr->group_start[k + 1] - gr->group_start[k], 3, "group %d", k);
        cr_assert_eq(gr->members[gr->group_start[k]], 1 + 6 * l);
        if (l < 5) cr_assert_eq(gr->group_start[k + 2] - gr->group_start[k + 1], 3, "group %d", k + 1);
    }
    cr_assert_eq(gr->group_start[13] - gr->group_start[12], 6);
    cr_assert_eq(gr->node_group[39], 12);
    cr_assert_eq(gr->node_group[37], 12);
    cr_assert_eq(gr->node_group[34], 12); /* ln2.5 */
    cr_assert_eq(gr->node_group[33], 11); /* res1.5 */
    grouping_destroy(gr);
    graph_destroy(g);
}

Test(grouping, gpt12_gives_25_groups_and_none_gives_one_per_node) {
    graph *g = build("gpt12");
    grouping *gr = NULL;
    cr_assert_eq(grouping_build(g, GROUPING_COLOCATE, &gr, NULL, 0), PL_OK);
    cr_assert_eq(gr->n_groups, 25);
    grouping_destroy(gr);
    cr_assert_eq(grouping_build(g, GROUPING_NONE, &gr, NULL, 0), PL_OK);
    cr_assert_eq(gr->n_groups, g->n_nodes);
    cr_assert_not(gr->chain, "residual edges skip nodes");
    for (int i = 0; i < g->n_nodes; i++) cr_assert_eq(gr->node_group[i], i);
    grouping_destroy(gr);
    graph_destroy(g);
}

Test(grouping, expand_and_collapse_round_trip) {
    graph *g = build("default");
    grouping *gr = NULL;
    cr_assert_eq(grouping_build(g, GROUPING_COLOCATE, &gr, NULL, 0), PL_OK);
    int gd[13], nd[40], back[13];
    for (int k = 0; k < 13; k++) gd[k] = (k * 7) % 3;
    grouping_expand(gr, gd, nd);
    for (int i = 0; i < 40; i++) cr_assert_eq(nd[i], gd[gr->node_group[i]]);
    cr_assert(grouping_collapse(gr, nd, back));
    cr_assert_arr_eq(back, gd, sizeof gd);
    nd[2] = nd[1] + 1; /* split group 1 */
    cr_assert_not(grouping_collapse(gr, nd, back));
    grouping_destroy(gr);
    graph_destroy(g);
}

Test(grouping, features_are_bounded_and_position_runs_0_to_1) {
    graph *g = build("default");
    grouping *gr = NULL;
    cr_assert_eq(grouping_build(g, GROUPING_COLOCATE, &gr, NULL, 0), PL_OK);
    for (int k = 0; k < gr->n_groups; k++)
        for (int f = 0; f < GROUP_N_FEATURES; f++) {
            double x = gr->features[k * GROUP_N_FEATURES + f];
            cr_assert(x >= 0.0 && x <= 6.0, "group %d feature %d = %g", k, f, x);
        }
    cr_assert(gr->features[0 * GROUP_N_FEATURES + OP_KIND_COUNT + 5] == 0.0);
    cr_assert(gr->features[12 * GROUP_N_FEATURES + OP_KIND_COUNT + 5] == 1.0);
    cr_assert(gr->features[12 * GROUP_N_FEATURES + OP_HEAD] == 1.0);
    grouping_destroy(gr);
    graph_destroy(g);
}

Test(grouping, bad_mode_is_refused) {
    grouping_mode m;
    char msg[128] = "";
    cr_assert_eq(grouping_parse_mode("clusters", &m, msg, sizeof msg), PL_ERR_INVALID);
    cr_assert(msg[0]);
    cr_assert_eq(grouping_parse_mode("none", &m, NULL, 0), PL_OK);
    cr_assert_eq(m, GROUPING_NONE);
}
