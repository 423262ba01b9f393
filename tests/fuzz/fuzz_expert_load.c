/* fuzz_expert_load.c: libFuzzer target for the expert placement inputs: the
 * load file readers (expert_load_parse_json, expert_load_parse_csv), the
 * placement file (expert_map_file_parse), the generator's settings
 * (expert_gen_params_parse) and the learned placer's parameters
 * (expert_model_parse), the first byte choosing which. An accepted load must
 * hold finite counts >= 0 of its shape and sampled ids in range; an accepted
 * placement a valid map (every expert a slot) and load factors >= 1; accepted
 * settings must pass their own check; a refusal must explain itself in one
 * line and leave nothing behind. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "expert_gen.h"
#include "expert_load.h"
#include "expert_map_file.h"
#include "expert_model_file.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    char msg[512] = "";
    const char *text = (const char *)data + 1;
    const size_t n = size - 1;
    pl_status st;
    switch (data[0] % 5) {
    case 0:
    case 1: {
        expert_load *ld = NULL;
        st = data[0] % 5 ? expert_load_parse_csv(text, n, &ld, msg, sizeof msg)
                         : expert_load_parse_json(text, n, &ld, msg, sizeof msg);
        if (st == PL_OK) {
            if (!ld || ld->n_windows < 1 || ld->n_layers < 1 || ld->n_experts < 1) abort();
            const size_t cells = (size_t)ld->n_windows * ld->n_layers * ld->n_experts;
            for (size_t i = 0; i < cells; i++)
                if (!isfinite(ld->count[i]) || ld->count[i] < 0) abort();
            for (int w = 0; w < ld->n_windows; w++)
                for (int l = 0; l < ld->n_layers; l++) {
                    const int16_t *s = expert_load_samples_c(ld, w, l);
                    for (int i = 0; s && i < ld->n_samples * ld->sample_k; i++)
                        if (s[i] < -1 || s[i] >= ld->n_experts) abort();
                }
        } else if (ld) {
            abort();
        }
        expert_load_destroy(ld);
        break;
    }
    case 2: {
        expert_map_file f;
        st = expert_map_file_parse(text, n, &f, msg, sizeof msg);
        if (st == PL_OK) {
            if (f.map && expert_map_validate(f.map, msg, sizeof msg) != PL_OK) abort();
            for (int l = 0; f.busiest_over_mean && l < f.n_layers; l++)
                if (!(f.busiest_over_mean[l] >= 1.0)) abort();
            expert_map_file_free(&f);
        } else if (f.map || f.gpu_load || f.busiest_over_mean) {
            abort();
        }
        break;
    }
    case 3: {
        expert_gen_params p;
        st = expert_gen_params_parse(text, n, &p, msg, sizeof msg);
        if (st == PL_OK && expert_gen_params_check(&p, msg, sizeof msg) != PL_OK) abort();
        break;
    }
    default: {
        expert_model_params m;
        st = expert_model_parse(text, n, &m, msg, sizeof msg);
        if (st == PL_OK)
            for (int i = 0; i < EXPERT_MODEL_HISTORY; i++)
                if (!(m.scen_weight[i] >= 0)) abort();
        break;
    }
    }
    if (st != PL_OK && (!msg[0] || strchr(msg, '\n'))) abort();
    return 0;
}
