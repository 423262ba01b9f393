/*
 * test_faults_published.c: allocation failures in the published-runs CSV
 * reader and row builder (inputs/published_runs.c) and in the collective
 * model's one allocation (coll_time on an unsorted group): every failure
 * comes back as PL_ERR_NOMEM with nothing leaked.
 */
#include <string.h>

#include "collective.h"
#include "fault_sweep.h"
#include "published_runs.h"

static const char *TABLE1 =
    "params_b,heads,hidden,layers,tp,pp,gpus,global_batch,micro_batch,vp_chunks_derived,ddp_impl,tflops_per_gpu\n"
    "1.7,24,2304,24,1,1,32,512,16,,torch,137\n"
    "76.1,80,10240,60,8,4,1024,1792,2,3,local,140\n"
    "\"1008.0\",160,25600,128,8,64,3072,3072,1,,local,163\r\n";

static pl_status op_csv_and_rows(void *ctx) {
    (void)ctx;
    pub_csv c;
    pl_status st = pub_csv_parse(TABLE1, strlen(TABLE1), &c, NULL, 0);
    if (st != PL_OK) return st;
    pub_row *rows = NULL;
    int n = 0;
    st = pub_rows_from_csv(PUB_T1, &c, &rows, &n, NULL, 0);
    pub_csv_free(&c);
    if (st == PL_OK && n != 3) st = PL_ERR_INVALID;
    free(rows);
    return st;
}

static pl_status op_coll_unsorted(void *ctx) {
    (void)ctx;
    cluster c;
    memset(&c, 0, sizeof c);
    c.n_gpu_types = 1;
    c.n_groups = 1;
    c.groups[0].n_nodes = 4;
    c.gpus_per_node = 8;
    c.intra_bw = 300e9;
    c.nics_per_node = 8;
    c.nic_bw = 25e9;
    c.pod_oversubscription = 1;
    c.collective_efficiency = 1;
    int64_t r[4] = {24, 0, 16, 8};
    coll_estimate e;
    return coll_time(&c, COLL_ALL_REDUCE, r, 4, 1e9, &e);
}

Test(faults, published_csv_and_rows_fail_cleanly_at_every_allocation) {
    long n = fault_sweep("published CSV + rows", op_csv_and_rows, NULL, NULL);
    cr_assert_gt(n, 10);
}

Test(faults, coll_time_unsorted_group_fails_cleanly) {
    long n = fault_sweep("coll_time, unsorted group", op_coll_unsorted, NULL, NULL);
    cr_assert_eq(n, 1);
}
