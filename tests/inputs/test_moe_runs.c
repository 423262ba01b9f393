/*
 * test_moe_runs.c: the MoE check set's reader (inputs/moe_runs.h): the
 * shipped rows read into a model, a cluster cut to the row's GPUs and a
 * layout that validates, or say why not; NeMo's rows carry their token drop
 * (capacity 1.0, padded); a file without the key columns is
 * one line.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "moe_runs.h"

Test(moe_runs, shipped_rows_read_or_say_why) {
    pub_moe_run *runs = NULL;
    int n = 0, read = 0, found_ep32 = 0, n_nemo = 0;
    char msg[512] = "";
    cr_assert_eq(pub_moe_runs_load(NULL, NULL, &runs, &n, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_eq(n, 27);
    for (int i = 0; i < n; i++) {
        const pub_moe_run *w = &runs[i];
        if (w->why[0]) continue;
        read++;
        cr_assert_eq(cluster_n_gpus(&w->cl), w->gpus, "%s: the cluster cut to the row's GPUs", w->run_id);
        cr_assert_eq(layout_validate(&w->lay, &w->model, w->gpus, msg, sizeof msg), PL_OK, "%s: %s", w->run_id, msg);
        cr_assert(w->tokens_per_s > 0 && w->model.seq_len == w->seq, "%s", w->run_id);
        if (!strcmp(w->run_id, "mcore-qwen3-235b-h100-256-bf16-ep32")) {
            found_ep32 = 1;
            cr_assert(w->lay.ep == 32 && w->lay.dispatcher == MOE_DISPATCH_FLEX && w->gpus == 256);
        }
        /* NeMo's performance-mode recipes drop tokens at capacity 1.0, padded; the Megatron-Core
         * rows are dropless */
        if (!strncmp(w->run_id, "nemo", 4)) {
            n_nemo++;
            cr_assert_float_eq(w->capacity_factor, 1.0, 1e-12, "%s", w->run_id);
        } else {
            cr_assert_eq(w->capacity_factor, 0.0, "%s", w->run_id);
        }
    }
    cr_assert_geq(read, 5);
    cr_assert(found_ep32);
    cr_assert_eq(n_nemo, 5);
    free(runs);
}

Test(moe_runs, a_file_without_the_key_columns_is_one_line) {
    char dir[] = "/tmp/placer-moe-csv-XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    char path[256], msg[512] = "";
    snprintf(path, sizeof path, "%s/bad.csv", dir);
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    fputs("run,gpus\nx,8\n", f);
    fclose(f);
    pub_moe_run *runs = NULL;
    int n = 0;
    cr_assert_eq(pub_moe_runs_load(path, NULL, &runs, &n, msg, sizeof msg), PL_ERR_INVALID);
    cr_assert(strstr(msg, "no run_id or tokens_per_s_per_gpu column") && !strchr(msg, '\n'), "%s", msg);
    cr_assert_null(runs);
    remove(path);
    rmdir(dir);
}
