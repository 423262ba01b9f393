/*
 * fault_sweep.h: run an operation with its n-th allocation failing, for
 * n = 0, 1, ... until a run completes without meeting the failure, and
 * check after every run that the failure came back as PL_ERR_NOMEM (or,
 * where the caller allows it, another error status), that nothing leaked,
 * and whatever the caller checks on the side (a database still intact).
 *
 * When the failing allocation is made inside GSL (linked statically, so
 * its allocations are swept too), only the status is checked: GSL's own
 * allocators leak their half-built objects on failure
 * (failalloc_fired_in_gsl), which no caller can prevent; and one GSL
 * function's scratch allocations are not failed at all, because it uses
 * them unchecked and would crash inside GSL (failalloc_skipped).
 *
 * Only allocations made by placer's own code count (see failalloc.h):
 * SQLite and OpenBLAS are shared libraries and allocate out of reach.
 * PLACER_FAULTS_VERBOSE=1 prints each sweep's allocation count on stderr.
 */
#ifndef PLACER_TESTS_FAULT_SWEEP_H
#define PLACER_TESTS_FAULT_SWEEP_H

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>

#include "failalloc.h"
#include "status.h"

/* The operation: returns a status and releases everything it allocated. */
typedef pl_status (*fault_op)(void *ctx);
/* Called after every run (n: the allocation that failed, -1 for the clean
 * run; st: what op returned). May assert. */
typedef void (*fault_check)(void *ctx, long n, pl_status st);

/* Sweep op; returns the number of allocations a clean run makes. When
 * other_ok is set, a failed allocation may surface as any status: SQLite
 * reports its own out-of-memory as an error the store passes on as
 * PL_ERR_DB, and absorbs some failures altogether (benign allocations such
 * as cache growth), so the call may even succeed; check must then verify
 * that what was written is whole. */
static inline long fault_sweep_ex(const char *what, fault_op op, fault_check check, void *ctx, int other_ok) {
    long gsl_failures = 0, gsl_skipped = 0;
    for (long n = 0; n < 1000000; n++) {
        long live0 = failalloc_live();
        failalloc_arm(n);
        pl_status st = op(ctx);
        int fired = failalloc_fired();
        int in_gsl = failalloc_fired_in_gsl(), skipped = failalloc_skipped();
        failalloc_arm(-1);
        if (skipped) { /* not delivered: the call must simply have worked */
            gsl_skipped++;
            cr_assert_eq(failalloc_live(), live0, "%s: leak after skipped allocation %ld", what, n);
            cr_assert_eq(st, PL_OK, "%s: allocation %ld was not failed but the status was %s", what, n,
                         pl_status_str(st));
            continue;
        }
        long leaked = failalloc_live() - live0;
        if (in_gsl) gsl_failures++;
        else cr_assert_eq(leaked, 0, "%s: %ld blocks leaked after failing allocation %ld (status %s)", what, leaked, n,
                     pl_status_str(st));
        if (!fired) {
            cr_assert_eq(st, PL_OK, "%s: completed without a failure but returned %s", what, pl_status_str(st));
            if (check) check(ctx, -1, st);
            if (getenv("PLACER_FAULTS_VERBOSE"))
                fprintf(stderr, "faults: %-48s %6ld allocations swept (%ld inside GSL, %ld not failed)\n", what,
                        n - gsl_skipped, gsl_failures, gsl_skipped);
            return n;
        }
        if (!other_ok)
            cr_assert_eq(st, PL_ERR_NOMEM, "%s: allocation %ld failed but the status was %s", what, n,
                         pl_status_str(st));
        if (check) check(ctx, n, st);
    }
    cr_assert_fail("%s: never completed", what);
    return -1;
}

static inline long fault_sweep(const char *what, fault_op op, fault_check check, void *ctx) {
    return fault_sweep_ex(what, op, check, ctx, 0);
}

#endif
