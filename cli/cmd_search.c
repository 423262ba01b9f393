/*
 * cmd_search.c: `placer search` runs the non-learned placers (single
 * device, human splits, the DP over contiguous partitions, random search,
 * simulated annealing, local search, exhaustive search, Baechi's m-ETF and
 * m-SCT) against the
 * simulator and prints their best placements side by side: it parses
 * (search_parse), opens the session, calls search_suite_run
 * (policy/search_suite.h) and prints the table.
 */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cli_output.h"
#include "search_suite.h"
#include "session.h"
#include "util.h"

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

/* What the user typed: the session's options and the methods'. */
typedef struct {
    policy_session_options so;
    search_suite_options o;
} search_args;

static int parse_int_opt(const char *name, const char *text, long lo, long hi, long *out) {
    if (cli_parse_int(text, lo, hi, out)) return 0;
    cli_usage_error("search", "%s must be an integer in %ld..%ld, not '%s'", name, lo, hi, text);
    return -1;
}

/* Parse argv into a. Returns -1 after printing the usage error, 1 for
 * --help, 0 to go on. */
static int search_parse(int argc, char **argv, search_args *a) {
    static const struct option opts[] = {
        {"db", required_argument, 0, 'd'},        {"method", required_argument, 0, 'M'},
        {"groups", required_argument, 0, 'g'},    {"micro-batches", required_argument, 0, 'm'},
        {"schedule", required_argument, 0, 's'},  {"mem-cap", required_argument, 0, 'c'},
        {"devices", required_argument, 0, 'n'},   {"config", required_argument, 0, 'C'},
        {"budget", required_argument, 0, 'b'},    {"seed", required_argument, 0, 'S'},
        {"max-evals", required_argument, 0, 'x'}, {"threads", required_argument, 0, 't'},
        {"uncalibrated", no_argument, 0, 'u'},    {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0}};
    memset(a, 0, sizeof *a);
    policy_session_options_default(&a->so);
    a->so.db_path = NULL;
    a->o = (search_suite_options){SEARCH_SUITE_ALL, 0, 2000, 1, 5e7, NULL, NULL};
    optind = 1;
    opterr = 0;
    int ch;
    char msg[512] = "";
    while ((ch = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        long v;
        switch (ch) {
        case 'd': a->so.db_path = optarg; break;
        case 'M':
            if (search_suite_parse_methods(optarg, &a->o.methods) != 0)
                return cli_usage_error("search", "unknown --method '%s' (use single, human, dp, random, anneal, "
                                                 "local, exhaustive or all, comma-separated)", optarg), -1;
            a->o.explicit_methods = !(a->o.methods == SEARCH_SUITE_ALL && strstr(optarg, "all"));
            break;
        case 'g':
            if (grouping_parse_mode(optarg, &a->so.groups, msg, sizeof msg) != PL_OK)
                return cli_usage_error("search", "%s", msg), -1;
            if (a->so.groups == GROUPING_LEARNED || a->so.groups == GROUPING_EAGLE)
                return cli_usage_error("search", "--groups %s is learned by placer train; search over colocate groups "
                                                 "or none (nodes)", optarg), -1;
            break;
        case 'm':
            if (schedule_parse_micro_batches(optarg, &a->so.micro_batches, msg, sizeof msg) != PL_OK)
                return cli_usage_error("search", "%s", msg), -1;
            break;
        case 's':
            if (schedule_parse_order(optarg, &a->so.order, msg, sizeof msg) != PL_OK)
                return cli_usage_error("search", "%s", msg), -1;
            break;
        case 'c': a->so.mem_cap = optarg; break;
        case 'n': if (parse_int_opt("--devices", optarg, 1, 64, &v)) return -1; a->so.devices = (int)v; break;
        case 'C': a->so.config = optarg; break;
        case 'b': if (parse_int_opt("--budget", optarg, 1, 100000000, &v)) return -1; a->o.budget = (int)v; break;
        case 'S': if (parse_int_opt("--seed", optarg, 0, 0x7fffffffL, &v)) return -1; a->o.seed = (uint64_t)v; break;
        case 't': if (parse_int_opt("--threads", optarg, 1, 1024, &v)) return -1; a->so.threads = (int)v; break;
        case 'x': {
            char *end = NULL;
            a->o.max_evals = strtod(optarg, &end);
            if (!*optarg || *end || !(a->o.max_evals >= 1))
                return cli_usage_error("search", "--max-evals must be a number >= 1, not '%s'", optarg), -1;
            break;
        }
        case 'u': a->so.calibrated = 0; break;
        case 'h': return 1;
        default:
            return cli_usage_error("search", "unknown or incomplete option '%s'; see placer search --help",
                                   argv[optind - 1]), -1;
        }
    }
    if (optind < argc)
        return cli_usage_error("search", "unexpected argument '%s'; see placer search --help", argv[optind]), -1;
    if (!a->so.db_path) a->so.db_path = cli_default_db();
    if (!a->so.db_path)
        return cli_usage_error("search", "no profile database found; give --db FILE (placer profile --from-spec "
                                         "t4x4-pcie --db FILE makes one)"), -1;
    return 0;
}

/* Progress on stderr, only when it is a terminal. */
static void progress(void *ud, const char *what) {
    (void)ud;
    fprintf(stderr, "\r\033[Kplacer search: %s ...", what);
}

/* The closing table and the notes under it; the exit code. */
static int search_print(const policy_session *ss, const search_args *a, const search_suite_result *r) {
    char *table = policy_format_table(r->rows, r->ref_us);
    if (!table) return cli_report("search", PL_ERR_NOMEM, NULL);
    fputs(table, stdout);
    free(table);
    const int m = a->o.methods;
    if (isnan(r->ref_us)) printf("\nevery single device runs out of memory: no speed-up reference\n");
    if (m & (SEARCH_SUITE_RANDOM | SEARCH_SUITE_ANNEAL | SEARCH_SUITE_LOCAL))
        printf("\nrandom, anneal and local: %d evaluations each, seed %llu\n", a->o.budget,
               (unsigned long long)a->o.seed);
    if ((m & SEARCH_SUITE_EXHAUSTIVE) && !r->exhaustive_skipped) {
        const int th = policy_evaluator_threads(ss->ev);
        printf("exhaustive: %.0f placements up to %d device relabellings (of %.3g), %.2f s on %d thread%s\n",
               r->xi.orbits, r->xi.n_automorphisms, r->xi.space, r->xi.wall_s, th, cli_plural(th));
    }
    if (r->exhaustive_skipped) printf("exhaustive: skipped, %s\n", r->note);
    printf("searched in %.2f s\n", r->wall_s);
    return CLI_EXIT_OK;
}

int cmd_search(int argc, char **argv) {
    search_args a;
    int pr = search_parse(argc, argv, &a);
    if (pr < 0) return CLI_EXIT_USAGE;
    if (pr > 0) {
        search_usage(stdout);
        return CLI_EXIT_OK;
    }
    char msg[512] = "";
    policy_session *ss = NULL;
    pl_status st = policy_session_open(&a.so, &ss, msg, sizeof msg);
    if (st != PL_OK) return cli_report("search", st, msg);
    cli_print_session_header(ss, &a.so, "");
    putchar('\n');
    const int tty = cli_stderr_is_tty();
    if (tty) a.o.progress = progress;
    search_suite_result r;
    st = search_suite_run(ss, &a.o, &r, msg, sizeof msg);
    if (tty) fprintf(stderr, "\r\033[K");
    int rc = CLI_EXIT_OK;
    if (st != PL_OK) rc = cli_report("search", st, msg);
    else rc = search_print(ss, &a, &r);
    search_suite_result_free(&r);
    policy_session_close(ss);
    return rc;
}
