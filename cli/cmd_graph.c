/* cmd_graph.c: `placer graph` prints the model's node table, for the
 * built-in presets or any model file (--model: a config.json, a shipped
 * model name from data/models, or a preset), with a one-line summary of the
 * model's block features and parameter count. */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "graph.h"
#include "model_config.h"
#include "util.h"

static void graph_usage(FILE *f) {
    fprintf(f,
            "usage: placer graph [--config NAME[,key=value...] | --model FILE|NAME[,key=value...]] [--json]\n\n"
            "Prints the GPT graph as placeable nodes: index, kind, output shape,\n"
            "parameters, output bytes per sample and FLOPs per sample, after a line\n"
            "naming the model's features and its parameter count.\n\n"
            "  --config  default (49M GPT), gpt12 (12 layers, d_model 768) or tiny,\n"
            "            with overrides vocab=, d_model=, heads=, layers=, seq=, batch=,\n"
            "            kv_heads=, d_ff=, norm=layernorm|rmsnorm, mlp=gelu|swiglu,\n"
            "            pos=learned|rotary, tied=0|1, vocab_multiple=, bias=0|1,\n"
            "            qkv_bias=0|1, parallel=0|1\n"
            "  --model   a Hugging Face config.json (GPT-2, Llama, Mistral, Qwen2, GPT-NeoX),\n"
            "            a shipped model (llama-3-8b, megatron-145b, ...: data/models/), or a\n"
            "            preset; names and files take the same overrides, e.g. llama-3-8b,seq=4096\n"
            "  --json    machine-readable output\n");
}

/* "32 layers, d_model 4096, GQA 32 heads / 8 KV, ..." into buf. */
static void feature_text(const gpt_config *c, char *buf, size_t len) {
    int kv = gpt_kv_heads(c);
    char att[48];
    if (kv == c->n_heads) snprintf(att, sizeof att, "%d heads", c->n_heads);
    else snprintf(att, sizeof att, "GQA %d heads / %d KV", c->n_heads, kv);
    char vocab[48];
    if (gpt_vocab_padded(c) != c->vocab) snprintf(vocab, sizeof vocab, "vocab %d padded to %d", c->vocab, gpt_vocab_padded(c));
    else snprintf(vocab, sizeof vocab, "vocab %d", c->vocab);
    snprintf(buf, len, "%d layers, d_model %d, %s, d_ff %d, %s, %s, %s positions, %s, %s%s, %s, seq %d, batch %d",
             c->n_layers, c->d_model, att, gpt_d_ff(c), c->norm == NORM_RMSNORM ? "RMSNorm" : "layernorm",
             c->mlp == MLP_SWIGLU ? "SwiGLU" : "GELU", c->pos == POS_ROTARY ? "rotary" : "learned",
             c->tied ? "tied head" : "untied head", c->no_bias ? "no bias" : "biases",
             c->no_bias && c->qkv_bias ? " (but q, k, v)" : "",
             c->parallel_residual ? "parallel residual" : "serial residual", c->seq_len, c->batch);
    size_t n = strlen(buf);
    snprintf(buf + n, len - n, ", %s", vocab);
}

int cmd_graph(int argc, char **argv) {
    const char *config = NULL, *model = NULL;
    int json = 0;
    static const struct option opts[] = {
        {"config", required_argument, 0, 'c'}, {"model", required_argument, 0, 'm'},
        {"json", no_argument, 0, 'j'}, {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    optind = 1;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, "c:m:jh", opts, NULL)) != -1) {
        switch (c) {
        case 'c': config = optarg; break;
        case 'm': model = optarg; break;
        case 'j': json = 1; break;
        case 'h': graph_usage(stdout); return CLI_EXIT_OK;
        default:
            return cli_usage_error("graph", "unknown or incomplete option '%s'; see placer graph --help",
                                   argv[optind - 1]);
        }
    }
    if (optind < argc)
        return cli_usage_error("graph", "unexpected argument '%s'; see placer graph --help", argv[optind]);
    if (config && model)
        return cli_usage_error("graph", "give either --config or --model, not both; see placer graph --help");
    char msg[1024] = "", name[64] = "";
    gpt_config cfg;
    pl_status st;
    if (model) st = model_config_load(model, &cfg, name, sizeof name, msg, sizeof msg);
    else {
        st = gpt_config_parse(config ? config : "default", &cfg, msg, sizeof msg);
        snprintf(name, sizeof name, "%s", config ? config : "default");
        char *comma = strchr(name, ',');
        if (comma) *comma = 0;
    }
    if (st != PL_OK) return cli_report("graph", st, msg);
    graph *g = NULL;
    st = graph_build_gpt(&cfg, &g, msg, sizeof msg);
    if (st != PL_OK) return cli_report("graph", st, msg);

    if (json) {
        printf("{\"model\":\"");
        pl_json_text(stdout, name);
        printf("\",\"config\":{\"vocab\":%d,\"d_model\":%d,\"heads\":%d,\"layers\":%d,\"seq\":%d,"
               "\"batch\":%d,\"kv_heads\":%d,\"d_ff\":%d,\"norm\":\"%s\",\"mlp\":\"%s\",\"pos\":\"%s\","
               "\"tied\":%d,\"vocab_padded\":%d,\"bias\":%d,\"qkv_bias\":%d,\"parallel_residual\":%d},"
               "\"params\":%lld,\"params_closed_form\":%lld,\"nodes\":[",
               cfg.vocab, cfg.d_model, cfg.n_heads, cfg.n_layers, cfg.seq_len, cfg.batch, gpt_kv_heads(&cfg),
               gpt_d_ff(&cfg), cfg.norm == NORM_RMSNORM ? "rmsnorm" : "layernorm",
               cfg.mlp == MLP_SWIGLU ? "swiglu" : "gelu", cfg.pos == POS_ROTARY ? "rotary" : "learned", cfg.tied,
               gpt_vocab_padded(&cfg), !cfg.no_bias, cfg.no_bias ? cfg.qkv_bias : 1, cfg.parallel_residual,
               (long long)g->total_params, (long long)gpt_param_count(&cfg));
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
        char feat[512];
        feature_text(&cfg, feat, sizeof feat);
        printf("graph %s: %d nodes, %lld parameters\n", key, g->n_nodes, (long long)g->total_params);
        printf("model %s: %s; %lld parameters (%.2f B)\n\n", name, feat, (long long)g->total_params,
               (double)g->total_params / 1e9);
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
