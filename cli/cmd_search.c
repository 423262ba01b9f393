/*
 * cmd_search.c: `placer search` runs the non-learned placers (single
 * device, human splits, the DP over contiguous partitions, random search,
 * simulated annealing, local search, exhaustive search, Baechi's m-ETF and
 * m-SCT) against the
 * simulator and prints their best placements side by side.
 */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "baechi.h"
#include "cli.h"
#include "search.h"
#include "session.h"
#include "util.h"

enum {
    M_SINGLE = 1, M_HUMAN = 2, M_DP = 4, M_RANDOM = 8, M_ANNEAL = 16, M_LOCAL = 32, M_EXHAUSTIVE = 64, M_ETF = 128,
    M_SCT = 256, M_ALL = 511
};

static void search_usage(FILE *f) {
    fprintf(f,
            "usage: placer search [--db FILE] [--method LIST] [--groups colocate|none]\n"
            "                     [--micro-batches M] [--schedule gpipe|1f1b] [--mem-cap CAP]\n"
            "                     [--devices N] [--config NAME] [--budget N] [--seed N]\n"
            "                     [--max-evals N] [--threads N] [--uncalibrated]\n\n"
            "Runs baseline and search placers against the simulator and prints the best\n"
            "placement of each: predicted step time, peak memory, speed-up over the best\n"
            "single device, and whether it fits the memory cap.\n\n"
            "  --method      comma-separated: single, human, dp, random, anneal, local,\n"
            "                exhaustive, etf, sct (Baechi's m-ETF and m-SCT, on nodes), or all\n"
            "                (default: all; with all, an exhaustive search over --max-evals is\n"
            "                skipped with a note, and m-SCT without GLPK in the build)\n"
            "  --db          profile database (default: $PLACER_DB or the shipped profile)\n"
            "  --groups      colocate (13 groups on the default GPT, default) or none (nodes)\n"
            "  --micro-batches, --schedule   pipeline schedule (default 1, gpipe)\n"
            "  --mem-cap     per-device cap: bytes (16GB, 512MiB) or a fraction (50%%, 0.5)\n"
            "  --devices     use only the profile's first N devices\n"
            "  --config      graph config when the database holds several (default: its graph)\n"
            "  --budget      evaluations for random, anneal and local (default 2000 = 250 x 8)\n"
            "  --seed        seed of the random choices (default 1)\n"
            "  --max-evals   largest exhaustive search allowed (default 5e7 simulations)\n"
            "  --threads     simulator threads (default: all cores)\n"
            "  --uncalibrated  neutral simulator parameters even if the store has fitted ones\n");
}

static int parse_methods(const char *text, int *out) {
    char buf[256];
    if (strlen(text) >= sizeof buf) return -1;
    strcpy(buf, text);
    *out = 0;
    char *save = NULL;
    for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (!strcmp(t, "single")) *out |= M_SINGLE;
        else if (!strcmp(t, "human")) *out |= M_HUMAN;
        else if (!strcmp(t, "dp")) *out |= M_DP;
        else if (!strcmp(t, "random")) *out |= M_RANDOM;
        else if (!strcmp(t, "anneal")) *out |= M_ANNEAL;
        else if (!strcmp(t, "local")) *out |= M_LOCAL;
        else if (!strcmp(t, "exhaustive")) *out |= M_EXHAUSTIVE;
        else if (!strcmp(t, "etf")) *out |= M_ETF;
        else if (!strcmp(t, "sct")) *out |= M_SCT;
        else if (!strcmp(t, "all")) *out |= M_ALL;
        else return -1;
    }
    return *out ? 0 : -1;
}

static int parse_int_opt(const char *name, const char *text, long lo, long hi, long *out) {
    char *end = NULL;
    long v = strtol(text, &end, 10);
    if (!*text || *end || v < lo || v > hi) {
        cli_usage_error("search", "%s must be an integer in %ld..%ld, not '%s'", name, lo, hi, text);
        return -1;
    }
    *out = v;
    return 0;
}

static void progress(int tty, const char *what) {
    if (tty) fprintf(stderr, "\r\033[Kplacer search: %s ...", what);
}

/* Copy the best candidate of l (optionally only labels with prefix) into rows. */
static pl_status keep_best(policy_cands *rows, const policy_cands *l, const grouping *gr, const char *prefix) {
    int i = prefix ? policy_cands_best_with_prefix(l, prefix) : policy_cands_best(l);
    if (i < 0) return PL_OK;
    const policy_cand *x = &l->items[i];
    return policy_cands_add(rows, gr, x->label, x->node_dev, x->unit_dev, &x->ev, x->aux);
}

int cmd_search(int argc, char **argv) {
    policy_session_options so;
    policy_session_options_default(&so);
    so.db_path = NULL;
    int methods = M_ALL, explicit_methods = 0;
    long budget = 2000, seed = 1, threads = 0;
    double max_evals = 5e7;
    static const struct option opts[] = {
        {"db", required_argument, 0, 'd'},        {"method", required_argument, 0, 'M'},
        {"groups", required_argument, 0, 'g'},    {"micro-batches", required_argument, 0, 'm'},
        {"schedule", required_argument, 0, 's'},  {"mem-cap", required_argument, 0, 'c'},
        {"devices", required_argument, 0, 'n'},   {"config", required_argument, 0, 'C'},
        {"budget", required_argument, 0, 'b'},    {"seed", required_argument, 0, 'S'},
        {"max-evals", required_argument, 0, 'x'}, {"threads", required_argument, 0, 't'},
        {"uncalibrated", no_argument, 0, 'u'},    {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0}};
    optind = 1;
    opterr = 0;
    int ch;
    char msg[512] = "";
    while ((ch = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        long v;
        switch (ch) {
        case 'd': so.db_path = optarg; break;
        case 'M':
            if (parse_methods(optarg, &methods) != 0)
                return cli_usage_error("search", "unknown --method '%s' (use single, human, dp, random, anneal, "
                                                 "local, exhaustive or all, comma-separated)", optarg);
            explicit_methods = !(methods == M_ALL && strstr(optarg, "all"));
            break;
        case 'g':
            if (grouping_parse_mode(optarg, &so.groups, msg, sizeof msg) != PL_OK) return cli_usage_error("search", "%s", msg);
            if (so.groups == GROUPING_LEARNED || so.groups == GROUPING_EAGLE)
                return cli_usage_error("search", "--groups %s is learned by placer train; search over colocate groups "
                                                 "or none (nodes)", optarg);
            break;
        case 'm':
            if (schedule_parse_micro_batches(optarg, &so.micro_batches, msg, sizeof msg) != PL_OK)
                return cli_usage_error("search", "%s", msg);
            break;
        case 's':
            if (schedule_parse_order(optarg, &so.order, msg, sizeof msg) != PL_OK) return cli_usage_error("search", "%s", msg);
            break;
        case 'c': so.mem_cap = optarg; break;
        case 'n': if (parse_int_opt("--devices", optarg, 1, 64, &v)) return CLI_EXIT_USAGE; so.devices = (int)v; break;
        case 'C': so.config = optarg; break;
        case 'b': if (parse_int_opt("--budget", optarg, 1, 100000000, &budget)) return CLI_EXIT_USAGE; break;
        case 'S': if (parse_int_opt("--seed", optarg, 0, 0x7fffffffL, &seed)) return CLI_EXIT_USAGE; break;
        case 't': if (parse_int_opt("--threads", optarg, 1, 1024, &threads)) return CLI_EXIT_USAGE; break;
        case 'x': {
            char *end = NULL;
            max_evals = strtod(optarg, &end);
            if (!*optarg || *end || !(max_evals >= 1))
                return cli_usage_error("search", "--max-evals must be a number >= 1, not '%s'", optarg);
            break;
        }
        case 'u': so.calibrated = 0; break;
        case 'h': search_usage(stdout); return CLI_EXIT_OK;
        default:
            return cli_usage_error("search", "unknown or incomplete option '%s'; see placer search --help",
                                   argv[optind - 1]);
        }
    }
    if (optind < argc)
        return cli_usage_error("search", "unexpected argument '%s'; see placer search --help", argv[optind]);
    if (!so.db_path) so.db_path = cli_default_db();
    if (!so.db_path)
        return cli_usage_error("search", "no profile database found; give --db FILE (placer profile --from-spec "
                                         "t4x4-pcie --db FILE makes one)");
    so.threads = (int)threads;

    policy_session *ss = NULL;
    pl_status st = policy_session_open(&so, &ss, msg, sizeof msg);
    if (st != PL_OK) return cli_report("search", st, msg);
    const int tty = cli_stderr_is_tty();
    policy_cands *all = NULL, *rows = NULL;
    int rc = CLI_EXIT_OK;
    const grouping *gr = ss->gr;
    if (policy_cands_create(ss->g->n_nodes, gr->n_groups, &all) != PL_OK ||
        policy_cands_create(ss->g->n_nodes, gr->n_groups, &rows) != PL_OK) {
        rc = cli_report("search", PL_ERR_NOMEM, "out of memory");
        goto out;
    }
    char key[128];
    gpt_config_key(&ss->cfg, key, sizeof key);
    char capbuf[32] = "device memory";
    if (ss->cap_bytes > 0) pl_format_bytes((double)ss->cap_bytes, capbuf, sizeof capbuf);
    printf("profile %s (%s, %d device%s), graph %s\n", ss->p->machine, ss->p->source, ss->p->n_devices,
           ss->p->n_devices == 1 ? "" : "s", key);
    printf("%d units (%s grouping), m=%d %s, cap %s, simulator parameters %s\n\n", gr->n_groups,
           grouping_mode_name(gr->mode), so.micro_batches, schedule_order_name(so.order), capbuf,
           ss->n_sim_params ? "calibrated" : "neutral");

    search_budget b = {(int)budget, 8, (uint64_t)seed, NULL};
    search_exhaustive_info xi;
    memset(&xi, 0, sizeof xi);
    int exh_skipped = 0;
    double t0 = pl_now_us();
    /* the single devices always run: they are the speed-up reference */
    progress(tty, "single devices");
    if ((st = search_single(ss->ev, all)) != PL_OK) goto fail;
    if (methods & M_HUMAN) {
        progress(tty, "human splits");
        if ((st = search_human(ss->ev, all)) != PL_OK) goto fail;
    }
    if (methods & M_DP) {
        progress(tty, "dp");
        if ((st = search_dp(ss->ev, all, NULL)) != PL_OK) goto fail;
    }
    if (methods & M_RANDOM) {
        progress(tty, "random search");
        if ((st = search_random(ss->ev, &b, all)) != PL_OK) goto fail;
    }
    if (methods & M_ANNEAL) {
        progress(tty, "simulated annealing");
        if ((st = search_anneal(ss->ev, &b, all)) != PL_OK) goto fail;
    }
    if (methods & M_LOCAL) {
        progress(tty, "local search");
        if ((st = search_local(ss->ev, &b, all)) != PL_OK) goto fail;
    }
    if (methods & M_ETF) {
        progress(tty, "m-etf");
        if ((st = search_etf(ss->ev, all)) != PL_OK) goto fail;
    }
    if ((methods & M_SCT) && (explicit_methods || search_sct_available())) {
        progress(tty, "m-sct");
        if ((st = search_sct(ss->ev, all, msg, sizeof msg)) != PL_OK) {
            if (tty) fprintf(stderr, "\r\033[K");
            rc = cli_report("search", st, msg);
            goto out;
        }
    }
    if (methods & M_EXHAUSTIVE) {
        progress(tty, "exhaustive search");
        st = search_exhaustive(ss->ev, max_evals, all, &xi, msg, sizeof msg);
        if (st == PL_ERR_INVALID && !explicit_methods) {
            exh_skipped = 1;
            st = PL_OK;
        } else if (st != PL_OK) {
            if (tty) fprintf(stderr, "\r\033[K");
            rc = cli_report("search", st, msg);
            goto out;
        }
    }
    if (tty) fprintf(stderr, "\r\033[K");
    double wall = (pl_now_us() - t0) * 1e-6;

    /* rows: best single, best human, then each method's best */
    int bs = policy_cands_best_with_prefix(all, "single");
    double ref = bs >= 0 && !all->items[bs].ev.oom ? all->items[bs].ev.step_us : NAN;
    const char *prefixes[] = {"single", "human", "dp (", "random", "anneal", "local", "m-etf", "m-sct", "exhaustive",
                              NULL};
    for (int i = 0; prefixes[i] && st == PL_OK; i++) {
        if (!strcmp(prefixes[i], "exhaustive")) {
            /* both the optimum and, when it does not fit, the best that fits */
            for (int j = 0; j < all->n && st == PL_OK; j++)
                if (!strncmp(all->items[j].label, "exhaustive", 10))
                    st = policy_cands_add(rows, gr, all->items[j].label, all->items[j].node_dev,
                                          all->items[j].unit_dev, &all->items[j].ev, 0);
        } else {
            st = keep_best(rows, all, gr, prefixes[i]);
        }
    }
    if (st != PL_OK) goto fail;
    char *table = policy_format_table(rows, ref);
    if (!table) { st = PL_ERR_NOMEM; goto fail; }
    fputs(table, stdout);
    free(table);
    if (isnan(ref)) printf("\nevery single device runs out of memory: no speed-up reference\n");
    if (methods & (M_RANDOM | M_ANNEAL | M_LOCAL))
        printf("\nrandom, anneal and local: %ld evaluations each, seed %ld\n", budget, seed);
    if ((methods & M_EXHAUSTIVE) && !exh_skipped)
        printf("exhaustive: %.0f placements up to %d device relabellings (of %.3g), %.2f s on %d thread%s\n",
               xi.orbits, xi.n_automorphisms, xi.space, xi.wall_s, policy_evaluator_threads(ss->ev),
               policy_evaluator_threads(ss->ev) == 1 ? "" : "s");
    if (exh_skipped) printf("exhaustive: skipped, %s\n", msg);
    printf("searched in %.2f s\n", wall);
    goto out;
fail:
    if (tty) fprintf(stderr, "\r\033[K");
    rc = cli_report("search", st, msg[0] ? msg : NULL);
out:
    policy_cands_destroy(all);
    policy_cands_destroy(rows);
    policy_session_close(ss);
    return rc;
}
