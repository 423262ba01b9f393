/*
 * test_published_runs.c: the check set's CSV reader and row builder
 * (inputs/published_runs.h) on texts of their own: quotes, line ends,
 * wrong shapes and bad cells; Table 1's and the Llama 3 table's rows as
 * models and layouts. (The FLOP counts and the check itself:
 * tests/calib/test_check_published.c.)
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "published_runs.h"

Test(published_runs, csv_reader) {
    pub_csv c;
    char msg[256];
    const char *ok = "a,b,\"c,d\"\r\n1,\"x \"\"y\"\"\",\r\n\n2,3,4";
    cr_assert_eq(pub_csv_parse(ok, strlen(ok), &c, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_eq(c.n_cols, 3);
    cr_assert_eq(c.n_rows, 2);
    cr_assert_eq(pub_csv_col(&c, "c,d"), 2);
    cr_assert_eq(pub_csv_col(&c, "e"), -1);
    cr_assert_str_eq(pub_csv_cell(&c, 0, 1), "x \"y\"");
    cr_assert_str_eq(pub_csv_cell(&c, 0, 2), "");
    cr_assert_str_eq(pub_csv_cell(&c, 1, 2), "4");
    pub_csv_free(&c);
    pub_csv_free(NULL);
    const char *bad[] = {"", "\n\n", "a,b\n1\n", "a,\"b\n", "a,b\"c\"\n", "a,\"b\"c\n", "a\r1\n", ",b\n1,2\n"};
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++)
        cr_assert_eq(pub_csv_parse(bad[k], strlen(bad[k]), &c, msg, sizeof msg), PL_ERR_INVALID, "case %zu", k);
    char nul[] = "a,b\n1,\0\n";
    cr_assert_eq(pub_csv_parse(nul, sizeof nul - 1, &c, msg, sizeof msg), PL_ERR_INVALID);
    char wide[200] = "";
    for (int k = 0; k <= PUB_CSV_MAX_COLS; k++) strcat(wide, k ? ",x" : "x");
    cr_assert_eq(pub_csv_parse(wide, strlen(wide), &c, msg, sizeof msg), PL_ERR_INVALID);
    cr_assert(strstr(msg, "columns") != NULL, "%s", msg);
}

/* The rows: Table 1's first row, a Llama row, and cells that are refused. */
Test(published_runs, rows_from_tables) {
    pub_csv c;
    char msg[256];
    const char *t1 = "params_b,heads,hidden,layers,tp,pp,gpus,global_batch,micro_batch,vp_chunks_derived,ddp_impl,"
                     "tflops_per_gpu\n76.1,80,10240,60,8,4,1024,1792,2,3,local,140\n";
    cr_assert_eq(pub_csv_parse(t1, strlen(t1), &c, msg, sizeof msg), PL_OK);
    pub_row *rows;
    int n;
    cr_assert_eq(pub_rows_from_csv(PUB_T1, &c, &rows, &n, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_eq(n, 1);
    cr_assert_eq(rows[0].lay.dp, 32);
    cr_assert_eq(rows[0].lay.vp, 3);
    cr_assert_eq(rows[0].dp_overlap, 0);
    cr_assert_eq(rows[0].lay.recompute, RECOMPUTE_FULL);
    cr_assert_str_eq(rows[0].label, "T1 76.1B 1024 GPUs");
    cr_assert_eq(rows[0].model.d_model, 10240);
    cr_assert_eq(rows[0].model.vocab_multiple, 128 * 8);
    cr_assert_eq(rows[0].attention, ATTENTION_UNFUSED);
    cr_assert_eq(rows[0].flops, PUB_FLOPS_MEGATRON);
    free(rows);
    pub_csv_free(&c);

    const char *l3 = "gpus,tp,cp,pp,dp,seq_len,batch_per_dp,tflops_per_gpu\n16384,8,16,16,8,131072,16,380\n";
    cr_assert_eq(pub_csv_parse(l3, strlen(l3), &c, msg, sizeof msg), PL_OK);
    cr_assert_eq(pub_rows_from_csv(PUB_LLAMA, &c, &rows, &n, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_eq(rows[0].lay.global_batch, 128);
    cr_assert_eq(rows[0].lay.zero, ZERO_FSDP);
    cr_assert_eq(rows[0].attention, ATTENTION_FLASH);
    cr_assert_eq(rows[0].flops, PUB_FLOPS_MODEL);
    cr_assert_eq(rows[0].model.seq_len, 131072);
    /* the model from data/models/llama-3-405b.json as the paper's Table 3 gives it */
    const gpt_config *m = &rows[0].model;
    cr_assert(m->n_layers == 126 && m->d_model == 16384 && m->d_ff == 53248 && m->n_heads == 128 &&
              m->n_kv_heads == 8 && m->vocab == 128000 && m->batch == 1);
    cr_assert(m->norm == NORM_RMSNORM && m->mlp == MLP_SWIGLU && m->pos == POS_ROTARY && m->no_bias && !m->qkv_bias &&
              !m->tied && !m->head_dim && !m->n_experts);
    cr_assert_eq(rows[0].lay.cp, 16);
    free(rows);
    pub_csv_free(&c);

    const char *bad[] = {
        "params_b,heads,hidden,layers,tp,pp,gpus,global_batch,micro_batch,vp_chunks_derived,ddp_impl,tflops_per_gpu\n"
        "1,2,3,4,5,6,7,8,9,,nccl,1\n",
        "params_b,heads,hidden,layers,tp,pp,gpus,global_batch,micro_batch,vp_chunks_derived,ddp_impl,tflops_per_gpu\n"
        "1,x,3,4,5,6,7,8,9,,torch,1\n",
        "params_b,heads\n1,2\n",
        "params_b,heads,hidden,layers,tp,pp,gpus,global_batch,micro_batch,vp_chunks_derived,ddp_impl,tflops_per_gpu\n"
        "1,24,2304,24,8,1,12,512,16,,torch,137\n",
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        cr_assert_eq(pub_csv_parse(bad[k], strlen(bad[k]), &c, msg, sizeof msg), PL_OK);
        cr_assert_eq(pub_rows_from_csv(PUB_T1, &c, &rows, &n, msg, sizeof msg), PL_ERR_INVALID, "case %zu", k);
        cr_assert_null(rows);
        pub_csv_free(&c);
    }
    const char *t2 = "scheme,params_b,model_parallel_size,global_batch,gpus,micro_batch,tflops_per_gpu\n"
                     "zero3,100,1,1536,384,4,144\n";
    cr_assert_eq(pub_csv_parse(t2, strlen(t2), &c, msg, sizeof msg), PL_OK);
    cr_assert_eq(pub_rows_from_csv(PUB_T2, &c, &rows, &n, msg, sizeof msg), PL_ERR_INVALID);
    cr_assert(strstr(msg, "100.0B") != NULL, "%s", msg);
    pub_csv_free(&c);
}
