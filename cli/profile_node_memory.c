/*
 * profile_node_memory.c: `placer profile node-memory`, a profile's node
 * memory rows against what this engine allocates for them.
 *
 * A measured profile's node rows (output and saved bytes per sample, each
 * call's workspace) are not timings: they are the engine's buffer layout
 * (hw/kernels/param_memory.c) written by the profiler at the time. When the layout
 * changes (a new scratch, a split of forward and backward workspace) the
 * rows of an older file go stale while its hours of timings stay good. This
 * command prints the rows that differ from this engine's figures
 * (profiler_engine_node_mem: the file's largest micro-batch size, its
 * precision and backend workspace) and, with --write, replaces them in one
 * transaction, keeping every cost. A spec profile's rows come from its
 * machine description and are refused.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "graph.h"
#include "profile_data.h"
#include "profiler.h"
#include "store.h"
#include "util.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: placer profile node-memory --db FILE [--config CFG] [--write [--portable]] [--json]\n\n"
            "Compares a measured profile's node memory rows (output and saved bytes per sample, the\n"
            "forward's and the backward's workspace) with what this engine allocates for the same\n"
            "nodes at the file's largest micro-batch size, in its precision, with its backend\n"
            "workspace, and prints the rows that differ. --write replaces them (costs are kept), so\n"
            "a file measured before the engine's buffer layout changed needs no GPU to catch up.\n\n"
            "  --db FILE     the profile database (required)\n"
            "  --config CFG  which graph when the file holds several (default: the latest)\n"
            "  --write       replace the node rows with this engine's (the file is migrated to the\n"
            "                current schema)\n"
            "  --portable    with --write: leave the file in rollback-journal mode (as shipped)\n"
            "                A file that is refused or already up to date is not touched.\n"
            "  --json        machine-readable output: every node's stored and engine figures\n");
}

/* The same figures for the simulator: bytes, and each call's workspace. */
static int same_mem(const profile_node_mem *a, const profile_node_mem *b) {
    return a->param_bytes == b->param_bytes && a->act_bytes_per_sample == b->act_bytes_per_sample &&
           a->out_bytes_per_sample == b->out_bytes_per_sample && a->workspace_bytes == b->workspace_bytes &&
           profile_node_call_workspace(a, PHASE_FWD) == profile_node_call_workspace(b, PHASE_FWD) &&
           profile_node_call_workspace(a, PHASE_BWD) == profile_node_call_workspace(b, PHASE_BWD);
}

/* A row that records one workspace for both calls (schema 1 or 2). */
static int one_figure(const profile_node_mem *m) { return m->fwd_workspace_bytes == 0 && m->bwd_workspace_bytes == 0; }

static void json_mem(const profile_node_mem *m) {
    printf("{\"param_bytes\":%lld,\"act_bytes_per_sample\":%lld,\"out_bytes_per_sample\":%lld,"
           "\"fwd_workspace_bytes\":%lld,\"bwd_workspace_bytes\":%lld}",
           (long long)m->param_bytes, (long long)m->act_bytes_per_sample, (long long)m->out_bytes_per_sample,
           (long long)profile_node_call_workspace(m, PHASE_FWD), (long long)profile_node_call_workspace(m, PHASE_BWD));
}

static void text_mem(const char *who, const profile_node_mem *m) {
    char a[32], o[32], f[32], b[32];
    pl_format_bytes((double)m->act_bytes_per_sample, a, sizeof a);
    pl_format_bytes((double)m->out_bytes_per_sample, o, sizeof o);
    pl_format_bytes((double)profile_node_call_workspace(m, PHASE_FWD), f, sizeof f);
    pl_format_bytes((double)profile_node_call_workspace(m, PHASE_BWD), b, sizeof b);
    printf("      %-7s act/smp %10s  out/smp %10s  ws fwd %10s  ws bwd %10s%s\n", who, a, o, f, b,
           one_figure(m) ? "  (one figure for both calls)" : "");
}

int cmd_profile_node_memory(int argc, char **argv) {
    const char *db_path = NULL, *config = NULL;
    int do_write = 0, portable = 0, json = 0;
    static const struct option opts[] = {{"db", required_argument, 0, 'd'},   {"config", required_argument, 0, 'c'},
                                         {"write", no_argument, 0, 'w'},      {"portable", no_argument, 0, 'p'},
                                         {"json", no_argument, 0, 'j'},       {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    const char *cmd = "profile node-memory";
    optind = 1;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, "d:c:wpjh", opts, NULL)) != -1) {
        switch (c) {
        case 'd': db_path = optarg; break;
        case 'c': config = optarg; break;
        case 'w': do_write = 1; break;
        case 'p': portable = 1; break;
        case 'j': json = 1; break;
        case 'h': usage(stdout); return CLI_EXIT_OK;
        default:
            return cli_usage_error(cmd, "unknown or incomplete option '%s'; see placer profile node-memory --help",
                                   argv[optind - 1]);
        }
    }
    if (optind < argc) return cli_usage_error(cmd, "unexpected argument '%s'", argv[optind]);
    if (!db_path) return cli_usage_error(cmd, "--db FILE is required; see placer profile node-memory --help");
    if (portable && !do_write) return cli_usage_error(cmd, "--portable goes with --write");
    char msg[1024] = "";
    gpt_config cfg, stored;
    if (config && gpt_config_parse(config, &cfg, msg, sizeof msg) != PL_OK) return cli_report(cmd, PL_ERR_INVALID, msg);

    profile_db *db = NULL;
    profile_data *p = NULL;
    graph *g = NULL;
    profile_node_mem *now = NULL;
    int code = CLI_EXIT_OK;
    /* read first: a refused or unchanged file is not migrated or switched to WAL */
    pl_status st = profile_db_open(db_path, PROFILE_DB_READ, &db, msg, sizeof msg);
    if (st != PL_OK) return cli_report(cmd, st, msg);
    if ((st = profile_db_load_profile(db, config ? &cfg : NULL, &p, &stored, msg, sizeof msg)) != PL_OK) {
        code = cli_report(cmd, st, msg);
        goto out;
    }
    if (strcmp(p->source, "measured") != 0) {
        code = cli_report(cmd, PL_ERR_INVALID,
                          "this is a spec profile: its node memory comes from its machine description, not the "
                          "engine's buffers");
        goto out;
    }
    if ((st = graph_build_gpt(&stored, &g, msg, sizeof msg)) != PL_OK) {
        code = cli_report(cmd, st, msg);
        goto out;
    }
    if (!(now = malloc(sizeof *now * (size_t)g->n_nodes))) {
        code = cli_report(cmd, PL_ERR_NOMEM, "out of memory");
        goto out;
    }
    if ((st = profiler_engine_node_mem(g, p, now, msg, sizeof msg)) != PL_OK) {
        code = cli_report(cmd, st, msg);
        goto out;
    }
    int n_diff = 0, n_one = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        n_diff += !same_mem(&p->node_mem[i], &now[i]);
        n_one += one_figure(&p->node_mem[i]) && !one_figure(&now[i]);
    }
    const int replace = do_write && (n_diff > 0 || n_one > 0);
    if (replace) {
        profile_db_close(db);
        db = NULL;
        if ((st = profile_db_open(db_path, PROFILE_DB_WRITE, &db, msg, sizeof msg)) != PL_OK) {
            code = cli_report(cmd, st, msg);
            goto out;
        }
        if ((st = profile_db_begin(db)) == PL_OK && (st = profile_db_put_graph(db, g, now)) == PL_OK)
            st = profile_db_commit(db);
        if (st != PL_OK) {
            profile_db_rollback(db);
            code = cli_report(cmd, st, profile_db_last_error(db));
            goto out;
        }
    }
    if (replace && portable && (st = profile_db_make_portable(db, msg, sizeof msg)) != PL_OK) {
        code = cli_report(cmd, st, msg);
        goto out;
    }
    if (json) {
        printf("{\"db\":");
        pl_json_string(stdout, db_path);
        printf(",\"graph\":");
        pl_json_string(stdout, p->graph_key);
        printf(",\"max_micro_batch\":%d,\"precision\":\"%s\",\"differ\":%d,\"one_workspace_rows\":%d,"
               "\"written\":%s,\"nodes\":[",
               p->mb_sizes[p->n_mb - 1], p->bf16 ? "bf16" : "tf32", n_diff, n_one, replace ? "true" : "false");
        for (int i = 0; i < g->n_nodes; i++) {
            printf("%s{\"index\":%d,\"name\":", i ? "," : "", i);
            pl_json_string(stdout, g->nodes[i].name);
            printf(",\"differs\":%s,\"stored\":", same_mem(&p->node_mem[i], &now[i]) ? "false" : "true");
            json_mem(&p->node_mem[i]);
            printf(",\"engine\":");
            json_mem(&now[i]);
            putchar('}');
        }
        printf("]}\n");
        goto out;
    }
    printf("node memory of %s (%s, micro-batch %d, %s): %d of %d nodes differ from this engine's figures", db_path,
           p->graph_key, p->mb_sizes[p->n_mb - 1], p->bf16 ? "bf16" : "tf32", n_diff, g->n_nodes);
    if (n_one) printf("; %d rows record one workspace for both calls", n_one);
    putchar('\n');
    for (int i = 0; i < g->n_nodes; i++) {
        if (same_mem(&p->node_mem[i], &now[i])) continue;
        printf("  %3d %-10s %s\n", i, g->nodes[i].name, op_kind_name(g->nodes[i].kind));
        text_mem("stored", &p->node_mem[i]);
        text_mem("engine", &now[i]);
    }
    if (do_write) printf("%s: %s\n", db_path, replace ? "node rows replaced, costs kept" : "nothing to replace");
    else if (n_diff || n_one) printf("--write replaces them (costs are kept)\n");
out:
    free(now);
    graph_destroy(g);
    profile_data_destroy(p);
    profile_db_close(db);
    return code;
}
