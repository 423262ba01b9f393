/* fuzz_cluster.c: libFuzzer target for cluster_parse_json (cluster files,
 * jansson). An accepted cluster must validate, count its GPUs and resolve
 * the first and last GPU to a type, fabric and NVLink domain (whole nodes,
 * dividing the GPUs; a network when there are two); a refusal must explain
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
            /* NVLink domains are whole nodes; more than one needs a network */
            const int64_t dom = cluster_domain_gpus(&c);
            if (dom < c.gpus_per_node || dom % c.gpus_per_node != 0 || n % dom != 0) abort();
            if (cluster_domain_of(&c, g) != g / dom || cluster_node_of(&c, g) / (dom / c.gpus_per_node) != g / dom)
                abort();
            if (n > dom && !(cluster_nic_bw_per_gpu_of(&c, g) > 0)) abort();
            if (!(c.gpus[0].peak_mxfp8 >= 0) || !(c.gpus[0].peak_fp4 >= 0)) abort();
        }
    } else if (!msg[0] || strchr(msg, '\n')) {
        abort();
    }
    return 0;
}
