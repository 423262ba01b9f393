/*
 * test_framework_file.c: framework profile files (inputs/framework_file.h):
 * a profile written and read back keeps its figures, every malformed file
 * is refused with one line naming the key, an unknown name is NOT_FOUND.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "framework_file.h"
#include "moe_fit.h"

Test(framework_file, a_profile_round_trips_and_bad_files_are_one_line) {
    framework_profile f, g;
    framework_default(&f);
    snprintf(f.name, sizeof f.name, "mine");
    f.k[FW_K_GEMM] = 0.8125;
    f.k[FW_K_MEMORY] = 2.5;
    f.k[FW_K_ACT] = 1.375;
    f.logits_bytes = 14;
    f.fp32_params = f.grads_lazy = 1;
    f.step_fixed_us = 1500;
    char path[] = "/tmp/placer-fw-XXXXXX", msg[512];
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    cr_assert_eq(framework_write_json(&f, "test", "{\"runs\": 3}", path, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_eq(framework_load(path, &g, msg, sizeof msg), PL_OK, "%s", msg);
    remove(path);
    cr_assert_str_eq(g.name, "mine");
    for (int k = 0; k < FW_K_COUNT; k++) cr_assert(fabs(g.k[k] - f.k[k]) < 1e-9);
    cr_assert(g.fp32_params && g.grads_lazy && fabs(g.step_fixed_us - 1500) < 1e-6 && g.logits_bytes == 14);
    static const struct {
        const char *text, *want;
    } bad[] = {
        {"{\"name\": \"x\", \"bogus\": 1}", "unknown key 'bogus'"},
        {"{\"gemm_scale\": 1}", "missing 'name'"},
        {"{\"name\": \"x\", \"gemm_scale\": 0}", "'gemm_scale' must be a number in (0"},
        {"{\"name\": \"x\", \"act_scale\": \"2\"}", "'act_scale' must be a number"},
        {"{\"name\": \"x\", \"attention\": \"fast\"}", "'attention' must be"},
        {"{\"name\": \"x\", \"fp32_params\": 1}", "'fp32_params' must be true or false"},
        {"{\"name\": \"x\",", "framework file is not valid JSON"},
        {"[1]", "top level must be an object"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        msg[0] = 0;
        cr_assert_eq(framework_parse_json(bad[i].text, strlen(bad[i].text), &g, msg, sizeof msg), PL_ERR_INVALID,
                     "%s", bad[i].text);
        cr_assert(strstr(msg, bad[i].want), "'%s' gave '%s'", bad[i].text, msg);
        cr_assert(!strchr(msg, '\n'));
    }
    cr_assert_eq(framework_load("nope", &g, msg, sizeof msg), PL_ERR_NOT_FOUND);
    cr_assert(strstr(msg, "unknown framework 'nope'"));
}

/* The MoE keys (issue 33): the expert GEMMs' implementation, the
 * permutation, fp32 expert GEMMs, a warning, what paired ops overlap; bad
 * values are one line; the shipped profiles say what their stacks do. */
Test(framework_file, moe_keys_parse_and_the_shipped_profiles_name_their_stacks) {
    framework_profile f;
    char msg[512] = "";
    const char *ok = "{\"name\": \"x\", \"moe_gemm\": \"cublas_grouped\", \"moe_permute\": \"torch\", "
                     "\"moe_fp32_gemm\": true, \"moe_warning\": \"slow\", \"overlap\": [\"tp\"]}";
    cr_assert_eq(framework_parse_json(ok, strlen(ok), &f, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_eq(f.moe_gemm, MOE_IMPL_CUBLAS_GROUPED);
    cr_assert_eq(f.moe_permute_fused, 0);
    cr_assert_eq(f.moe_fp32_gemm, 1);
    cr_assert_str_eq(f.moe_warning, "slow");
    cr_assert_eq(f.overlap, (unsigned)FW_OVERLAP_TP);
    cr_assert(!framework_is_neutral(&f));
    static const struct {
        const char *text, *want;
    } bad[] = {{"{\"name\": \"x\", \"moe_gemm\": \"cutlass\"}", "'moe_gemm' must be"},
               {"{\"name\": \"x\", \"moe_permute\": 1}", "'moe_permute' must be"},
               {"{\"name\": \"x\", \"overlap\": [\"pp\"]}", "'overlap' must be a list"},
               {"{\"name\": \"x\", \"moe_warning\": \"a\\nb\"}", "'moe_warning' must be one line"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cr_assert_eq(framework_parse_json(bad[i].text, strlen(bad[i].text), &f, msg, sizeof msg), PL_ERR_INVALID);
        cr_assert(strstr(msg, bad[i].want), "%zu: %s", i, msg);
    }
    cr_assert_eq(framework_load("torchtitan", &f, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_eq(f.moe_gemm, MOE_IMPL_TORCH_GROUPED_MM);
    cr_assert_eq(f.overlap, 0u);
    cr_assert_eq(framework_load(PLACER_SOURCE_DIR "/data/frameworks/megatron.json", &f, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert(framework_is_neutral(&f), "megatron.json is Megatron's defaults, the MoE ones too");
    cr_assert_eq(framework_load("hf", &f, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert(f.moe_fp32_gemm && f.moe_warning[0]);
}
