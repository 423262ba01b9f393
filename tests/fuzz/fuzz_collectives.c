/* fuzz_collectives.c: libFuzzer target for coll_file_parse (collectives
 * files, inputs/coll_file.h, jansson). An accepted file must validate, and
 * every time it gives (each kind, curves on and off, sizes below, inside
 * and above each curve) must be positive and finite; a refusal must
 * explain itself in one line. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "coll_file.h"
#include "coll_measured.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    coll_measured m;
    char msg[512] = "";
    pl_status st = coll_file_parse((const char *)data, size, &m, msg, sizeof msg);
    if (st == PL_OK) {
        if (coll_measured_validate(&m, NULL, 0) != PL_OK) abort();
        for (int use = 0; use < 2; use++) {
            m.use_curves = use;
            for (int i = 0; i < m.n_curves; i++) {
                const coll_curve *c = &m.curves[i];
                const double sizes[4] = {c->bytes[0] / 3, c->bytes[0], sqrt(c->bytes[0] * c->bytes[c->n - 1]),
                                         c->bytes[c->n - 1] * 5};
                for (int j = 0; j < 4; j++) {
                    double us = 0;
                    const char *src = NULL;
                    if (!coll_measured_time(&m, c->kind, c->ranks, sizes[j], &us, &src)) abort();
                    if (!src || !(us >= 0) || isnan(us)) abort();
                }
            }
            for (int k = 0; k < COLL_KIND_COUNT; k++) {
                double us = 0;
                const char *src = NULL;
                if (coll_measured_time(&m, (coll_kind)k, 8, 1e6, &us, &src) != m.model[k].fitted) abort();
            }
        }
    } else if (!msg[0] || strchr(msg, '\n')) {
        abort();
    }
    return 0;
}
