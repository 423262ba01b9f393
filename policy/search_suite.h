/*
 * search_suite.h: the non-learned placers of `placer search` run one after
 * another on one session (single devices always, as the speed-up
 * reference; then human splits, the DP, random search, annealing, local
 * search, Baechi's m-ETF and m-SCT, exhaustive search, as asked), and the
 * best placement of each gathered into the rows of the closing table.
 */
#ifndef PLACER_POLICY_SEARCH_SUITE_H
#define PLACER_POLICY_SEARCH_SUITE_H

#include <stddef.h>

#include "search.h"
#include "session.h"

enum {
    SEARCH_SUITE_SINGLE = 1, SEARCH_SUITE_HUMAN = 2, SEARCH_SUITE_DP = 4, SEARCH_SUITE_RANDOM = 8,
    SEARCH_SUITE_ANNEAL = 16, SEARCH_SUITE_LOCAL = 32, SEARCH_SUITE_EXHAUSTIVE = 64, SEARCH_SUITE_ETF = 128,
    SEARCH_SUITE_SCT = 256, SEARCH_SUITE_ALL = 511
};

typedef struct {
    int methods;          /* SEARCH_SUITE_* bits */
    int explicit_methods; /* 0 ("all"): an exhaustive search too large, or m-SCT without GLPK, is skipped */
    int budget;           /* evaluations for random, anneal and local */
    uint64_t seed;        /* their random choices */
    double max_evals;     /* largest exhaustive search allowed */
    void (*progress)(void *ud, const char *what); /* called before each method; may be NULL */
    void *ud;             /* passed to progress */
} search_suite_options;

typedef struct {
    policy_cands *rows;          /* best single, best human, then each method's best (owned) */
    double ref_us;               /* the best single device's step time, NAN when every one runs out of memory */
    search_exhaustive_info xi;   /* when the exhaustive search ran */
    int exhaustive_skipped;      /* 1: too large for max_evals under "all"; the reason is in note */
    char note[512];              /* why the exhaustive search was skipped */
    double wall_s;               /* time the methods took */
} search_suite_result;

/* Parse "single,dp,..." or "all" into SEARCH_SUITE_* bits; 0 on success,
 * -1 for an unknown name or an empty list. */
int search_suite_parse_methods(const char *text, int *out);

/* Run o's methods on ss and fill *r (free with search_suite_result_free,
 * also after a failure). Returns PL_OK, or the failing method's status with
 * msg holding its reason (empty when it gave none). */
pl_status search_suite_run(policy_session *ss, const search_suite_options *o, search_suite_result *r, char *msg,
                           size_t len);

/* Free r's rows; r itself is the caller's. */
void search_suite_result_free(search_suite_result *r);

#endif
