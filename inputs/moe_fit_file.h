/*
 * moe_fit_file.h: the MoE layer fit (moe_fit.h) from the JSON file that
 * `fit_sweeps.py moe --json` writes (benchmarks/hw/moe_layer_sweep.md has
 * the format):
 *
 *   { "card": "h100",                       required, 1..31 characters
 *     "hbm_gb_s": 3350,                     optional; else known for h100 (3,350) and h200 (4,800)
 *     "grouped_gemm": { IMPL: { PREC: { PASS: { "c_launch_us", "c_expert_us", "eff", "bw_tb_s", "q",
 *                                                "peak_tflops", and the fit's statistics } } } },
 *     "parts": { PART: { PASS: { "c_launch_us", "bw_gb_s" (number or null), "tflops" (number or null),
 *                                 and statistics } } },
 *     "models", "split", "framework_impl", "sources": kept for the reader, not read }
 *
 * IMPL, PREC, PASS and PART are moe_fit.h's names. An unknown key or name,
 * a wrong type, a value out of range (moe_fit_validate) is one line naming
 * it; PL_ERR_INVALID.
 */
#ifndef PLACER_INPUTS_MOE_FIT_FILE_H
#define PLACER_INPUTS_MOE_FIT_FILE_H

#include <stddef.h>

#include "moe_fit.h"
#include "status.h"

/* Parse n bytes of JSON into *out (PL_OK; *out untouched on failure). */
pl_status moe_fit_parse_json(const char *text, size_t n, moe_fit *out, char *msg, size_t len);

/* Read and parse the file at path: PL_ERR_NOT_FOUND / PL_ERR_IO for a file
 * that cannot be read, PL_ERR_INVALID for a bad one ("PATH: MESSAGE"). */
pl_status moe_fit_load(const char *path, moe_fit *out, char *msg, size_t len);

#endif
