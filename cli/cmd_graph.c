/* cmd_graph.c: `placer graph` prints the model's node table. */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "graph.h"

static void graph_usage(FILE *f) {
    fprintf(f,
            "usage: placer graph [--config NAME[,key=value...]] [--json]\n\n"
            "Prints the GPT graph as placeable nodes: index, kind, output shape,\n"
            "parameters, output bytes per sample and FLOPs per sample.\n\n"
            "  --config  default (49M GPT), gpt12 (12 layers, d_model 768) or tiny,\n"
            "            with overrides vocab=, d_model=, heads=, layers=, seq=, batch=\n"
            "  --json    machine-readable output\n");
}

int cmd_graph(int argc, char **argv) {
    const char *config = "default";
    int json = 0;
    static const struct option opts[] = {
        {"config", required_argument, 0, 'c'}, {"json", no_argument, 0, 'j'},
        {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    optind = 1;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, "c:jh", opts, NULL)) != -1) {
        switch (c) {
        case 'c': config = optarg; break;
        case 'j': json = 1; break;
        case 'h': graph_usage(stdout); return CLI_EXIT_OK;
        default:
            return cli_usage_error("graph", "unknown or incomplete option '%s'; see placer graph --help",
                                   argv[optind - 1]);
        }
    }
    if (optind < argc)
        return cli_usage_error("graph", "unexpected argument '%s'; see placer graph --help", argv[optind]);
    char msg[256] = "";
    gpt_config cfg;
    pl_status st = gpt_config_parse(config, &cfg, msg, sizeof msg);
    if (st != PL_OK) return cli_report("graph", st, msg);
    graph *g = NULL;
    st = graph_build_gpt(&cfg, &g, msg, sizeof msg);
    if (st != PL_OK) return cli_report("graph", st, msg);

    if (json) {
        printf("{\"config\":{\"vocab\":%d,\"d_model\":%d,\"heads\":%d,\"layers\":%d,\"seq\":%d,"
               "\"batch\":%d},\"params\":%lld,\"nodes\":[",
               cfg.vocab, cfg.d_model, cfg.n_heads, cfg.n_layers, cfg.seq_len, cfg.batch,
               (long long)g->total_params);
        for (int i = 0; i < g->n_nodes; i++) {
            const graph_node *n = &g->nodes[i];
            printf("%s{\"index\":%d,\"name\":\"%s\",\"kind\":\"%s\",\"inputs\":[", i ? "," : "", i,
                   n->name, op_kind_name(n->kind));
            for (int j = 0; j < n->n_inputs; j++) printf("%s%d", j ? "," : "", n->inputs[j]);
            printf("],\"shape\":[");
            for (int d = 0; d < n->out_rank; d++) printf("%s%lld", d ? "," : "", (long long)n->out_shape[d]);
            printf("],\"params\":%lld,\"out_bytes_per_sample\":%lld,\"act_bytes_per_sample\":%lld,"
                   "\"fwd_flops_per_sample\":%.0f,\"bwd_flops_per_sample\":%.0f}",
                   (long long)n->params, (long long)n->out_bytes_per_sample,
                   (long long)n->act_bytes_per_sample, n->fwd_flops_per_sample, n->bwd_flops_per_sample);
        }
        printf("]}\n");
    } else {
        char key[128];
        gpt_config_key(&cfg, key, sizeof key);
        printf("graph %s: %d nodes, %lld parameters\n\n", key, g->n_nodes, (long long)g->total_params);
        printf("%5s  %-10s %-10s %-18s %12s %14s %14s %14s\n", "index", "name", "kind", "output shape",
               "params", "out B/sample", "fwd FLOP/smp", "bwd FLOP/smp");
        for (int i = 0; i < g->n_nodes; i++) {
            const graph_node *n = &g->nodes[i];
            char shape[64];
            int off = snprintf(shape, sizeof shape, "(");
            for (int d = 0; d < n->out_rank; d++)
                off += snprintf(shape + off, sizeof shape - (size_t)off, d ? ",%lld" : "%lld",
                                (long long)n->out_shape[d]);
            snprintf(shape + off, sizeof shape - (size_t)off, ")");
            printf("%5d  %-10s %-10s %-18s %12lld %14lld %14.3g %14.3g\n", i, n->name, op_kind_name(n->kind),
                   shape, (long long)n->params, (long long)n->out_bytes_per_sample, n->fwd_flops_per_sample,
                   n->bwd_flops_per_sample);
        }
    }
    graph_destroy(g);
    return CLI_EXIT_OK;
}
