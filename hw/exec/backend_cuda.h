/*
 * backend_cuda.h: what the CUDA backend (backend_cuda.cu) gives the CUDA
 * code that drives it from above: the node-kernel context of a logical
 * device, for hw/dist's CUDA files (dist_tp_cuda.cu runs the tensor-parallel
 * node calls on it; dist_nccl.cu puts its collectives on its stream).
 * Only CUDA translation units include it. It sits in hw/exec, not beside the
 * kernels, because it names the backend: the kernels (cuda_nodes.h) know
 * nothing of backends.
 */
#ifndef PLACER_HW_BACKEND_CUDA_H
#define PLACER_HW_BACKEND_CUDA_H

#include "cuda_nodes.h"

extern "C" {
#include "backend.h"
}

/* The node-kernel context of logical device d of the CUDA backend be, with
 * d's GPU made current, and d's GPU ordinal. be must be a CUDA backend
 * (hw_backend_cuda_create) and d one of its devices; the context is be's
 * (borrowed, valid until be is destroyed). */
cu_ctx *cu_backend_ctx(hw_backend *be, int d);
int cu_backend_gpu(hw_backend *be, int d);

#endif
