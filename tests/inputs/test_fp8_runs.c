/*
 * test_fp8_runs.c: the FP8 check set's reader (inputs/fp8_runs.h): the
 * shipped rows read into layouts that use every GPU, or say why they are
 * skipped; a missing file is NOT_FOUND, a malformed one one line.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fp8_runs.h"

Test(fp8_runs, shipped_rows_read_or_say_why) {
    pub_fp8_run *runs = NULL;
    int n = 0, read = 0;
    char msg[512] = "";
    cr_assert_eq(pub_fp8_runs_load(PLACER_SOURCE_DIR "/data/published-runs", &runs, &n, msg, sizeof msg), PL_OK,
                 "%s", msg);
    cr_assert_gt(n, 0);
    for (int i = 0; i < n; i++) {
        const pub_fp8_run *w = &runs[i];
        cr_assert(w->run_id[0]);
        if (w->skipped[0]) continue;
        read++;
        const layout *l = &w->lay;
        cr_assert_eq((int64_t)l->tp * l->pp * l->cp * l->dp, w->gpus, "%s", w->run_id);
        cr_assert(l->prec == PRECISION_FP8 && w->published_tokens > 0 && w->model.n_layers > 0, "%s", w->run_id);
        cr_assert(w->cluster[0], "%s", w->run_id);
    }
    cr_assert_geq(read, 5, "most rows read");
    free(runs);
}

Test(fp8_runs, bad_files_are_refused_with_one_line) {
    pub_fp8_run *runs = NULL;
    int n = 0;
    char msg[512] = "", dir[64], path[128];
    cr_assert_eq(pub_fp8_runs_load("/nonexistent", &runs, &n, msg, sizeof msg), PL_ERR_NOT_FOUND);
    cr_assert_null(runs);
    snprintf(dir, sizeof dir, "/tmp/placer-fp8-%d", (int)getpid());
    mkdir(dir, 0700);
    snprintf(path, sizeof path, "%s/" PUB_FP8_FILE, dir);
    static const char *const bad[] = {"run_id,gpus\nx,8\n", "run_id,model_file\n\"unterminated\n"};
    for (size_t i = 0; i < 2; i++) {
        FILE *f = fopen(path, "w");
        cr_assert_not_null(f);
        fputs(bad[i], f);
        fclose(f);
        msg[0] = 0;
        cr_assert_eq(pub_fp8_runs_load(dir, &runs, &n, msg, sizeof msg), PL_ERR_INVALID, "case %zu", i);
        cr_assert(msg[0] && !strchr(msg, '\n'), "%s", msg);
        cr_assert_null(runs);
    }
    unlink(path);
    rmdir(dir);
}
