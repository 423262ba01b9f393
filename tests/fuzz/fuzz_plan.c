/* fuzz_plan.c: libFuzzer target for `placer plan`'s own text inputs: the
 * --fix list (plan_parse_fixed, its stack keys dispatcher= and mem=
 * included), the --export format name, and the
 * exports of layouts built from the input's bytes (chunk counts, the model
 * a GPT-2 or a cut Llama 3 8B, the order and FP8 recipe included), each
 * built into memory: a chunk without layers in the middle must be refused,
 * a refusal is one line, a JSON file of an export must parse back, and
 * the search's filter must agree with the exports' refusals. */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "export_plan.h"
#include "plan.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    char msg[256];
    if (data[0] % 3 < 2) {
        char *text = malloc(size);
        if (!text) return 0;
        memcpy(text, data + 1, size - 1);
        text[size - 1] = 0;
        if (data[0] % 3 == 0) {
            plan_options o;
            plan_options_default(&o);
            if (plan_parse_fixed(text, &o, msg, sizeof msg) == PL_OK) {
                if (o.fix_tp < 0 || o.fix_cp < 0 || o.fix_pp < 0 || o.fix_vp < 0 || o.fix_dp < 0 || o.fix_mbs < 0) abort();
                if (o.fix_recompute < -1 || o.fix_recompute > RECOMPUTE_FULL || o.fix_zero < -1 || o.fix_zero > ZERO_FSDP)
                    abort();
                if (o.fix_dispatcher < -1 || o.fix_dispatcher > MOE_DISPATCH_FLEX || o.fix_mem >> LAYOUT_MEM_COUNT) abort();
            }
        } else {
            plan_export_format f;
            if (plan_export_parse_format(text, &f, msg, sizeof msg) == PL_OK && (f < 0 || f >= PLAN_EXPORT_COUNT)) abort();
        }
        free(text);
        return 0;
    }
    /* a layout from the bytes: dims, then one byte per chunk */
    if (size < 10) return 0;
    gpt_config cfg;
    if (gpt_config_parse("gpt12", &cfg, msg, sizeof msg) != PL_OK) abort();
    if (data[1] & 0x80) { /* Llama 3 8B's shapes: a model torchtitan has */
        cfg.d_model = 4096, cfg.n_heads = 32, cfg.n_kv_heads = 8, cfg.d_ff = 14336, cfg.vocab = 128256;
        cfg.norm = NORM_RMSNORM, cfg.mlp = MLP_SWIGLU, cfg.pos = POS_ROTARY, cfg.no_bias = 1, cfg.tied = 0;
    }
    layout l;
    layout_default(&l);
    l.tp = 1 + data[1] % 8;
    l.sp = data[2] & 1;
    l.cp = 1 + data[3] % 4;
    l.pp = 1 + data[4] % 6;
    l.vp = 1 + data[5] % 3;
    l.dp = 1 + data[6] % 8;
    l.zero = (zero_kind)(data[7] % 5);
    l.recompute = (recompute_kind)(data[8] % 3);
    l.prec = (precision)(data[9] % PRECISION_COUNT);
    l.sched = (schedule_order)(data[5] / 3 % SCHED_ORDER_COUNT);
    if (l.sched == SCHED_GPIPE || l.sched == SCHED_INTERLEAVED) l.sched = SCHED_1F1B;
    l.fp8 = (fp8_recipe)(data[4] / 6 % FP8_RECIPE_COUNT);
    l.micro_batch = 1 + data[2] % 4;
    l.global_batch = l.dp * l.micro_batch * (1 + data[3] % 4);
    int ch[64];
    const int C = l.pp * l.vp;
    int sum = 0;
    for (int c = 0; c < C; c++) {
        ch[c] = 10 + c < (int)size ? data[10 + c] % 5 : 1;
        sum += ch[c];
    }
    cfg.n_layers = sum > 0 ? sum : 1;
    int bad_chunks = sum <= 0;
    for (int c = 0; c < C; c++) bad_chunks |= ch[c] < 1 && (C == 1 || (c > 0 && c < C - 1));
    for (int f = 0; f < PLAN_EXPORT_COUNT; f++) {
        layout_result r;
        memset(&r, 0, sizeof r);
        r.step_us = 1000;
        plan_export_in in = {&cfg, NULL, "fuzz", &l, ch, &r, PLAN_FRAMEWORK_ANY};
        plan_export_files out;
        pl_status st = plan_export_build((plan_export_format)f, &in, &out, msg, sizeof msg);
        if (st == PL_OK && bad_chunks) abort(); /* a middle chunk without layers must be refused */
        if (st != PL_OK && (!msg[0] || strchr(msg, '\n'))) abort();
        const plan_framework fw = plan_export_framework((plan_export_format)f);
        if (st == PL_OK && !bad_chunks && !plan_framework_runs(fw, &cfg, &l)) abort(); /* the filter agrees */
        for (int i = 0; st == PL_OK && i < out.n; i++) {
            const size_t n = strlen(out.name[i]);
            if (n < 5 || strcmp(out.name[i] + n - 5, ".json")) continue;
            json_error_t err;
            json_t *j = json_loads(out.text[i], 0, &err);
            if (!j) abort();
            json_decref(j);
        }
        plan_export_files_free(&out);
    }
    return 0;
}
