/*
 * framework_file.h: framework profiles (framework_profile.h) as JSON
 * data files (jansson). The format, every key and its unit, is documented
 * in docs/frameworks.md; shipped files live in data/frameworks/NAME.json
 * (megatron, torchtitan, hf), and `placer calibrate --layout-runs` writes
 * fitted ones in the same format.
 *
 *   { "name": "hf",                       required, 1..63 characters
 *     "attention": "flash" | "unfused",   default flash
 *     "gemm_scale": 1.0,                  (0, 1.35], default 1
 *     "memory_scale": 1.0,                (0, 20], default 1
 *     "act_scale": 1.0,                   (0, 20], default 1
 *     "logits_bytes": 0,                  0 or [1, 64], bytes per logit element
 *     "weight_copy_bytes": 0,             [0, 8], bytes per parameter
 *     "fp32_params": false,               true: fp32 weights + grads in the model
 *     "grads_lazy": false,                true: gradients allocated during backward
 *     "reserve_factor": 1.0,              [1, 4]
 *     "step_fixed_ms": 0,                 [0, 1e6]
 *     "grad_accum_bytes": 0,              [0, 64] bytes a held gradient element costs each
 *                                         micro-batch after the step's first
 *     "moe_gemm": "cublas_loop",          the expert GEMMs' implementation (inputs/moe_fit.h's
 *                                         names); default: Megatron's by precision
 *     "moe_permute": "fused" | "torch",   default fused
 *     "moe_fp32_gemm": false,             true: expert GEMMs in fp32
 *     "moe_warning": "...",               one line printed when an MoE model is predicted
 *     "overlap": ["ep"],                  what paired ops hide: "ep", "tp" (default ["ep"])
 *     "description": "...", "sources": {...}, "fit": {...}   free text / objects, kept
 *   }                                     for the reader, not read
 * Any other key, a wrong type or a value out of range is one line naming
 * the key.
 */
#ifndef PLACER_INPUTS_FRAMEWORK_FILE_H
#define PLACER_INPUTS_FRAMEWORK_FILE_H

#include <stddef.h>

#include "framework_profile.h"
#include "status.h"

/* Parse a JSON text of n bytes into *out. PL_OK, or PL_ERR_INVALID with a
 * one-line message; *out untouched on failure. */
pl_status framework_parse_json(const char *text, size_t n, framework_profile *out, char *msg, size_t len);

/* Load a profile by name (megatron, torchtitan, hf: NAME.json in the
 * directories searched for frameworks: $PLACER_FRAMEWORKS, the source
 * tree's data/frameworks, ./data/frameworks, data_file.h; "megatron" needs
 * no file) or by path (anything containing '/' or ending ".json").
 * PL_ERR_NOT_FOUND for an unknown name, PL_ERR_IO for an unreadable file,
 * else as framework_parse_json; the message starts with the file's path. */
pl_status framework_load(const char *name_or_path, framework_profile *out, char *msg, size_t len);

/* Write f as a profile file (the format above) with a free-text
 * description (may be NULL) and a "fit" object of the caller's JSON text
 * (may be NULL). PL_ERR_IO when the file cannot be written. */
pl_status framework_write_json(const framework_profile *f, const char *description, const char *fit_json,
                               const char *path, char *msg, size_t len);

#endif
