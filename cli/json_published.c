/*
 * json_published.c: the published check sets as JSON (cli_json.h): the
 * object `placer check-published --json` prints (Megatron's Tables 1 and 2,
 * Llama 3's Table 4, the FP8 section), the one `--moe --json` prints, and
 * `placer serve`'s GET /api/published, which answers both in one object.
 */
#include "cli_json.h"

#include "cli_print.h"
#include "util.h"

void cli_json_published(FILE *out, const pub_check_options *o, const pub_check_result *r, const pub_fp8_result *f) {
    fprintf(out, "{\"dir\": ");
    pl_json_string(out, o->dir);
    fprintf(out, ", \"gemm_efficiency\": %.6f, \"zero3_gather_scale\": %.6f, \"collective_scale\": %.6f, "
           "\"fitted\": %s,\n", r->gemm_efficiency, r->zero3_gather_scale, r->collective_scale, o->fit ? "true" : "false");
    fprintf(out, " \"fit_rows\": [");
    pl_json_string(out, PUB_FIT_ROW_GEMM);
    fprintf(out, ", ");
    pl_json_string(out, PUB_FIT_ROW_ZERO3);
    fprintf(out, "],\n \"rows\": [");
    int first = 1;
    for (int i = 0; i < PUB_TABLE_COUNT; i++)
        for (int j = 0; j < r->n_rows[i]; j++) {
            const pub_row *w = &r->rows[i][j];
            const pub_row_result *x = &r->res[i][j];
            fprintf(out, "%s\n  {\"label\": ", first ? "" : ",");
            first = 0;
            pl_json_string(out, w->label);
            fprintf(out, ", \"table\": \"%s\", \"gpus\": %lld, \"published_tflops\": %.3f, \"predicted_tflops\": %.3f, "
                   "\"error\": %.6f, \"fitted\": %s, \"step_s\": %.6f, \"mem_peak_bytes\": %lld, \"oom\": %s",
                   pub_table_file(w->table), (long long)w->gpus, w->published_tflops, x->tflops, x->err,
                   x->fitted ? "true" : "false", x->step_us * 1e-6, (long long)x->mem_peak, x->oom ? "true" : "false");
            fprintf(out, ", \"mem_verdict\": \"%s\", \"mem_why\": ", x->oom ? "OOM, NOT as published" : "fits, as published");
            if (x->mem_why) pl_json_string(out, x->mem_why);
            else fputs("null", out);
            fprintf(out, ", \"parts_s\": ");
            cli_print_parts_json(out, x->res.parts_us, 1e-6, 6);
            fprintf(out, "}");
        }
    fprintf(out, "\n ],\n \"mean_abs_error\": %.6f, \"max_abs_error\": %.6f, \"rows_scored\": %d,\n", r->mean_abs_error,
           r->max_abs_error, r->rows_scored);
    fprintf(out, " \"table2_pairs\": [");
    for (int k = 0; k < r->n_pairs; k++) {
        fprintf(out, "%s\n  {\"zero3\": ", k ? "," : "");
        pl_json_string(out, r->rows[PUB_T2][r->pairs[k][0]].label);
        fprintf(out, ", \"ptd_p\": ");
        pl_json_string(out, r->rows[PUB_T2][r->pairs[k][1]].label);
        fprintf(out, ", \"same_order\": %s}", r->same_order[k] ? "true" : "false");
    }
    fprintf(out, "\n ], \"table2_same_order\": %d, \"table2_pairs_count\": %d,\n \"memory\": [", r->n_same, r->n_pairs);
    for (int k = 0; k < r->n_mem; k++) {
        const pub_mem_check *m = &r->mem[k];
        fprintf(out, "%s\n  {\"check\": ", k ? "," : "");
        pl_json_string(out, m->what);
        fprintf(out, ", \"peak_bytes\": %lld, \"cap_bytes\": %lld, \"oom\": %s, \"as_published\": %s}", (long long)m->peak,
               (long long)m->cap, m->oom ? "true" : "false", m->oom == m->want_oom ? "true" : "false");
    }
    fprintf(out, "\n ]");
    if (f) {
        fprintf(out, ",\n \"fp8\": ");
        cli_json_published_fp8(out, f);
    }
    fprintf(out, "}\n");
}

void cli_json_published_fp8(FILE *out, const pub_fp8_result *f) {
    fprintf(out, "{\"blackwell_gemm_efficiency\": %.6f, \"fitted\": %s, \"fit_row\": ", f->blackwell_gemm_efficiency,
           f->fitted ? "true" : "false");
    pl_json_string(out, PUB_FP8_FIT_ROW);
    fprintf(out, ", \"mean_abs_error\": %.6f, \"max_abs_error\": %.6f, \"rows_scored\": %d, \"rows\": [",
           f->mean_abs_error, f->max_abs_error, f->rows_scored);
    for (int i = 0, k = 0; i < f->n; i++) {
        const pub_fp8_row *w = &f->rows[i];
        fprintf(out, "%s\n  {\"run_id\": ", k++ ? "," : "");
        pl_json_string(out, w->run.run_id);
        if (w->run.skipped[0]) {
            fprintf(out, ", \"skipped\": ");
            pl_json_string(out, w->run.skipped);
            fprintf(out, "}");
            continue;
        }
        fprintf(out, ", \"gpus\": %lld, \"recipe\": \"%s\", \"published_tokens_per_gpu\": %.3f, "
               "\"predicted_tokens_per_gpu\": %.3f, \"error\": %.6f, \"fitted\": %s, \"blackwell\": %s",
               (long long)w->run.gpus, fp8_recipe_name(w->run.lay.fp8), w->run.published_tokens, w->predicted_tokens,
               w->err, w->fitted ? "true" : "false", w->blackwell ? "true" : "false");
        if (w->res.oom) {
            fprintf(out, ", \"mem_why\": ");
            pl_json_string(out, w->mem_why ? w->mem_why : "not audited");
        }
        fprintf(out, "}");
    }
    fprintf(out, "\n ]}");
}

void cli_json_published_moe(FILE *out, const pub_moe_result *r) {
    fprintf(out, "{\"rows_read\": %d, \"rows_simulated\": %d, \"mean_abs_error\": %.6f, \"max_abs_error\": %.6f, "
                 "\"rows\": [", r->n, r->n_simulated, r->mean_abs_err, r->max_abs_err);
    for (int i = 0; i < r->n; i++) {
        const pub_moe_row *w = &r->rows[i];
        fprintf(out, "%s\n  {\"run_id\": ", i ? "," : "");
        pl_json_string(out, w->run_id);
        if (!w->simulated) {
            fprintf(out, ", \"skipped\": ");
            pl_json_string(out, w->why);
            fputc('}', out);
            continue;
        }
        fprintf(out, ", \"cluster\": ");
        pl_json_string(out, w->cluster);
        fprintf(out, ", \"gpus\": %lld, \"seq_len\": %d, \"layout\": ", (long long)w->gpus, w->seq);
        pl_json_string(out, w->layout_text);
        fprintf(out, ", \"routing\": ");
        pl_json_string(out, w->routing);
        fprintf(out, ", \"published_step_s\": %.6f, \"predicted_step_s\": %.6f, \"error\": %.6f, \"mem_peak_bytes\": "
                     "%lld, \"oom\": %s}",
                w->published_step_s, w->predicted_step_s, w->err, (long long)w->res.mem.total,
                w->oom ? "true" : "false");
    }
    fprintf(out, "\n ]}\n");
}
