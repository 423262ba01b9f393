/* test_schedule.c: schedule parsing and validation. */
#include <criterion/criterion.h>
#include <string.h>

#include "schedule.h"

Test(schedule, parses_order_names) {
    schedule_order o;
    cr_assert_eq(schedule_parse_order("gpipe", &o, NULL, 0), PL_OK);
    cr_assert_eq(o, SCHED_GPIPE);
    cr_assert_eq(schedule_parse_order("1f1b", &o, NULL, 0), PL_OK);
    cr_assert_eq(o, SCHED_1F1B);
    cr_assert_eq(schedule_parse_order("interleaved", &o, NULL, 0), PL_OK);
    char msg[128];
    cr_assert_eq(schedule_parse_order("2f2b", &o, msg, sizeof msg), PL_ERR_SCHEDULE);
    cr_assert(strstr(msg, "2f2b") && strstr(msg, "gpipe"), "%s", msg);
    cr_assert_eq(schedule_parse_order(NULL, &o, NULL, 0), PL_ERR_SCHEDULE);
}

Test(schedule, parses_micro_batch_counts) {
    int m = 0;
    cr_assert_eq(schedule_parse_micro_batches("4", &m, NULL, 0), PL_OK);
    cr_assert_eq(m, 4);
    cr_assert_eq(schedule_parse_micro_batches("0", &m, NULL, 0), PL_ERR_SCHEDULE);
    cr_assert_eq(schedule_parse_micro_batches("-2", &m, NULL, 0), PL_ERR_SCHEDULE);
    cr_assert_eq(schedule_parse_micro_batches("4x", &m, NULL, 0), PL_ERR_SCHEDULE);
    cr_assert_eq(schedule_parse_micro_batches("", &m, NULL, 0), PL_ERR_SCHEDULE);
}

Test(schedule, m_must_divide_the_batch) {
    char msg[128];
    schedule s = schedule_make(4, SCHED_1F1B);
    cr_assert_eq(schedule_validate(&s, 16, msg, sizeof msg), PL_OK);
    s.micro_batches = 3;
    cr_assert_eq(schedule_validate(&s, 16, msg, sizeof msg), PL_ERR_SCHEDULE);
    cr_assert(strstr(msg, "does not divide"), "%s", msg);
    s.micro_batches = 32;
    cr_assert_eq(schedule_validate(&s, 16, msg, sizeof msg), PL_ERR_SCHEDULE);
}

Test(schedule, chunks_need_interleaved) {
    schedule s = {4, SCHED_1F1B, 2};
    cr_assert_eq(schedule_validate(&s, 16, NULL, 0), PL_ERR_SCHEDULE);
    s.order = SCHED_INTERLEAVED;
    cr_assert_eq(schedule_validate(&s, 16, NULL, 0), PL_OK);
    s.chunks = 0;
    cr_assert_eq(schedule_validate(&s, 16, NULL, 0), PL_ERR_SCHEDULE);
}
