/*
 * backend.c: what every backend shares, above its ops table. Today one
 * helper: the upload of a 16-bit copy (bf16 bits, or fp32 values rounded to
 * bf16 where the backend keeps its copies in fp32) from fp32 host values,
 * used by the engine's parameter load and by data parallelism's all-gather.
 */
#include "backend.h"

#include <stdint.h>
#include <stdlib.h>

#include "nodes.h"

pl_status hw_upload_copy16(hw_backend *be, int d, void *dst, const float *src, int64_t n) {
    void *tmp = malloc((size_t)n * (size_t)be->copy_bytes);
    if (!tmp) return pl_fail(be->err, sizeof be->err, PL_ERR_NOMEM, "out of host memory for the bf16 copy");
    for (int64_t i = 0; i < n; i++) {
        if (be->copy_bytes == 2) ((uint16_t *)tmp)[i] = hw_bf16_bits(src[i]);
        else ((float *)tmp)[i] = hw_bf16_round(src[i]);
    }
    pl_status st = be->ops->upload(be, d, dst, tmp, n * be->copy_bytes);
    free(tmp);
    return st;
}
