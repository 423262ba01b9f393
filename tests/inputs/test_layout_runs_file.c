/*
 * test_layout_runs_file.c: the CSV of measured layout runs
 * (inputs/layout_runs_file.h): every malformed file is one line naming the
 * problem, and a good row reads with its units converted.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "layout_runs_file.h"

#define HDR "run,model,cluster,gpus,layout,seq,framework,step_ms,peak_gib\n"
#define ROW "a,\"llama-3-8b,layers=2\",h200x2,1,\"mbs=1,gbs=1\",1024,hf,10,5\n"

Test(layout_runs_file, bad_files_are_one_line_naming_the_problem) {
    static const struct {
        const char *text, *want;
    } bad[] = {
        {"run,model,cluster,gpus,layout,seq,framework,peak_gib\n" "a,m,c,1,l,1,hf,5\n", "missing column 'step_<unit>'"},
        {"model,cluster,gpus,layout,seq,step_ms\n" "m,c,1,l,1,5\n", "missing column 'framework'"},
        {"run,model,cluster,gpus,layout,seq,framework,step_min\n" "a,m,c,1,l,1,hf,5\n", "unknown unit 'min'"},
        {"run,model,cluster,gpus,layout,seq,framework,step_ms,peak_furlongs\n" "a,m,c,1,l,1,hf,5,5\n",
         "unknown unit 'furlongs'"},
        {HDR "a,m,c,1,l,1,hf,5\n", "8 fields, the header has 9"},
        {"run,model,cluster,gpus,layout,seq,framework,step_ms,colour\n" "a,m,c,1,l,1,hf,5,red\n", "unknown column 'colour'"},
        {"run,model,cluster,gpus,layout,seq,framework,step_ms,step_us\n" "a,m,c,1,l,1,hf,5,5\n", "appears twice"},
        {HDR "a,m,c,1,l,1,hf,fast,5\n", "step time must be a positive number"},
        {HDR "a,m,c,0,l,1,hf,5,5\n", "gpus must be a positive integer"},
        {HDR, "no runs"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        layout_run *runs = (layout_run *)1;
        int n = 7;
        char msg[512] = "";
        cr_assert_eq(layout_runs_parse(bad[i].text, strlen(bad[i].text), &runs, &n, msg, sizeof msg), PL_ERR_INVALID,
                     "case %zu", i);
        cr_assert(strstr(msg, bad[i].want), "case %zu gave '%s'", i, msg);
        cr_assert(!strchr(msg, '\n'));
        cr_assert_null(runs);
        cr_assert_eq(n, 0);
    }
    layout_run *runs = NULL;
    int n = 0;
    char msg[512];
    cr_assert_eq(layout_runs_parse(HDR ROW, strlen(HDR ROW), &runs, &n, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_eq(n, 1);
    cr_assert_str_eq(runs[0].model, "llama-3-8b,layers=2");
    cr_assert(fabs(runs[0].step_us - 10e3) < 1e-9 && fabs(runs[0].peak_bytes - 5.0 * 1073741824.0) < 1);
    free(runs);
}
