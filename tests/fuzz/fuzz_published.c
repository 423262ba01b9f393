/* fuzz_published.c: libFuzzer target for the published-runs CSV reader
 * and row builder (inputs/published_runs.c): any bytes are parsed as CSV; a
 * text that parses is turned into rows of the table the first byte picks,
 * and each row's FLOP count must be positive and finite. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "published_check.h" /* pub_step_flops */
#include "published_runs.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    pub_csv c;
    char msg[256];
    if (pub_csv_parse((const char *)data + 1, size - 1, &c, msg, sizeof msg) != PL_OK) return 0;
    if (c.n_cols < 1 || c.n_rows < 0 || c.n_rows > PUB_CSV_MAX_ROWS) abort();
    for (int r = 0; r < c.n_rows; r++)
        for (int k = 0; k < c.n_cols; k++)
            if (!pub_csv_cell(&c, r, k)) abort();
    pub_row *rows = NULL;
    int n = 0;
    if (pub_rows_from_csv((pub_table)(data[0] % PUB_TABLE_COUNT), &c, &rows, &n, msg, sizeof msg) == PL_OK) {
        if (n != c.n_rows) abort();
        for (int i = 0; i < n; i++) {
            double f = pub_step_flops(&rows[i]);
            if (!(f > 0) || !isfinite(f)) abort();
        }
        free(rows);
    } else if (rows) {
        abort();
    }
    pub_csv_free(&c);
    return 0;
}
