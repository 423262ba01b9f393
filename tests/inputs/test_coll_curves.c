/*
 * test_coll_curves.c: the checks of measured collective data
 * (inputs/coll_curves.h): each kind of bad curve or model is refused with
 * a line naming it.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "coll_curves.h"

/* A model over all three kinds and one all-reduce curve over 2 ranks at
 * 4 KiB .. 4 MiB (factors of 4), times rising with the size. */
static void make(coll_measured *m, double alpha_us, double busbw, double slow) {
    memset(m, 0, sizeof *m);
    snprintf(m->source, sizeof m->source, "test");
    for (int k = 0; k < COLL_KIND_COUNT; k++) m->model[k] = (coll_ab){1, 0.0, alpha_us, busbw};
    coll_curve *c = &m->curves[m->n_curves++];
    c->kind = COLL_ALL_REDUCE;
    c->ranks = 2;
    for (double b = 4096; b <= 4194304; b *= 4) {
        c->bytes[c->n] = b;
        c->us[c->n] = slow * (2 * alpha_us + b / busbw * 1e6);
        c->n++;
    }
}

Test(coll_curves, validate_names_the_first_problem) {
    coll_measured m;
    char msg[256];
    make(&m, 5.0, 10e9, 1.0);
    m.curves[0].n = 1;
    cr_assert_eq(coll_measured_validate(&m, msg, sizeof msg), PL_ERR_INVALID);
    cr_assert(strstr(msg, "1 points") != NULL, "%s", msg);
    make(&m, 5.0, 10e9, 1.0);
    m.curves[0].bytes[3] = m.curves[0].bytes[2];
    cr_assert_eq(coll_measured_validate(&m, msg, sizeof msg), PL_ERR_INVALID);
    cr_assert(strstr(msg, "ascending") != NULL, "%s", msg);
    make(&m, 5.0, 10e9, 1.0);
    m.model[0].busbw = 0;
    cr_assert_eq(coll_measured_validate(&m, msg, sizeof msg), PL_ERR_INVALID);
    make(&m, 5.0, 10e9, 1.0);
    for (int k = 0; k < COLL_KIND_COUNT; k++) m.model[k].fitted = 0;
    cr_assert_eq(coll_measured_validate(&m, msg, sizeof msg), PL_ERR_INVALID);
    cr_assert(strstr(msg, "no collective kind") != NULL, "%s", msg);
}
