/* test_spec.c: spec (roofline) profiles have plausible magnitudes, and the
 * H200 figures they share with a cluster file are that file's. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>

#include "cluster_file.h"
#include "graph.h"
#include "helpers.h"
#include "spec.h"

#define MIB (1024LL * 1024LL)

static profile_data *build(const char *spec, const char *config, const int *sizes, int n, graph **g_out) {
    gpt_config cfg;
    cr_assert_eq(gpt_config_parse(config, &cfg, NULL, 0), PL_OK);
    graph *g = NULL;
    cr_assert_eq(graph_build_gpt(&cfg, &g, NULL, 0), PL_OK);
    const machine_spec *s = spec_find(spec);
    cr_assert_not_null(s, "spec %s exists", spec);
    profile_data *p = NULL;
    cr_assert_eq(spec_profile_build(s, g, sizes, n, &p), PL_OK);
    if (g_out) *g_out = g;
    else graph_destroy(g);
    return p;
}

static const int SIZES[5] = {16, 8, 4, 2, 1};
#define HEAD 38 /* the output head of the default GPT */

Test(spec, t4_head_forward_at_micro_batch_16_is_tens_of_milliseconds) {
    graph *g = NULL;
    profile_data *p = build("t4x4-pcie", "default", SIZES, 5, &g);
    cr_assert_eq(g->nodes[HEAD].kind, OP_HEAD);
    double us = profile_node_cost(p, 0, 16, HEAD, PHASE_FWD);
    cr_assert(us >= 10e3 && us <= 100e3, "T4 head forward at mb 16: %.1f us", us);
    /* compute-bound: 2*16*256*384*50257 FLOP at 8.1 TFLOP/s, plus one launch */
    double want = 2.0 * 16 * 256 * 384 * 50257 / 8.1e12 * 1e6 + 5.0;
    cr_assert(epsilon_eq(dbl, us, want, 1e-6 * want), "%.3f vs %.3f", us, want);
    /* its backward costs twice the FLOPs */
    double bwd = profile_node_cost(p, 0, 16, HEAD, PHASE_BWD);
    cr_assert(bwd > 1.9 * (us - 5) && bwd < 2.1 * us, "backward %.1f us", bwd);
    profile_data_destroy(p);
    graph_destroy(g);
}

Test(spec, h200_single_device_step_at_batch_16_is_a_few_milliseconds) {
    profile_data *p = build("h200x2-nvlink", "default", SIZES, 5, NULL);
    double step = 0;
    for (int i = 0; i < p->n_nodes; i++)
        for (int ph = 0; ph < PHASE_COUNT; ph++) step += profile_node_cost(p, 0, 16, i, (cost_phase)ph);
    cr_assert(step >= 1e3 && step <= 20e3, "H200 single-device step: %.1f us", step);
    /* DEVICE.md: ~0.76 TFLOP per step is ~1.9 ms at 395 TFLOP/s; the roofline cannot beat it */
    cr_assert(step > 1.9e3, "above the FLOP floor: %.1f us", step);
    profile_data_destroy(p);
}

Test(spec, h200_nvlink_moves_the_823_MB_logits_in_about_2_1_ms) {
    profile_data *p = build("h200x2-nvlink", "default", SIZES, 5, NULL);
    double bytes = 16.0 * 256 * 50257 * 4; /* head output at batch 16: 823,410,688 B */
    double us = profile_transfer_us(p, 0, 1, bytes);
    cr_assert(us >= 2.0e3 && us <= 2.3e3, "823 MB over NVLink: %.1f us (measured 2.19 ms)", us);
    cr_assert(epsilon_eq(dbl, us, 15.0 + bytes / 390e9 * 1e6, 1e-6));
    cr_assert(epsilon_eq(dbl, profile_transfer_us(p, 1, 0, bytes), us, 1e-9), "symmetric");
    cr_assert(ieee_ulp_eq(dbl, profile_transfer_us(p, 1, 1, bytes), 0.0, 0), "no transfer to itself");
    profile_data_destroy(p);
}

Test(spec, transfer_curve_spans_4_KiB_to_2_GiB_at_two_points_per_octave) {
    profile_data *p = build("t4x4-pcie", "tiny", SIZES + 3, 2, NULL);
    for (int a = 0; a < 4; a++)
        for (int b = 0; b < 4; b++) {
            if (a == b) continue;
            const profile_link *l = &p->links[a * 4 + b];
            cr_assert_eq(l->n_points, SPEC_CURVE_POINTS);
            cr_assert(ieee_ulp_eq(dbl, l->bytes[0], 4096.0, 0));
            cr_assert(ieee_ulp_eq(dbl, l->bytes[2], 8192.0, 0));
            cr_assert(ieee_ulp_eq(dbl, l->bytes[1], 5793.0, 0), "4 KiB * sqrt(2), rounded");
            cr_assert(ieee_ulp_eq(dbl, l->bytes[SPEC_CURVE_POINTS - 1], 2147483648.0, 0));
            cr_assert(ieee_ulp_eq(dbl, l->latency_us, 20.0, 0));
            cr_assert(ieee_ulp_eq(dbl, l->bandwidth, 10e9, 0));
            for (int j = 0; j < l->n_points; j++)
                cr_assert(epsilon_eq(dbl, l->us[j], 20.0 + l->bytes[j] / 10e9 * 1e6, 1e-9));
        }
    /* PCIe through the host: 100 MB takes about 10 ms */
    double us = profile_transfer_us(p, 0, 3, 100e6);
    cr_assert(us > 9e3 && us < 11e3, "%.1f us", us);
    profile_data_destroy(p);
}

Test(spec, known_names_are_found_and_unknown_ones_are_not) {
    cr_assert_eq(spec_count(), 5);
    const char *names[5] = {"t4x4-pcie", "h200x2-nvlink", "h200x4-nvlink", "h200x2-l40sx2", "h200x8-nvpairs"};
    const int devs[5] = {4, 2, 4, 4, 8};
    char list[256];
    spec_names(list, sizeof list);
    for (int i = 0; i < 5; i++) {
        const machine_spec *s = spec_find(names[i]);
        cr_assert_not_null(s);
        cr_assert_str_eq(s->name, names[i]);
        cr_assert_eq(s->n_devices, devs[i]);
        cr_assert(th_has(list, names[i]), "%s in '%s'", names[i], list);
        cr_assert_eq(spec_get(i), spec_find(spec_get(i)->name));
    }
    cr_assert_null(spec_find("t4x8-pcie"));
    cr_assert_null(spec_find(""));
    cr_assert_null(spec_find(NULL));
    cr_assert_null(spec_get(5));
    cr_assert_null(spec_get(-1));
    char tiny[8];
    spec_names(tiny, sizeof tiny);
    cr_assert_eq(strlen(tiny), 7, "truncated, terminated");
}

Test(spec, device_figures_match_the_cards) {
    const machine_spec *t4 = spec_find("t4x4-pcie"), *h = spec_find("h200x2-nvlink");
    cr_assert_eq(t4->mem_bytes, 15 * 1024 * MIB, "15 GiB usable of a 16 GB T4");
    cr_assert_eq(h->mem_bytes, 143771 * MIB, "nvidia-smi's 143,771 MiB");
    cr_assert(t4->peak_flops < 10e12, "fp32 training, not fp16 tensor cores");
    cr_assert(h->peak_flops > 300e12 && h->peak_flops < 500e12);
    cr_assert(h->mem_bw / t4->mem_bw > 10.0);
    cr_assert_str_eq(t4->link_kind, "pcie3-host");
    cr_assert_str_eq(h->link_kind, "nvlink");
}

/* Every H200 of every spec carries the figures of the cluster file that
 * documents the card (the build copies them: profile/spec_gpu_figures.c). */
Test(spec, h200_figures_are_the_cluster_files) {
    cluster c;
    char msg[512] = "";
    cr_assert_eq(cluster_load("h200x2", NULL, &c, msg, sizeof msg), PL_OK, "%s", msg);
    int seen = 0;
    for (int i = 0; i < spec_count(); i++) {
        const machine_spec *s = spec_get(i);
        for (int d = 0; d < s->n_devices; d++) {
            spec_device x = spec_device_at(s, d);
            if (strcmp(x.device_name, "NVIDIA H200")) continue;
            cr_assert_eq(x.mem_bw, c.gpus[0].hbm_bw, "%s device %d", s->name, d);
            cr_assert_eq(x.mem_bytes, c.gpus[0].hbm_bytes, "%s device %d", s->name, d);
            cr_assert_eq(x.sm_count, c.gpus[0].sm_count, "%s device %d", s->name, d);
            seen++;
        }
    }
    cr_assert_eq(seen, 2 + 4 + 2 + 8, "the H200s of h200x2-nvlink, h200x4-nvlink, h200x2-l40sx2, h200x8-nvpairs");
}

Test(spec, node_memory_comes_from_the_graph_with_matmul_workspace) {
    graph *g = NULL;
    profile_data *t4 = build("t4x4-pcie", "default", SIZES, 5, &g);
    profile_data *h = build("h200x2-nvlink", "default", SIZES, 5, NULL);
    int64_t params = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        const graph_node *n = &g->nodes[i];
        cr_assert_eq(t4->node_mem[i].param_bytes, 4 * n->params);
        cr_assert_eq(t4->node_mem[i].act_bytes_per_sample, n->act_bytes_per_sample);
        cr_assert_eq(t4->node_mem[i].out_bytes_per_sample, n->out_bytes_per_sample);
        int mm = n->kind == OP_ATTENTION || n->kind == OP_MLP || n->kind == OP_HEAD;
        cr_assert_eq(t4->node_mem[i].workspace_bytes, mm ? 4 * MIB : 0, "node %s", n->name);
        cr_assert_eq(h->node_mem[i].workspace_bytes, mm ? 32 * MIB : 0, "node %s", n->name);
        params += n->params;
    }
    cr_assert_eq(params, 49343232);
    cr_assert_str_eq(t4->source, "spec");
    cr_assert_str_eq(t4->machine, "t4x4-pcie");
    cr_assert_str_eq(t4->graph_key, "gpt-L6-C384-H6-V50257-T256-B16");
    profile_data_destroy(t4);
    profile_data_destroy(h);
    graph_destroy(g);
}

Test(spec, costs_grow_with_the_micro_batch_and_the_optimizer_does_not) {
    graph *g = NULL;
    profile_data *p = build("h200x4-nvlink", "default", SIZES, 5, &g);
    cr_assert_eq(p->n_devices, 4);
    cr_assert_eq(p->n_mb, 5);
    for (int k = 0; k < 5; k++) cr_assert_eq(p->mb_sizes[k], 1 << k, "sorted ascending");
    for (int d = 0; d < 4; d++)
        for (int i = 0; i < p->n_nodes; i++) {
            for (int k = 1; k < 5; k++) {
                for (int ph = PHASE_FWD; ph <= PHASE_BWD; ph++) {
                    double lo = p->cost_us[profile_cost_index(p, d, k - 1, i, ph)];
                    double hi = p->cost_us[profile_cost_index(p, d, k, i, ph)];
                    cr_assert(hi >= lo && hi <= 2.0 * lo + 1e-9, "node %d phase %d: %g -> %g", i, ph, lo, hi);
                }
                cr_assert(ieee_ulp_eq(dbl, p->cost_us[profile_cost_index(p, d, k, i, PHASE_OPT)],
                                      p->cost_us[profile_cost_index(p, d, 0, i, PHASE_OPT)], 0));
            }
            double opt = p->cost_us[profile_cost_index(p, d, 0, i, PHASE_OPT)];
            if (g->nodes[i].params == 0) cr_assert(ieee_ulp_eq(dbl, opt, 0.0, 0), "no parameters, no AdamW");
            else
                cr_assert(epsilon_eq(dbl, opt, g->nodes[i].params * 28.0 / 4.8e12 * 1e6 + 4.0, 1e-9), "node %d", i);
        }
    for (int d = 1; d < 4; d++)
        for (int l = 0; l < 4; l++)
            if (l != d) cr_assert_eq(p->links[d * 4 + l].n_points, SPEC_CURVE_POINTS);
    profile_data_destroy(p);
    graph_destroy(g);
}

Test(spec, build_drops_duplicate_sizes_and_rejects_bad_input) {
    gpt_config cfg;
    cr_assert_eq(gpt_config_parse("tiny", &cfg, NULL, 0), PL_OK);
    graph *g = NULL;
    cr_assert_eq(graph_build_gpt(&cfg, &g, NULL, 0), PL_OK);
    const machine_spec *s = spec_find("t4x4-pcie");
    int dup[4] = {4, 1, 4, 2};
    profile_data *p = NULL;
    cr_assert_eq(spec_profile_build(s, g, dup, 4, &p), PL_OK);
    cr_assert_eq(p->n_mb, 3);
    cr_assert(p->mb_sizes[0] == 1 && p->mb_sizes[1] == 2 && p->mb_sizes[2] == 4);
    profile_data_destroy(p);
    int zero[2] = {2, 0}, neg[1] = {-4};
    p = (profile_data *)0x1;
    cr_assert_eq(spec_profile_build(s, g, zero, 2, &p), PL_ERR_INVALID);
    cr_assert_null(p);
    cr_assert_eq(spec_profile_build(s, g, neg, 1, &p), PL_ERR_INVALID);
    cr_assert_eq(spec_profile_build(s, g, dup, 0, &p), PL_ERR_INVALID);
    cr_assert_eq(spec_profile_build(NULL, g, dup, 4, &p), PL_ERR_INVALID);
    cr_assert_eq(spec_profile_build(s, NULL, dup, 4, &p), PL_ERR_INVALID);
    cr_assert_null(p);
    graph_destroy(g);
}

/* Two device types: the H200s and the L40Ss get their own costs and memory,
 * the H200 pair its NVLink and every pair with an L40S the PCIe link. */
Test(spec, mixed_machine_has_two_device_types_and_two_link_kinds) {
    graph *g = NULL;
    profile_data *p = build("h200x2-l40sx2", "default", SIZES, 5, &g);
    const machine_spec *s = spec_find("h200x2-l40sx2");
    cr_assert_not(spec_is_uniform(s));
    cr_assert(spec_is_uniform(spec_find("h200x4-nvlink")));
    cr_assert_str_eq(p->devices[0].name, "NVIDIA H200");
    cr_assert_str_eq(p->devices[1].name, "NVIDIA H200");
    cr_assert_str_eq(p->devices[2].name, "NVIDIA L40S");
    cr_assert_str_eq(p->devices[3].name, "NVIDIA L40S");
    cr_assert(p->devices[2].mem_bytes < p->devices[0].mem_bytes / 2);
    int k16 = profile_mb_index(p, 16);
    double h = 0, l = 0;
    for (int i = 0; i < p->n_nodes; i++) {
        h += p->cost_us[profile_cost_index(p, 0, k16, i, PHASE_FWD)];
        l += p->cost_us[profile_cost_index(p, 2, k16, i, PHASE_FWD)];
        cr_assert_eq(p->cost_us[profile_cost_index(p, 0, k16, i, PHASE_FWD)],
                     p->cost_us[profile_cost_index(p, 1, k16, i, PHASE_FWD)]);
    }
    cr_assert(l > 2.0 * h, "an L40S forward (%.1f us) is well over twice an H200's (%.1f us)", l, h);
    /* links: 0-1 NVLink, the rest PCIe; both directions alike */
    cr_assert_eq(p->links[0 * 4 + 1].bandwidth, 390e9);
    cr_assert_eq(p->links[1 * 4 + 0].bandwidth, 390e9);
    for (int a = 0; a < 4; a++)
        for (int b = 0; b < 4; b++)
            if (a != b && !(a < 2 && b < 2)) {
                cr_assert_eq(p->links[a * 4 + b].bandwidth, 25e9, "link %d->%d", a, b);
                cr_assert_str_eq(spec_link_at(s, a, b).kind, "pcie4-switch");
            }
    /* 100 MB takes ~16x longer over PCIe than over the NVLink pair */
    double t_nv = profile_transfer_us(p, 0, 1, 1e8), t_pc = profile_transfer_us(p, 0, 2, 1e8);
    cr_assert(t_pc > 10 * t_nv, "pcie %.1f us vs nvlink %.1f us", t_pc, t_nv);
    /* the workspace is the largest of the two types (32 MiB, the H200's) */
    cr_assert_eq(p->node_mem[HEAD].workspace_bytes, 32 * MIB);
    profile_data_destroy(p);
    graph_destroy(g);
}

/* 8 devices: NVLink within the 4 pairs, PCIe within a socket, slower across. */
Test(spec, eight_devices_with_nvlink_pairs_and_pcie_between_them) {
    graph *g = NULL;
    profile_data *p = build("h200x8-nvpairs", "default", SIZES, 5, &g);
    cr_assert_eq(p->n_devices, 8);
    cr_assert_not(spec_is_uniform(spec_find("h200x8-nvpairs")));
    int n_nv = 0, n_sw = 0, n_x = 0;
    for (int a = 0; a < 8; a++)
        for (int b = 0; b < 8; b++) {
            if (a == b) continue;
            double bw = p->links[a * 8 + b].bandwidth;
            cr_assert_eq(bw, p->links[b * 8 + a].bandwidth, "symmetric");
            if (a / 2 == b / 2) { cr_assert_eq(bw, 390e9); n_nv++; }
            else if (a / 4 == b / 4) { cr_assert_eq(bw, 50e9); n_sw++; }
            else { cr_assert_eq(bw, 20e9); n_x++; }
        }
    cr_assert_eq(n_nv, 8);
    cr_assert_eq(n_sw, 16);
    cr_assert_eq(n_x, 32);
    for (int d = 0; d < 8; d++) cr_assert_str_eq(p->devices[d].name, "NVIDIA H200");
    cr_assert(profile_transfer_us(p, 0, 4, 1e8) > profile_transfer_us(p, 0, 2, 1e8));
    cr_assert(profile_transfer_us(p, 0, 2, 1e8) > profile_transfer_us(p, 0, 1, 1e8));
    profile_data_destroy(p);
    graph_destroy(g);
}
