/* backend_cuda_stub.c: stands in for the CUDA backend in builds without
 * nvcc, so that asking for a GPU is a clear error, not a link failure. */
#include "backend.h"

pl_status hw_backend_cuda_create(const int *gpus, int n, int strict_fp32, hw_backend **out, char *msg,
                                 size_t len) {
    (void)gpus; (void)n; (void)strict_fp32;
    *out = NULL;
    return pl_fail(msg, len, PL_ERR_UNSUPPORTED,
                   "this placer was built without CUDA (rebuild with -Dcuda=enabled, or use --cpu N)");
}

int hw_cuda_device_count(void) { return 0; }
