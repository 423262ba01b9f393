/* fuzz_transfer.c: libFuzzer target for the parsers of docs/transfer.md: a
 * run's stored arguments as `placer search --from` and `placer train
 * --resume --from` read them (policy/transfer.h), the gain-retained matrix
 * file `placer report --transfer` reads (calib/transfer_report.h), and the
 * device-map names. The first byte picks the parser. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "transfer.h"
#include "transfer_report.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    char *text = malloc(size);
    if (!text) return 0;
    memcpy(text, data + 1, size - 1);
    text[size - 1] = 0;
    char msg[256];
    switch (data[0] % 3) {
    case 0: {
        transfer_run_args ra;
        if (transfer_parse_run_args(text, &ra, msg, sizeof msg) == PL_OK) {
            if (!ra.config[0] || ra.micro_batches < 1 || ra.devices < 0 || ra.devices > 64 || ra.updates < 0) abort();
            if (strlen(ra.mem_cap) >= sizeof ra.mem_cap) abort();
        } else if (!msg[0]) {
            abort(); /* every refusal says why */
        }
        break;
    }
    case 1: {
        transfer_matrix m;
        if (transfer_matrix_parse(text, &m, msg, sizeof msg) == PL_OK) {
            if (m.n < 1) abort();
            for (int i = 0; i < m.n; i++) {
                const transfer_cell *c = &m.cells[i];
                if (!c->graph[0] || !c->source[0] || !c->target[0] || !c->placer[0] || c->seeds < 1) abort();
                if (!c->na && !isfinite(c->gain)) abort();
                if (c->oom < 0 || c->oom > c->seeds) abort();
            }
            transfer_matrix_free(&m);
        } else if (!msg[0] || m.cells || m.n) {
            abort();
        }
        break;
    }
    case 2: {
        transfer_map mp;
        if (transfer_parse_map(text, &mp, msg, sizeof msg) == PL_OK && mp != TRANSFER_MAP_SPEED &&
            mp != TRANSFER_MAP_RANK)
            abort();
        break;
    }
    }
    free(text);
    return 0;
}
