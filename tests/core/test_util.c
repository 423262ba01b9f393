/* test_util.c: rng determinism, medians and size parsing. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>

#include "util.h"

Test(util, rng_is_deterministic_per_seed) {
    pl_rng a, b, c;
    pl_rng_seed(&a, 42);
    pl_rng_seed(&b, 42);
    pl_rng_seed(&c, 43);
    int differ = 0;
    for (int i = 0; i < 100; i++) {
        uint64_t x = pl_rng_next(&a), y = pl_rng_next(&b), z = pl_rng_next(&c);
        cr_assert_eq(x, y);
        differ += (x != z);
    }
    cr_assert_gt(differ, 90);
}

Test(util, rng_int_stays_in_range_and_covers_it) {
    pl_rng r;
    pl_rng_seed(&r, 1);
    int seen[7] = {0};
    for (int i = 0; i < 7000; i++) {
        int v = pl_rng_int(&r, 7);
        cr_assert(v >= 0 && v < 7);
        seen[v]++;
    }
    for (int i = 0; i < 7; i++) cr_assert_gt(seen[i], 800);
}

Test(util, median_of_odd_and_even) {
    double a[5] = {5, 1, 4, 2, 3}, tmp[5];
    cr_assert(ieee_ulp_eq(dbl, pl_median(a, 5, tmp), 3.0, 0));
    cr_assert(ieee_ulp_eq(dbl, pl_median(a, 4, tmp), 3.0, 0)); /* {5,1,4,2} -> 3 */
    cr_assert(isnan(pl_median(a, 0, tmp)));
}

Test(util, parses_byte_sizes) {
    int64_t b;
    cr_assert_eq(pl_parse_bytes("16GiB", &b, NULL, 0), PL_OK);
    cr_assert_eq(b, 16LL << 30);
    cr_assert_eq(pl_parse_bytes("512MB", &b, NULL, 0), PL_OK);
    cr_assert_eq(b, 512000000LL);
    cr_assert_eq(pl_parse_bytes("1.5G", &b, NULL, 0), PL_OK);
    cr_assert_eq(b, 3LL << 29);
    cr_assert_eq(pl_parse_bytes("12", &b, NULL, 0), PL_OK);
    cr_assert_eq(b, 12);
    cr_assert_eq(pl_parse_bytes("12 furlongs", &b, NULL, 0), PL_ERR_INVALID);
    cr_assert_eq(pl_parse_bytes("-3G", &b, NULL, 0), PL_ERR_INVALID);
    cr_assert_eq(pl_parse_bytes("", &b, NULL, 0), PL_ERR_INVALID);
    cr_assert_eq(pl_parse_bytes("G", &b, NULL, 0), PL_ERR_INVALID);
}

Test(util, parses_memory_caps_as_bytes_or_fractions) {
    int64_t b;
    cr_assert_eq(pl_parse_mem_cap("50%", 1000, &b, NULL, 0), PL_OK);
    cr_assert_eq(b, 500);
    cr_assert_eq(pl_parse_mem_cap("0.25", 1000, &b, NULL, 0), PL_OK);
    cr_assert_eq(b, 250);
    cr_assert_eq(pl_parse_mem_cap("2GB", 1000, &b, NULL, 0), PL_OK);
    cr_assert_eq(b, 2000000000LL);
    cr_assert_eq(pl_parse_mem_cap("150%", 1000, &b, NULL, 0), PL_ERR_INVALID);
    cr_assert_eq(pl_parse_mem_cap("x%", 1000, &b, NULL, 0), PL_ERR_INVALID);
    /* fuzz finding: a tiny fraction used to give a cap of zero bytes */
    cr_assert_eq(pl_parse_mem_cap("7E-89", 150000000000LL, &b, NULL, 0), PL_ERR_INVALID);
    cr_assert_eq(pl_parse_mem_cap("1e-20%", 1000, &b, NULL, 0), PL_ERR_INVALID);
}
