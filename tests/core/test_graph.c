/* test_graph.c: the GPT builder yields the documented nodes, sizes and FLOPs. */
#include <criterion/criterion.h>

#include "graph.h"

static graph *build(const char *cfgtext) {
    gpt_config cfg;
    char msg[256];
    cr_assert_eq(gpt_config_parse(cfgtext, &cfg, msg, sizeof msg), PL_OK, "%s", msg);
    graph *g = NULL;
    cr_assert_eq(graph_build_gpt(&cfg, &g, msg, sizeof msg), PL_OK, "%s", msg);
    return g;
}

Test(graph, default_gpt_has_40_nodes_and_49343232_params) {
    graph *g = build("default");
    cr_assert_eq(g->n_nodes, 40);
    cr_assert_eq(g->total_params, 49343232LL);
    graph_destroy(g);
}

Test(graph, default_gpt_node_order_and_kinds) {
    graph *g = build("default");
    cr_assert_eq(g->nodes[0].kind, OP_EMBEDDING);
    const op_kind block[6] = {OP_LAYERNORM, OP_ATTENTION, OP_RESIDUAL, OP_LAYERNORM, OP_MLP, OP_RESIDUAL};
    for (int l = 0; l < 6; l++)
        for (int j = 0; j < 6; j++) cr_assert_eq(g->nodes[1 + 6 * l + j].kind, block[j], "node %d", 1 + 6 * l + j);
    cr_assert_eq(g->nodes[37].kind, OP_LAYERNORM);
    cr_assert_eq(g->nodes[38].kind, OP_HEAD);
    cr_assert_eq(g->nodes[39].kind, OP_LOSS);
    cr_assert_str_eq(g->nodes[38].name, "head");
    graph_destroy(g);
}

Test(graph, default_gpt_params_per_node) {
    graph *g = build("default");
    cr_assert_eq(g->nodes[0].params, 50257LL * 384 + 256 * 384);
    cr_assert_eq(g->nodes[1].params, 768);                          /* ln1 */
    cr_assert_eq(g->nodes[2].params, 384LL * 1152 + 1152 + 384 * 384 + 384); /* attn */
    cr_assert_eq(g->nodes[3].params, 0);                            /* residual */
    cr_assert_eq(g->nodes[5].params, 384LL * 1536 + 1536 + 1536 * 384 + 384); /* mlp */
    cr_assert_eq(g->nodes[38].params, 384LL * 50257);               /* head, no bias */
    cr_assert_eq(g->nodes[39].params, 0);
    graph_destroy(g);
}

Test(graph, default_gpt_shapes_and_bytes) {
    graph *g = build("default");
    for (int i = 0; i < 38; i++) {
        cr_assert_eq(g->nodes[i].out_rank, 3);
        cr_assert_eq(g->nodes[i].out_shape[0], 16);
        cr_assert_eq(g->nodes[i].out_shape[1], 256);
        cr_assert_eq(g->nodes[i].out_shape[2], 384);
        cr_assert_eq(g->nodes[i].out_bytes_per_sample, 256LL * 384 * 4);
    }
    /* logits: 16 x 256 x 50257 floats = 823 MB for the whole batch */
    cr_assert_eq(g->nodes[38].out_shape[2], 50257);
    cr_assert_eq(g->nodes[38].out_bytes_per_sample * 16, 16LL * 256 * 50257 * 4);
    cr_assert_eq(g->nodes[39].out_rank, 2);
    graph_destroy(g);
}

Test(graph, edges_are_topological_and_consumers_match) {
    graph *g = build("default");
    int edges = 0;
    for (int i = 0; i < g->n_nodes; i++)
        for (int j = 0; j < g->nodes[i].n_inputs; j++) {
            cr_assert_lt(g->nodes[i].inputs[j], i);
            edges++;
        }
    cr_assert_eq(g->cons_start[g->n_nodes], edges);
    cr_assert_eq(graph_n_consumers(g, 0), 2);  /* ln1.0 and res1.0 */
    cr_assert_eq(graph_n_consumers(g, 1), 1);  /* ln1.0 -> attn.0 */
    cr_assert_eq(graph_n_consumers(g, 39), 0); /* loss */
    graph_destroy(g);
}

Test(graph, step_flops_match_the_known_total) {
    /* forward + backward of the default GPT is about 0.76 TFLOP per step */
    graph *g = build("default");
    double total = 0;
    for (int i = 0; i < g->n_nodes; i++)
        total += (g->nodes[i].fwd_flops_per_sample + g->nodes[i].bwd_flops_per_sample) * 16;
    cr_assert(total > 0.70e12 && total < 0.80e12, "total %g", total);
    graph_destroy(g);
}

Test(graph, other_configs_from_the_same_builder) {
    graph *g = build("gpt12");
    cr_assert_eq(g->n_nodes, 4 + 6 * 12);
    cr_assert_eq(g->nodes[2].params, 768LL * 2304 + 2304 + 768 * 768 + 768);
    graph_destroy(g);
    g = build("tiny");
    cr_assert_eq(g->n_nodes, 16);
    graph_destroy(g);
    g = build("default,layers=24,batch=8");
    cr_assert_eq(g->n_nodes, 4 + 6 * 24);
    cr_assert_eq(g->nodes[0].out_shape[0], 8);
    graph_destroy(g);
}

Test(graph, bad_configs_are_refused) {
    gpt_config cfg;
    char msg[256];
    cr_assert_eq(gpt_config_parse("huge", &cfg, msg, sizeof msg), PL_ERR_INVALID);
    cr_assert_eq(gpt_config_parse("default,heads=5", &cfg, msg, sizeof msg), PL_ERR_INVALID);
    cr_assert(strstr(msg, "divide") != NULL, "%s", msg);
    cr_assert_eq(gpt_config_parse("default,layers=0", &cfg, msg, sizeof msg), PL_ERR_INVALID);
    cr_assert_eq(gpt_config_parse("default,colour=3", &cfg, msg, sizeof msg), PL_ERR_INVALID);
    cr_assert_eq(gpt_config_parse("default,layers", &cfg, msg, sizeof msg), PL_ERR_INVALID);
}
