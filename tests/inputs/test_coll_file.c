/*
 * test_coll_file.c: collectives files (inputs/coll_file.h): every
 * malformed file is refused with one line naming the key, a good one reads
 * its figures in the file's units, a missing file is NOT_FOUND. (A fit
 * written and read back: tests/calib/test_coll_fit.c.)
 */
#include <criterion/criterion.h>
#include <string.h>

#include "coll_file.h"

#define HEAD "{\"format\": \"placer-collectives\", \"version\": 1, \"source\": \"test\", \"link\": \"intra-node\", "
#define AR "\"kinds\": {\"all_reduce\": {\"base_us\": 0, \"alpha_us\": 5, \"busbw_gb_s\": 2}}"

Test(coll_file, malformed_files_are_one_line_naming_the_key) {
    static const struct {
        const char *text, *want;
    } cases[] = {
        {"", "not valid JSON"},
        {"[1]", "is a JSON object"},
        {"{\"format\": \"x\"}", "'format' must be \"placer-collectives\""},
        {"{\"format\": \"placer-collectives\", \"version\": 2}", "'version' must be 1"},
        {"{\"format\": \"placer-collectives\", \"version\": 1, \"source\": \"\"}", "'source' must be a non-empty"},
        {HEAD "\"bogus\": 1, " AR "}", "unknown key 'bogus'"},
        {"{\"format\": \"placer-collectives\", \"version\": 1, \"source\": \"s\", \"link\": \"inter-node\"}",
         "'link' must be \"intra-node\""},
        {HEAD "\"kinds\": {}}", "'kinds' is empty"},
        {HEAD "\"kinds\": {\"broadcast\": {}}}", "unknown key 'kinds.broadcast'"},
        {HEAD "\"kinds\": {\"all_reduce\": {\"base_us\": 0, \"alpha_us\": 5}}}", "'kinds.all_reduce.busbw_gb_s' is missing"},
        {HEAD "\"kinds\": {\"all_reduce\": {\"base_us\": 0, \"alpha_us\": \"5\", \"busbw_gb_s\": 2}}}",
         "'kinds.all_reduce.alpha_us' must be a number"},
        {HEAD "\"kinds\": {\"all_reduce\": {\"base_us\": 0, \"alpha_us\": 5, \"busbw_gb_s\": 0}}}", "must be positive"},
        {HEAD "\"kinds\": {\"all_reduce\": {\"base_us\": -1, \"alpha_us\": 5, \"busbw_gb_s\": 2}}}", "must be >= 0"},
        {HEAD "\"kinds\": {\"all_reduce\": {\"base_us\": 0, \"alpha_us\": 5, \"busbw_gb_s\": 2, \"bw\": 1}}}",
         "unknown key 'kinds.all_reduce.bw'"},
        {HEAD AR ", \"curves\": [{\"kind\": \"all_reduce\", \"ranks\": 2, \"bytes\": [4], \"us\": [9]}]}",
         "'curves[0]' has 1 point; a curve needs at least 2 sizes"},
        {HEAD AR ", \"curves\": [{\"kind\": \"all_reduce\", \"ranks\": 2, \"bytes\": [4, 8], \"us\": [9]}]}",
         "2 sizes but 1 times"},
        {HEAD AR ", \"curves\": [{\"kind\": \"all_reduce\", \"ranks\": 2, \"bytes\": [8, 4], \"us\": [9, 9]}]}",
         "sizes must be ascending"},
        {HEAD AR ", \"curves\": [{\"kind\": \"all_reduce\", \"ranks\": 1, \"bytes\": [4, 8], \"us\": [9, 9]}]}",
         "'curves[0].ranks' must be an integer in 2..1024"},
        {HEAD AR ", \"curves\": [{\"kind\": \"all_gather\", \"ranks\": 2, \"bytes\": [4, 8], \"us\": [9, 9]}]}",
         "no fitted model for its kind"},
        {HEAD AR ", \"curves\": [{\"kind\": \"all_reduce\", \"ranks\": 2, \"bytes\": [4, -8], \"us\": [9, 9]}]}",
         "'curves[0].bytes[1]' must be a positive number"},
        {HEAD AR ", \"curves\": [{\"kind\": \"all_reduce\", \"ranks\": 2, \"bytes\": [4, 8], \"us\": [9, 9]},"
              "{\"kind\": \"all_reduce\", \"ranks\": 2, \"bytes\": [4, 8], \"us\": [9, 9]}]}",
         "two curves of all-reduce over 2 ranks"},
        {HEAD AR ", " AR "}", "duplicate"},
        {"{\"format\": \"placer-collectives\", \"versio\\n\": 1}", "unknown key 'versio?'"}, /* fuzz: a key with a newline */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        coll_measured m;
        char msg[384] = "";
        cr_assert_eq(coll_file_parse(cases[i].text, strlen(cases[i].text), &m, msg, sizeof msg), PL_ERR_INVALID,
                     "case %zu accepted: %s", i, cases[i].text);
        cr_assert(strstr(msg, cases[i].want), "case %zu: '%s' lacks '%s'", i, msg, cases[i].want);
        cr_assert_null(strchr(msg, '\n'), "case %zu: two lines", i);
    }
    coll_measured m;
    char msg[384] = "";
    const char *ok = HEAD AR "}";
    cr_assert_eq(coll_file_parse(ok, strlen(ok), &m, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert(m.model[COLL_ALL_REDUCE].fitted && !m.model[COLL_ALL_GATHER].fitted);
    cr_assert_eq(m.model[COLL_ALL_REDUCE].busbw, 2e9);
    cr_assert_eq(coll_file_load("/nonexistent/c.json", &m, msg, sizeof msg), PL_ERR_NOT_FOUND);
}
