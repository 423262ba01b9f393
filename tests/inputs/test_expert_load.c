/*
 * test_expert_load.c: the expert load files (inputs/expert_load.h) in
 * SGLang's and vLLM's fields and CSV, the placement files
 * (inputs/expert_map_file.h), the learned placer's parameter files and the
 * load generator (inputs/expert_gen.h): what each format reads into, what
 * each bad file is told, and the generator's determinism, shape and
 * skew order across its shipped settings.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "expert_gen.h"
#include "expert_load.h"
#include "expert_map_file.h"
#include "expert_model_file.h"

static expert_load *json_ok(const char *text) {
    expert_load *ld = NULL;
    char msg[512] = "";
    cr_assert_eq(expert_load_parse_json(text, strlen(text), &ld, msg, sizeof msg), PL_OK, "%s", msg);
    return ld;
}

static void json_bad(const char *text, const char *want) {
    expert_load *ld = NULL;
    char msg[512] = "";
    cr_assert_eq(expert_load_parse_json(text, strlen(text), &ld, msg, sizeof msg), PL_ERR_INVALID, "%s accepted", text);
    cr_assert_null(ld);
    cr_assert(strstr(msg, want), "'%s' says '%s', not '%s'", text, msg, want);
    cr_assert_null(strchr(msg, '\n'));
}

static void csv_bad(const char *text, const char *want) {
    expert_load *ld = NULL;
    char msg[512] = "";
    cr_assert_eq(expert_load_parse_csv(text, strlen(text), &ld, msg, sizeof msg), PL_ERR_INVALID, "%s accepted", text);
    cr_assert_null(ld);
    cr_assert(strstr(msg, want), "'%s' says '%s', not '%s'", text, msg, want);
}

Test(expert_load, sglang_logical_count_reads_windows_layers_experts) {
    expert_load *ld = json_ok("{\"logical_count\": [[[1,2,3],[4,5,6]],[[7,8,9],[0,0,1]]], \"rank\": 0}");
    cr_assert_eq(ld->n_windows, 2);
    cr_assert_eq(ld->n_layers, 2);
    cr_assert_eq(ld->n_experts, 3);
    cr_assert_eq(expert_load_row_c(ld, 1, 0)[2], 9.0);
    cr_assert_eq(expert_load_row_c(ld, 0, 1)[0], 4.0);
    cr_assert_str_eq(ld->source, "logical_count");
    cr_assert_null(expert_load_samples_c(ld, 0, 0));
    expert_load_destroy(ld);
    /* one window: [layers][experts] */
    ld = json_ok("{\"logical_count\": [[1,2],[3,4],[5,6]]}");
    cr_assert_eq(ld->n_windows, 1);
    cr_assert_eq(ld->n_layers, 3);
    cr_assert_eq(ld->n_experts, 2);
    expert_load_destroy(ld);
}

Test(expert_load, vllm_slots_fold_onto_logical_experts_through_the_map) {
    /* 2 experts on 3 slots: slot 2 replicates expert 0 */
    expert_load *ld = json_ok("{\"expert_load_window\": [[[10, 4, 6]], [[1, 1, 1]]], "
                              "\"physical_to_logical_map\": [[0, 1, 0]]}");
    cr_assert_eq(ld->n_experts, 2);
    cr_assert_eq(ld->n_windows, 2);
    cr_assert_eq(expert_load_row_c(ld, 0, 0)[0], 16.0);
    cr_assert_eq(expert_load_row_c(ld, 0, 0)[1], 4.0);
    cr_assert_eq(expert_load_row_c(ld, 1, 0)[0], 2.0);
    cr_assert_str_eq(ld->source, "expert_load_window");
    expert_load_destroy(ld);
    ld = json_ok("{\"expert_load_pass\": [[3, 5], [1, 1]]}");
    cr_assert_eq(ld->n_windows, 1);
    cr_assert_eq(ld->n_layers, 2);
    expert_load_destroy(ld);
}

Test(expert_load, sampled_tokens_read_per_window_or_shared) {
    expert_load *ld = json_ok("{\"logical_count\": [[[1,1,1,1]],[[1,1,1,1]]], \"top_k\": 2, "
                              "\"topk_ids_of_layer\": [[[0,1],[2,-1],[3,0]]]}");
    cr_assert_eq(ld->top_k, 2);
    cr_assert_eq(ld->n_samples, 3);
    cr_assert_eq(ld->sample_k, 2);
    cr_assert_eq(ld->samples_per_window, 0);
    cr_assert_eq(expert_load_samples_c(ld, 1, 0)[2], 2); /* the one set serves every window */
    cr_assert_eq(expert_load_samples_c(ld, 0, 0)[3], -1);
    expert_load_destroy(ld);
}

Test(expert_load, bad_json_files_are_one_line_naming_the_entry) {
    json_bad("{\"logical_count\": [[1,2,3],[4,5]]}", "logical_count[1] has 2 entries where the first has 3 (wrong shape)");
    json_bad("{\"logical_count\": [[[1,2]],[[3,-4]]]}", "logical_count[1][0][1] is -4; counts must be finite and >= 0");
    json_bad("{\"logical_count\": [[1,2]], \"extra\": 1}", "unknown key 'extra'");
    json_bad("{\"logical_count\": [[1]], \"expert_load_pass\": [[1]]}", "give one");
    json_bad("{\"rank\": 0}", "no counts");
    json_bad("{\"logical_count\": [1,2,3]}", "wrong shape");
    json_bad("{\"logical_count\": [[1,\"x\"]]}", "logical_count[0][1] is not a number");
    json_bad("{\"logical_count\": [[1,2]], \"topk_ids_of_layer\": [[[0,5]]]}", "ids must be -1 (padding) or 0..1");
    json_bad("{\"logical_count\": [[1,2]], \"topk_ids_of_layer\": [[[0]],[[1]]]}", "wrong shape");
    json_bad("{\"expert_load_window\": [[[1,2]]], \"physical_to_logical_map\": [[0,1,1]]}", "wrong shape");
    json_bad("{\"logical_count\": [[1,2]], \"top_k\": 3}", "top_k must be an integer");
    json_bad("not json", "not valid JSON");
}

Test(expert_load, csv_reads_every_cell_once) {
    const char *csv = "window,layer,expert,count\n0,0,0,5\n0,0,1,3\r\n1,0,0,2\n1,0,1,7\n";
    expert_load *ld = NULL;
    char msg[512] = "";
    cr_assert_eq(expert_load_parse_csv(csv, strlen(csv), &ld, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_eq(ld->n_windows, 2);
    cr_assert_eq(ld->n_layers, 1);
    cr_assert_eq(ld->n_experts, 2);
    cr_assert_eq(expert_load_row_c(ld, 1, 0)[1], 7.0);
    cr_assert_str_eq(ld->source, "csv");
    expert_load_destroy(ld);
    csv_bad("layer,window,expert,count\n0,0,0,1\n", "the first line must be 'window,layer,expert,count'");
    csv_bad("window,layer,expert,count\n0,0,0,1\n0,0,0,2\n", "rows for 1 windows x 1 layers x 1 experts");
    csv_bad("window,layer,expert,count\n0,0,0,1\n0,0,1,1\n0,0,1,2\n0,1,0,3\n", "window 0 layer 0 expert 1 appears twice");
    csv_bad("window,layer,expert,count\n0,0,0,1\n0,0,2,1\n", "every cell must appear once (wrong shape)");
    csv_bad("window,layer,expert,count\n0,0,0,-1\n", "must be a finite number >= 0");
    csv_bad("window,layer,expert,count\n0,0\n", "want 4 fields");
    csv_bad("window,layer,expert,count\n", "no rows");
}

Test(expert_load, written_json_reads_back_the_same) {
    expert_gen_params p;
    expert_gen_params_default(&p);
    p.layers = 2, p.experts = 16, p.groups = 4, p.topk_groups = 2, p.top_k = 4, p.topics = 2, p.route_tokens = 64;
    p.samples = 8, p.popularity_sd[0] = p.popularity_sd[1] = 0.3;
    expert_load *a = NULL, *b = NULL;
    char msg[512] = "", path[] = "/tmp/placer-eload-XXXXXX";
    cr_assert_eq(expert_gen_run(&p, 3, 5, &a, msg, sizeof msg), PL_OK, "%s", msg);
    const int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    FILE *f = fdopen(fd, "w");
    cr_assert_eq(expert_load_write_json(a, f), PL_OK);
    fclose(f);
    cr_assert_eq(expert_load_read(path, &b, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_eq(b->n_windows, 3);
    cr_assert_eq(b->n_samples, 8);
    cr_assert_eq(b->samples_per_window, 1);
    cr_assert_eq(b->top_k, 4);
    for (int w = 0; w < 3; w++)
        for (int l = 0; l < 2; l++) {
            cr_assert_arr_eq(expert_load_row_c(a, w, l), expert_load_row_c(b, w, l), 16 * sizeof(double));
            cr_assert_arr_eq(expert_load_samples_c(a, w, l), expert_load_samples_c(b, w, l), 8 * 4 * sizeof(int16_t));
        }
    expert_load_destroy(a);
    expert_load_destroy(b);
    unlink(path);
    /* a bad file's message starts with its path */
    cr_assert_eq(expert_load_read("/nonexistent/load.json", &b, msg, sizeof msg), PL_ERR_NOT_FOUND);
}

Test(expert_gen, deterministic_in_the_seed_and_routes_top_k_in_top_groups) {
    expert_gen_params p;
    char msg[512] = "";
    cr_assert_eq(expert_gen_params_load("inference-skew", &p, msg, sizeof msg), PL_OK, "%s", msg);
    p.layers = 3;
    p.route_tokens = 128;
    expert_load *a = NULL, *b = NULL, *c = NULL;
    cr_assert_eq(expert_gen_run(&p, 3, 11, &a, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_eq(expert_gen_run(&p, 3, 11, &b, msg, sizeof msg), PL_OK);
    cr_assert_eq(expert_gen_run(&p, 3, 12, &c, msg, sizeof msg), PL_OK);
    cr_assert_arr_eq(a->count, b->count, sizeof(double) * 3 * 3 * 256);
    cr_assert(memcmp(a->count, c->count, sizeof(double) * 3 * 3 * 256) != 0, "another seed, other loads");
    /* each window routes tokens_per_window x top_k copies (up to the counting noise) */
    double tot = 0;
    for (int e = 0; e < 256; e++) tot += expert_load_row_c(a, 1, 2)[e];
    cr_assert(fabs(tot / (p.tokens_per_window * p.top_k) - 1) < 1e-3, "%g copies", tot);
    /* a sampled token's 8 experts are distinct and lie in at most 4 of the 8 groups of 32 */
    const int16_t *s = expert_load_samples_c(a, 2, 1);
    for (int t = 0; t < a->n_samples; t++) {
        int groups[8] = {0}, ng = 0;
        for (int j = 0; j < 8; j++) {
            const int e = s[t * 8 + j];
            cr_assert(e >= 0 && e < 256);
            for (int i = 0; i < j; i++) cr_assert_neq(s[t * 8 + i], e);
            if (!groups[e / 32]++) ng++;
        }
        cr_assert_leq(ng, 4, "token %d reaches %d groups", t, ng);
    }
    expert_load_destroy(a);
    expert_load_destroy(b);
    expert_load_destroy(c);
}

Test(expert_gen, inference_settings_skew_more_than_training) {
    char msg[512] = "";
    double med[2];
    const char *names[2] = {"training-balanced", "inference-skew"};
    for (int i = 0; i < 2; i++) {
        expert_gen_params p;
        cr_assert_eq(expert_gen_params_load(names[i], &p, msg, sizeof msg), PL_OK, "%s", msg);
        p.layers = 6, p.route_tokens = 256;
        expert_load *ld = NULL;
        cr_assert_eq(expert_gen_run(&p, 2, 3, &ld, msg, sizeof msg), PL_OK, "%s", msg);
        double cv = 0, mm = 0, sum = 0;
        for (int l = 0; l < 6; l++) {
            expert_load_row_stats(ld, 1, l, &cv, &mm);
            cr_assert(mm >= 1.0 && cv > 0);
            sum += cv;
        }
        med[i] = sum / 6;
        expert_load_destroy(ld);
    }
    cr_assert_gt(med[1], 2 * med[0], "inference CV %.3f, training %.3f", med[1], med[0]);
}

Test(expert_gen, bad_settings_are_refused) {
    expert_gen_params p;
    char msg[512] = "";
    const char *bad[][2] = {{"{\"experts\": 250}", "groups (8) must divide experts (250)"},
                            {"{\"topk_groups\": 9}", "topk_groups must be 1..groups"},
                            {"{\"shift_prob\": 2}", "shift_prob must be in 0..1"},
                            {"{\"popularity_sd\": [1]}", "must be a number or [least, most]"},
                            {"{\"nope\": 1}", "unknown key 'nope'"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cr_assert_eq(expert_gen_params_parse(bad[i][0], strlen(bad[i][0]), &p, msg, sizeof msg), PL_ERR_INVALID);
        cr_assert(strstr(msg, bad[i][1]), "'%s' says '%s'", bad[i][0], msg);
    }
    cr_assert_eq(expert_gen_params_load("no-such-settings", &p, msg, sizeof msg), PL_ERR_INVALID);
    cr_assert(strstr(msg, "inference-skew"), "the shipped names are listed: %s", msg);
}

Test(expert_map_file, placement_files_read_or_say_why) {
    const char *good = "{\"phy2log\": [[0,1,2,0],[1,2,0,1]], \"gpus\": 2, \"gpus_per_node\": 2, "
                       "\"logcnt\": [[2,1,1],[1,2,1]], \"gpu_load\": [[3,1],[2,2]], \"placer\": \"search\"}";
    expert_map_file f;
    char msg[512] = "";
    cr_assert_eq(expert_map_file_parse(good, strlen(good), &f, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_eq(f.n_layers, 2);
    cr_assert_eq(f.n_gpus, 2);
    cr_assert_eq(f.map->n_experts, 3);
    cr_assert(fabs(f.busiest_over_mean[0] - 1.5) < 1e-12 && fabs(f.busiest_over_mean[1] - 1.0) < 1e-12);
    expert_map_file_free(&f);
    /* SGLang's own file: the slots alone, with the GPU count from slots_per_gpu */
    const char *sg = "{\"physical_to_logical_map\": [[0,1,1,0]], \"slots_per_gpu\": 2}";
    cr_assert_eq(expert_map_file_parse(sg, strlen(sg), &f, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_eq(f.n_gpus, 2);
    cr_assert_null(f.busiest_over_mean);
    expert_map_file_free(&f);
    const char *bad[][2] = {
        {"{\"phy2log\": [[0,2,2,0]], \"gpus\": 2}", "layer 0: expert 1 has no slot"},
        {"{\"phy2log\": [[0,1,2]], \"gpus\": 2}", "3 slots are not divisible by 2 GPUs"},
        {"{\"phy2log\": [[0,1]]}", "'gpus' is required"},
        {"{\"phy2log\": [[0,1]], \"gpus\": 1, \"logcnt\": [[2,1]]}", "logcnt[0][0] is 2 but the slots hold 1"},
        {"{\"busiest_over_mean\": [1.2, 0.9]}", "busiest_over_mean[1] must be a number >= 1"},
        {"{\"gpu_load\": [[1,-2]]}", "loads must be >= 0"},
        {"{\"gpus\": 4}", "no placement"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cr_assert_eq(expert_map_file_parse(bad[i][0], strlen(bad[i][0]), &f, msg, sizeof msg), PL_ERR_INVALID, "%s",
                     bad[i][0]);
        cr_assert(strstr(msg, bad[i][1]), "'%s' says '%s'", bad[i][0], msg);
        cr_assert_null(f.map);
    }
}

Test(expert_model_file, parameters_read_and_write_back) {
    expert_model_params m;
    char msg[512] = "";
    cr_assert_eq(expert_model_load("learned-deepseek-v3", &m, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert(m.scen_weight[0] >= 0 && m.copies_scale >= 0);
    char *buf = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    cr_assert_eq(expert_model_write(&m, "x", NULL, "t", f), PL_OK);
    fclose(f);
    expert_model_params b;
    cr_assert_eq(expert_model_parse(buf, n, &b, msg, sizeof msg), PL_OK, "%s", msg);
    for (int i = 0; i < EXPERT_MODEL_FEATURES; i++) cr_assert(fabs(b.w[i] - m.w[i]) < 1e-5 * (1 + fabs(m.w[i])));
    free(buf);
    const char *bad = "{\"w\": [1,0,0], \"scen_weight\": [1,0,0,0]}";
    cr_assert_eq(expert_model_parse(bad, strlen(bad), &b, msg, sizeof msg), PL_ERR_INVALID);
    cr_assert(strstr(msg, "'w' must be an array of 8 numbers"), "%s", msg);
}
