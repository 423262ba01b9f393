/* fuzz_schedule.c: libFuzzer target for the schedule, micro-batch, memory
 * cap, byte-size and model-config parsers. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "graph.h"
#include "schedule.h"
#include "util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    char *text = malloc(size);
    if (!text) return 0;
    memcpy(text, data + 1, size - 1);
    text[size - 1] = 0;
    char msg[256];
    switch (data[0] % 5) {
    case 0: {
        schedule_order o;
        if (schedule_parse_order(text, &o, msg, sizeof msg) == PL_OK && o >= SCHED_ORDER_COUNT) abort();
        break;
    }
    case 1: {
        int m = 0;
        if (schedule_parse_micro_batches(text, &m, msg, sizeof msg) == PL_OK) {
            if (m <= 0) abort();
            schedule s = schedule_make(m, SCHED_1F1B);
            if (schedule_validate(&s, 16, msg, sizeof msg) == PL_OK && 16 % m) abort();
        }
        break;
    }
    case 2: {
        int64_t b = 0;
        if (pl_parse_mem_cap(text, 150000000000LL, &b, msg, sizeof msg) == PL_OK && b <= 0) abort();
        break;
    }
    case 3: {
        int64_t b = 0;
        if (pl_parse_bytes(text, &b, msg, sizeof msg) == PL_OK && b <= 0) abort();
        break;
    }
    case 4: {
        gpt_config c;
        if (gpt_config_parse(text, &c, msg, sizeof msg) == PL_OK) {
            if (gpt_config_validate(&c, NULL, 0) != PL_OK) abort();
            /* building a huge config is legal but slow: only build small ones */
            if ((int64_t)c.n_layers * 6 < 5000) {
                graph *g = NULL;
                if (graph_build_gpt(&c, &g, msg, sizeof msg) == PL_OK) {
                    if (g->n_nodes != 4 + 6 * c.n_layers) abort();
                    graph_destroy(g);
                }
            }
        }
        break;
    }
    }
    free(text);
    return 0;
}
