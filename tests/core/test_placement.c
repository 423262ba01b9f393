/* test_placement.c: placement parsing, printing and every bad-input case. */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <string.h>

#include "placement.h"

Test(placement, parses_and_prints_round_trip) {
    int p[4] = {0};
    char msg[256];
    cr_assert_eq(placement_parse("0,1, 1 ,3", 4, 4, p, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_eq(p[0], 0);
    cr_assert_eq(p[1], 1);
    cr_assert_eq(p[2], 1);
    cr_assert_eq(p[3], 3);
    char buf[64];
    cr_assert_eq(placement_format(p, 4, buf, sizeof buf), 7);
    cr_assert_str_eq(buf, "0,1,1,3");
    cr_assert_eq(placement_devices_used(p, 4), 3);
}

/* Criterion runs each parameter in a fresh process, so the strings are
 * stored inline rather than as pointers into the parent's memory. */
typedef struct {
    char text[40];
    int len, ndev;
    pl_status want;
    char needle[16]; /* must appear in the message */
} bad_case;

ParameterizedTestParameters(placement, bad_inputs_get_distinct_errors) {
    static bad_case cases[] = {
        {"0,1,2", 4, 4, PL_ERR_PLACEMENT_LENGTH, "3 entries"},
        {"0,1,2,3,0", 4, 4, PL_ERR_PLACEMENT_LENGTH, "needs 4"},
        {"0,1,4,3", 4, 4, PL_ERR_PLACEMENT_RANGE, "device 4"},
        {"0,-1,2,3", 4, 4, PL_ERR_PLACEMENT_RANGE, "field 2"},
        {"0,,2,3", 4, 4, PL_ERR_PLACEMENT_EMPTY, "field 2"},
        {"", 4, 4, PL_ERR_PLACEMENT_EMPTY, "field 1"},
        {"0,1,2,", 4, 4, PL_ERR_PLACEMENT_EMPTY, "field 4"},
        {"0,a,2,3", 4, 4, PL_ERR_PLACEMENT_JUNK, "'a'"},
        {"0,1.5,2,3", 4, 4, PL_ERR_PLACEMENT_JUNK, "field 2"},
        {"0,1 2,2,3", 4, 4, PL_ERR_PLACEMENT_JUNK, "field 2"},
        {"0,-,2,3", 4, 4, PL_ERR_PLACEMENT_JUNK, "field 2"},
        {"0,99999999999999999999,2,3", 4, 4, PL_ERR_PLACEMENT_RANGE, "field 2"},
    };
    return cr_make_param_array(bad_case, cases, sizeof cases / sizeof cases[0]);
}

ParameterizedTest(bad_case *c, placement, bad_inputs_get_distinct_errors) {
    int out[8] = {7, 7, 7, 7, 7, 7, 7, 7};
    char msg[256] = "";
    pl_status st = placement_parse(c->text, c->len, c->ndev, out, msg, sizeof msg);
    cr_assert_eq(st, c->want, "'%s' gave %d (%s)", c->text, st, msg);
    cr_assert(strstr(msg, c->needle) != NULL, "'%s': message '%s' lacks '%s'", c->text, msg, c->needle);
    for (int i = 0; i < 8; i++) cr_assert_eq(out[i], 7, "output touched on failure");
}

Test(placement, null_text_is_invalid) {
    int out[1];
    cr_assert_eq(placement_parse(NULL, 1, 1, out, NULL, 0), PL_ERR_INVALID);
}

Test(placement, validate_checks_range) {
    int p[3] = {0, 2, 1};
    cr_assert_eq(placement_validate(p, 3, 3, NULL, 0), PL_OK);
    cr_assert_eq(placement_validate(p, 3, 2, NULL, 0), PL_ERR_PLACEMENT_RANGE);
}

Test(placement, format_reports_needed_length_when_truncated) {
    int p[3] = {10, 11, 12};
    char buf[4];
    cr_assert_eq(placement_format(p, 3, buf, sizeof buf), 8);
    cr_assert_eq(strlen(buf), 3);
}
