/* test_cluster_file.c: the shipped cluster files load with their figures
 * converted to cluster.h's units, GPUs of a mixed cluster resolve to their
 * group's type and fabric, and every malformed file is refused with one
 * line naming the key. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "cluster_file.h"

static cluster load(const char *name) {
    cluster c;
    char msg[512] = "";
    cr_assert_eq(cluster_load(name, NULL, &c, msg, sizeof msg), PL_OK, "%s: %s", name, msg);
    return c;
}

Test(cluster_file, shipped_clusters_load_with_their_figures) {
    cluster c = load("dgx-a100-80gb");
    cr_assert_str_eq(c.name, "dgx-a100-80gb");
    cr_assert_eq(cluster_n_gpus(&c), 4480);
    cr_assert_eq(c.gpus_per_node, 8);
    cr_assert(c.gpus[0].peak_flops[PRECISION_BF16] == 312e12);
    cr_assert(c.gpus[0].peak_flops[PRECISION_FP16] == 312e12);
    cr_assert(c.gpus[0].peak_flops[PRECISION_TF32] == 156e12);
    cr_assert(c.gpus[0].peak_flops[PRECISION_FP32] == 19.5e12);
    cr_assert(c.gpus[0].peak_flops[PRECISION_FP8] == 0, "A100 has no FP8");
    cr_assert(c.gpus[0].hbm_bw == 2039e9);
    cr_assert_eq(c.gpus[0].hbm_bytes, 80LL << 30);
    cr_assert_eq(c.gpus[0].sm_count, 108);
    cr_assert(c.intra_bw == 300e9, "600 GB/s bidirectional is 300 per direction");
    cr_assert_eq(c.nics_per_node, 8);
    cr_assert(c.nic_bw == 25e9, "HDR 200 Gb/s is 25 GB/s");
    cr_assert(cluster_nic_bw_per_gpu_of(&c, 100) == 25e9);
    cr_assert(c.intra_latency_us == 3.4 && c.inter_latency_us == 9.6 && c.coll_base_latency_us == 8.4);

    c = load("dgx-h100");
    cr_assert(c.gpus[0].peak_flops[PRECISION_BF16] == 989e12);
    cr_assert(c.gpus[0].peak_flops[PRECISION_FP8] == 1979e12);
    cr_assert(c.gpus[0].peak_flops[PRECISION_TF32] == 494e12);
    cr_assert(c.gpus[0].peak_flops[PRECISION_FP32] == 67e12);
    cr_assert(c.gpus[0].hbm_bw == 3350e9);
    cr_assert_eq(c.gpus[0].sm_count, 132);
    cr_assert(c.intra_bw == 450e9);
    cr_assert(c.nic_bw == 50e9);

    c = load("llama3-h100");
    cr_assert_eq(cluster_n_gpus(&c), 24576);
    cr_assert_eq(c.pod_gpus, 3072);
    cr_assert(c.pod_oversubscription == 7);
    cr_assert(cluster_nic_bw_per_gpu_of(&c, 0) == 50e9, "400 Gb/s per GPU");

    c = load("h200x2");
    cr_assert_eq(cluster_n_gpus(&c), 2);
    cr_assert_eq(c.gpus[0].hbm_bytes, 143771LL << 20);
    cr_assert(c.gpus[0].hbm_bw == 4800e9);
    cr_assert(c.intra_bw == 373.3e9);
    cr_assert(c.intra_latency_us == 6.0);
    cr_assert_eq(c.nics_per_node, 0);

    /* by path too */
    c = load(PLACER_SOURCE_DIR "/data/clusters/dgx-h100.json");
    cr_assert_str_eq(c.name, "dgx-h100");
}

Test(cluster_file, a_mixed_cluster_resolves_each_gpu_to_its_group) {
    cluster c = load("mixed-h100-a100");
    cr_assert_eq(c.n_gpu_types, 2);
    cr_assert_eq(c.n_groups, 2);
    cr_assert_eq(cluster_n_nodes(&c), 16);
    cr_assert_eq(cluster_n_gpus(&c), 128);
    cr_assert_eq(cluster_group_of(&c, 0), 0);
    cr_assert_eq(cluster_group_of(&c, 63), 0);
    cr_assert_eq(cluster_group_of(&c, 64), 1);
    cr_assert_eq(cluster_group_of(&c, 127), 1);
    cr_assert_eq(cluster_node_of(&c, 71), 8);
    cr_assert(strstr(cluster_gpu_of(&c, 63)->name, "H100"));
    cr_assert(strstr(cluster_gpu_of(&c, 64)->name, "A100"));
    cr_assert(cluster_intra_bw_of(&c, 0) == 450e9);
    cr_assert(cluster_intra_bw_of(&c, 64) == 300e9);
    cr_assert(cluster_nic_bw_per_gpu_of(&c, 0) == 50e9);
    cr_assert(cluster_nic_bw_per_gpu_of(&c, 64) == 25e9);
    cr_assert(cluster_intra_latency_of(&c, 64) == 3.4);
}

Test(cluster_file, unknown_names_list_the_shipped_ones) {
    cluster c;
    char msg[512];
    cr_assert_eq(cluster_load("dgx-b300", NULL, &c, msg, sizeof msg), PL_ERR_NOT_FOUND);
    cr_assert(strstr(msg, "unknown cluster 'dgx-b300'"), "%s", msg);
    cr_assert(strstr(msg, "dgx-a100-80gb") && strstr(msg, "llama3-h100"), "%s", msg);
    cr_assert_eq(cluster_load("/nonexistent/c.json", NULL, &c, msg, sizeof msg), PL_ERR_NOT_FOUND);
    cr_assert(strstr(msg, "cannot read cluster file"), "%s", msg);
    cr_assert_eq(cluster_load("a;b", NULL, &c, msg, sizeof msg), PL_ERR_INVALID);
    cr_assert_eq(cluster_load("", NULL, &c, msg, sizeof msg), PL_ERR_INVALID);
    cr_assert_eq(cluster_load("h200x2", PLACER_SOURCE_DIR "/data/clusters", &c, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_eq(cluster_load("h200x2", "/nonexistent", &c, msg, sizeof msg), PL_ERR_NOT_FOUND);
}

/* A minimal valid file with one substitution: replace the first occurrence
 * of `from` by `to`. */
static const char *BASE =
    "{\"name\":\"t\",\"gpu_types\":[{\"id\":\"g\",\"name\":\"G\",\"source\":\"s\",\"peak_tflops\":{\"bf16\":100},"
    "\"hbm_gb_s\":1000,\"hbm_gib\":40,\"sm_count\":100}],"
    "\"node_groups\":[{\"gpu\":\"g\",\"nodes\":2}],\"gpus_per_node\":8,"
    "\"intra_node\":{\"source\":\"s\",\"gb_s_per_direction\":300,\"latency_us\":3},"
    "\"inter_node\":{\"source\":\"s\",\"nics_per_node\":8,\"nic_gbit_s\":200,\"latency_us\":9,\"pod_gpus\":0},"
    "\"collectives\":{\"source\":\"s\",\"collective_efficiency\":0.8,\"p2p_efficiency\":0.8}}";

static pl_status parse_with(const char *from, const char *to, cluster *c, char *msg, size_t len) {
    char buf[4096];
    const char *at = from ? strstr(BASE, from) : NULL;
    cr_assert(!from || at, "'%s' not in the base file", from);
    if (!from) snprintf(buf, sizeof buf, "%s", BASE);
    else snprintf(buf, sizeof buf, "%.*s%s%s", (int)(at - BASE), BASE, to, at + strlen(from));
    return cluster_parse_json(buf, strlen(buf), c, msg, len);
}

Test(cluster_file, malformed_files_are_refused_naming_the_key) {
    cluster c;
    char msg[512];
    cr_assert_eq(parse_with(NULL, NULL, &c, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_eq(cluster_n_gpus(&c), 16);
    static const struct { const char *from, *to, *want; } bad[] = {
        {"{\"name\":\"t\",", "{\"name\":\"t\",,", "not valid JSON"},
        {"\"name\":\"t\",", "", "missing 'name'"},
        {"\"source\":\"s\",\"peak", "\"peak", "'gpu_types[0]' has no \"source\""},
        {"\"intra_node\":{\"source\":\"s\",", "\"intra_node\":{", "'intra_node' has no \"source\""},
        {"\"collectives\":{\"source\":\"s\",", "\"collectives\":{", "'collectives' has no \"source\""},
        {"\"hbm_gb_s\"", "\"hbm_gbs\":1,\"hbm_gb_s\"", "unknown key 'gpu_types[0].hbm_gbs'"},
        {"\"bf16\":100", "\"bf16\":\"fast\"", "'gpu_types[0].peak_tflops.bf16' must be a number"},
        {"\"bf16\":100", "\"int4\":100", "unknown key 'gpu_types[0].peak_tflops.int4'"},
        {"\"bf16\":100", "\"bf16\":0", "has no positive peak"},
        {"\"hbm_gib\":40,", "", "exactly one of hbm_gib and hbm_mib"},
        {"\"hbm_gib\":40,", "\"hbm_gib\":40,\"hbm_mib\":40,", "exactly one of hbm_gib and hbm_mib"},
        {"\"sm_count\":100", "\"sm_count\":1.5", "'gpu_types[0].sm_count' must be an integer"},
        {"\"gpu\":\"g\"", "\"gpu\":\"x\"", "names GPU type 'x', which gpu_types lacks"},
        {"\"nodes\":2", "\"nodes\":0", "'node_groups[0].nodes' must be an integer from 1"},
        {"\"gpus_per_node\":8", "\"gpus_per_node\":-8", "'gpus_per_node' must be an integer"},
        {"\"gb_s_per_direction\":300", "\"gb_s_per_direction\":-300", "'intra_node.gb_s_per_direction' must be a number >= 0"},
        {"\"gb_s_per_direction\":300", "\"gb_s_per_direction\":0", "intra-node bandwidth must be positive"},
        {"\"nics_per_node\":8", "\"nics_per_node\":0", "needs inter-node adapters"},
        {"\"pod_gpus\":0", "\"pod_gpus\":12", "must be 0 (one pod) or a multiple of gpus_per_node"},
        {"\"gpus_per_node\":8", "\"gpus_per_node\":8,\"nvlink_domain_gpus\":12", "must be 0 (one node) or a multiple of gpus_per_node"},
        {"\"gpus_per_node\":8", "\"gpus_per_node\":8,\"nvlink_domain_gpus\":24", "does not divide the GPUs of node group 0 (16)"},
        {"\"gpus_per_node\":8", "\"gpus_per_node\":8,\"nvlink_domain_gpus\":0", "'nvlink_domain_gpus' must be an integer from 1"},
        {"\"gpus_per_node\":8", "\"gpus_per_node\":8,\"nvlink_domain_gpus\":\"rack\"", "'nvlink_domain_gpus' must be an integer"},
        {"\"bf16\":100", "\"bf16\":100,\"mxfp8\":-1", "'gpu_types[0].peak_tflops.mxfp8' must be a number >= 0"},
        {"\"bf16\":100", "\"bf16\":100,\"fp4\":\"x\"", "'gpu_types[0].peak_tflops.fp4' must be a number"},
        {"\"latency_us\":3", "\"latency_us\":3,\"reported_gb_s_per_direction\":-1", "'intra_node.reported_gb_s_per_direction' must be a number >= 0"},
        {"\"latency_us\":9", "\"latency_us\":9,\"reported_gb_s_per_gpu\":\"50\"", "'inter_node.reported_gb_s_per_gpu' must be a number"},
        {"\"pod_gpus\":0", "\"pod_gpus\":0,\"pod_oversubscription\":0.5", "pod_oversubscription must be >= 1"},
        {"\"collective_efficiency\":0.8", "\"collective_efficiency\":1.2", "collective_efficiency must be in (0, 1]"},
        {"\"p2p_efficiency\":0.8", "\"p2p_efficiency\":0", "p2p_efficiency must be in (0, 1]"},
        {"\"latency_us\":3", "\"latency_us\":true", "'intra_node.latency_us' must be a number"},
        {"\"gpu_types\":[", "\"gpu_types\":7,\"source\":[", "'gpu_types' must be an array"},
        {"\"node_groups\":[{\"gpu\":\"g\",\"nodes\":2}]", "\"node_groups\":[]", "'node_groups' must be an array of 1"},
        {"\"intra_node\":{", "\"intra_node\":[],\"source\":{", "'intra_node' must be an object"},
        {"{\"name\":\"t\",", "{\"name\":\"t\",\"name\":\"u\",", "duplicate"},
        {"\"id\":\"g\",\"name\":\"G\",\"source\":\"s\",\"peak_tflops\":{\"bf16\":100},\"hbm_gb_s\":1000,\"hbm_gib\":40,\"sm_count\":100}",
         "\"id\":\"g\",\"name\":\"G\",\"source\":\"s\",\"peak_tflops\":{\"bf16\":100},\"hbm_gb_s\":1000,\"hbm_gib\":40,\"sm_count\":100},"
         "{\"id\":\"g\",\"name\":\"G\",\"source\":\"s\",\"peak_tflops\":{\"bf16\":100},\"hbm_gb_s\":1000,\"hbm_gib\":40,\"sm_count\":100}",
         "GPU type id 'g' is used twice"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        memset(&c, 0x5a, sizeof c);
        msg[0] = 0;
        cr_assert_eq(parse_with(bad[i].from, bad[i].to, &c, msg, sizeof msg), PL_ERR_INVALID, "row %zu accepted", i);
        cr_assert(strstr(msg, bad[i].want), "row %zu: '%s'", i, msg);
        cr_assert(!strchr(msg, '\n'), "row %zu: one line", i);
        cr_assert_eq(c.gpus_per_node, 0x5a5a5a5a, "row %zu touched the output", i);
    }
    cr_assert_eq(cluster_parse_json("[]", 2, &c, msg, sizeof msg), PL_ERR_INVALID);
    cr_assert(strstr(msg, "must be a JSON object"), "%s", msg);
}

/* An NVLink domain wider than a node (an NVL72 rack: 18 trays of 4 GPUs)
 * parses, the block-scaled peaks come in FLOP/s, and the domain decides
 * which GPUs share NVLink while the node stays the host. One rack needs no
 * network; two do. */
Test(cluster_file, an_nvlink_domain_of_several_nodes) {
    cluster c;
    char msg[512] = "";
    cr_assert_eq(parse_with("\"gpus_per_node\":8", "\"gpus_per_node\":8,\"nvlink_domain_gpus\":16", &c, msg, sizeof msg),
                 PL_OK, "two nodes in one domain: %s", msg);
    cr_assert_eq(cluster_domain_of(&c, 15), 0);
    cr_assert_eq(cluster_node_of(&c, 15), 1);
    const char *rack = "{\"name\":\"r\",\"gpu_types\":[{\"id\":\"b\",\"name\":\"B\",\"source\":\"s\","
                       "\"peak_tflops\":{\"bf16\":2250,\"fp8\":4500,\"mxfp8\":4500,\"fp4\":9000},\"hbm_gb_s\":8000,"
                       "\"hbm_gib\":180,\"sm_count\":148}],\"node_groups\":[{\"gpu\":\"b\",\"nodes\":36}],"
                       "\"gpus_per_node\":4,\"nvlink_domain_gpus\":72,"
                       "\"intra_node\":{\"source\":\"s\",\"gb_s_per_direction\":900,\"latency_us\":3},"
                       "\"inter_node\":{\"source\":\"s\",\"nics_per_node\":4,\"nic_gbit_s\":400,\"latency_us\":9},"
                       "\"collectives\":{\"source\":\"s\",\"collective_efficiency\":0.8,\"p2p_efficiency\":0.8}}";
    cr_assert_eq(cluster_parse_json(rack, strlen(rack), &c, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_eq(cluster_n_gpus(&c), 144);
    cr_assert_eq(cluster_domain_gpus(&c), 72);
    cr_assert(c.gpus[0].peak_mxfp8 == 4500e12 && c.gpus[0].peak_fp4 == 9000e12);
    cr_assert_eq(cluster_node_of(&c, 71), 17, "GPU 71 is on tray 17");
    cr_assert_eq(cluster_domain_of(&c, 71), 0, "... and in rack 0");
    cr_assert_eq(cluster_domain_of(&c, 72), 1);
    /* one rack alone needs no adapters; two racks do */
    cluster one = c;
    one.groups[0].n_nodes = 18;
    one.nics_per_node = 0;
    cr_assert_eq(cluster_validate(&one, msg, sizeof msg), PL_OK, "%s", msg);
    one.groups[0].n_nodes = 36;
    cr_assert_eq(cluster_validate(&one, msg, sizeof msg), PL_ERR_INVALID);
    cr_assert(strstr(msg, "2 NVLink domains needs inter-node adapters"), "%s", msg);
    /* 20 trays (80 GPUs) are not whole racks of 72 */
    one.nics_per_node = 4;
    one.groups[0].n_nodes = 20;
    cr_assert_eq(cluster_validate(&one, msg, sizeof msg), PL_ERR_INVALID);
    cr_assert(strstr(msg, "nvlink_domain_gpus (72) does not divide the GPUs of node group 0 (80)"), "%s", msg);
}

/* The Blackwell and H800 clusters (data/published-runs/MOE-FP8.md says
 * where each figure comes from): NVLink domains of 8 and 72, per-precision
 * peaks with MXFP8 and FP4 where the GPU has them, the H800's cut NVLink. */
Test(cluster_file, blackwell_and_h800_clusters_load) {
    cluster c = load("dgx-b200");
    cr_assert_eq(cluster_domain_gpus(&c), 8);
    cr_assert(c.gpus[0].peak_flops[PRECISION_BF16] == 2250e12 && c.gpus[0].peak_flops[PRECISION_FP8] == 4500e12);
    cr_assert(c.gpus[0].peak_mxfp8 == 4500e12 && c.gpus[0].peak_fp4 == 9000e12);
    cr_assert(c.intra_bw == 900e9);
    c = load("gb200-nvl72");
    cr_assert_eq(c.gpus_per_node, 4, "a compute tray");
    cr_assert_eq(cluster_domain_gpus(&c), 72, "the rack's NVLink domain");
    cr_assert_eq(cluster_n_gpus(&c), 576);
    cr_assert(c.gpus[0].peak_mxfp8 == 5000e12);
    cr_assert(cluster_nic_bw_per_gpu_of(&c, 0) == 50e9, "one 400 Gb/s adapter a GPU");
    c = load("gb300-nvl72");
    cr_assert_eq(cluster_domain_gpus(&c), 72);
    cr_assert(c.gpus[0].peak_fp4 == 15000e12);
    cr_assert(cluster_nic_bw_per_gpu_of(&c, 0) == 100e9, "ConnectX-8 at 800 Gb/s");
    c = load("dgx-h200");
    cr_assert(c.gpus[0].peak_mxfp8 == 0, "Hopper has no MXFP8");
    cr_assert_eq(c.gpus[0].hbm_bytes, 143771LL << 20);
    c = load("h800-deepseek");
    cr_assert(c.intra_bw == 200e9, "H800 NVLink: 400 GB/s bidirectional");
    cr_assert_eq(cluster_n_gpus(&c), 2048);
}

Test(cluster_file, validate_checks_structs_built_in_code) {
    cluster c = load("dgx-h100");
    char msg[256];
    cr_assert_eq(cluster_validate(&c, msg, sizeof msg), PL_OK);
    cluster b = c;
    b.groups[0].gpu_type = 3;
    cr_assert_eq(cluster_validate(&b, msg, sizeof msg), PL_ERR_INVALID);
    cr_assert(strstr(msg, "names GPU type 3"), "%s", msg);
    b = c;
    b.n_groups = 0;
    cr_assert_eq(cluster_validate(&b, msg, sizeof msg), PL_ERR_INVALID);
    b = c;
    b.gpus[0].hbm_bytes = 0;
    cr_assert_eq(cluster_validate(&b, msg, sizeof msg), PL_ERR_INVALID);
    b = c;
    b.gpus[0].peak_flops[PRECISION_BF16] = -1;
    cr_assert_eq(cluster_validate(&b, msg, sizeof msg), PL_ERR_INVALID);
    b = c;
    b.inter_latency_us = 1.0 / 0.0;
    cr_assert_eq(cluster_validate(&b, msg, sizeof msg), PL_ERR_INVALID);
}
