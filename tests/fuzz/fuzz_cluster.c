/* fuzz_cluster.c: libFuzzer target for cluster_parse_json (cluster files,
 * jansson). An accepted cluster must validate, count its GPUs and resolve
 * the first and last GPU to a type and fabric; a refusal must explain
 * itself in one line. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cluster_file.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    cluster c;
    char msg[512] = "";
    pl_status st = cluster_parse_json((const char *)data, size, &c, msg, sizeof msg);
    if (st == PL_OK) {
        if (cluster_validate(&c, NULL, 0) != PL_OK) abort();
        int64_t n = cluster_n_gpus(&c);
        if (n < 1) abort();
        for (int64_t g = 0; g < n; g += (n > 1 ? n - 1 : 1)) {
            const cluster_gpu *t = cluster_gpu_of(&c, g);
            if (t < c.gpus || t >= c.gpus + c.n_gpu_types) abort();
            int gr = cluster_group_of(&c, g);
            if (gr < 0 || gr >= c.n_groups) abort();
            if (c.gpus_per_node > 1 && !(cluster_intra_bw_of(&c, g) > 0)) abort();
            if (cluster_n_nodes(&c) > 1 && !(cluster_nic_bw_per_gpu_of(&c, g) > 0)) abort();
        }
    } else if (!msg[0] || strchr(msg, '\n')) {
        abort();
    }
    return 0;
}
