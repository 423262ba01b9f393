/*
 * test_layout_runs.c: framework profiles applied by the layout simulator
 * and their calibration from measured runs (sim/layout/framework.h,
 * calib/layout_runs.h): Megatron's profile changes nothing, the memory
 * conventions move the parts they name, and a fit on synthetic runs (made
 * by the simulator with known constants) recovers the constants. The
 * profile and runs files' readers are tests/inputs'.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cluster_file.h"
#include "compute_model.h"
#include "framework_file.h"
#include "layout_sim.h"
#include "layout_memory.h"
#include "layout_runs.h"
#include "model_config.h"

static gpt_config llama8(int layers, int seq) {
    gpt_config c;
    char name[64], msg[256];
    cr_assert_eq(model_config_load("llama-3-8b", &c, name, sizeof name, msg, sizeof msg), PL_OK, "%s", msg);
    c.n_layers = layers;
    c.seq_len = seq;
    return c;
}

Test(framework, megatron_profile_leaves_every_memory_part_as_it_was) {
    gpt_config c = llama8(8, 4096);
    layout l;
    char msg[256];
    cr_assert_eq(layout_parse("tp=2,sp=1,pp=2,dp=4,zero=1,mbs=2,gbs=16", &l, msg, sizeof msg), PL_OK);
    framework_profile f;
    framework_default(&f);
    cr_assert(framework_is_neutral(&f));
    for (int stage = 0; stage < 2; stage++) {
        layout_memory a, b;
        layout_stage_memory_p(&c, &l, NULL, stage, 4, 3, &a);
        framework_stage_memory(&f, &c, &l, NULL, stage, 4, 3, &b);
        cr_assert(!memcmp(&a, &b, sizeof a), "stage %d differs", stage);
    }
}

/* Gradient accumulation (framework_profile.grad_accum_bytes, grads_lazy): a
 * stack that adds each later micro-batch's gradient to the held one pays
 * (m - 1) memory-bound passes of grad_accum_bytes per held gradient element,
 * and its lazy gradients stop saving memory once a step has two micro-batches
 * (the first one's gradients are held through the next one's forward). The
 * case is the exported torchtitan plan run on one H200 (docs/exports.md):
 * Llama-3-8B cut to 8 layers, mbs 2, gbs 8. */
Test(framework, gradient_accumulation_costs_its_passes_and_holds_the_gradients) {
    gpt_config c = llama8(8, 4096);
    cluster clu;
    char msg[512];
    cr_assert_eq(cluster_load("dgx-h200", NULL, &clu, msg, sizeof msg), PL_OK, "%s", msg);
    framework_profile f;
    framework_default(&f);
    f.fp32_params = f.grads_lazy = 1;
    f.weight_copy_bytes = 2;
    layout_sim_params p;
    layout_sim_params_default(&p);
    p.framework = &f;
    double step[2][2]; /* [grad_accum_bytes 0 / 12][gbs 2 / 8] */
    layout_memory mem[2];
    for (int g = 0; g < 2; g++) {
        layout l;
        cr_assert_eq(layout_parse(g ? "mbs=2,gbs=8" : "mbs=2,gbs=2", &l, msg, sizeof msg), PL_OK, "%s", msg);
        for (int a = 0; a < 2; a++) {
            f.grad_accum_bytes = a ? 12 : 0;
            layout_sim *s = NULL;
            layout_result r;
            cr_assert_eq(layout_sim_create(&c, &l, &clu, &s, msg, sizeof msg), PL_OK, "%s", msg);
            cr_assert_eq(layout_sim_run(s, &p, 0, &r, msg, sizeof msg), PL_OK, "%s", msg);
            layout_sim_destroy(s);
            step[a][g] = r.step_us;
            if (a) mem[g] = r.mem;
        }
    }
    cr_assert_eq(step[1][0], step[0][0], "one micro-batch a step accumulates nothing");
    int64_t total = 0, active = 0;
    gpt_param_counts(&c, 1, &total, &active);
    const double want = 3 * memory_time_us(&clu.gpus[0], (double)total * 12, &p.compute);
    cr_assert(fabs((step[1][1] - step[0][1]) - want) < 1e-6 * want, "accumulation %.3f us, want 3 passes %.3f us",
              step[1][1] - step[0][1], want);
    /* memory: at m = 1 the larger of the forward's parts and the gradients; at m = 4 every part at once */
    cr_assert_eq(mem[1].total - mem[0].total, mem[1].grads,
                 "m = 4 holds the gradients beside the activations: %lld - %lld != %lld", (long long)mem[1].total,
                 (long long)mem[0].total, (long long)mem[1].grads);
}

Test(framework, fp32_params_and_lazy_grads_move_the_parts_they_name) {
    gpt_config c = llama8(8, 4096);
    layout l;
    char msg[256];
    cr_assert_eq(layout_parse("mbs=1,gbs=1", &l, msg, sizeof msg), PL_OK);
    framework_profile f;
    framework_default(&f);
    f.fp32_params = 1;
    layout_memory a, b;
    layout_stage_memory_p(&c, &l, NULL, 0, 8, 1, &a);
    framework_stage_memory(&f, &c, &l, NULL, 0, 8, 1, &b);
    /* 2 + 2 + 12 becomes 4 + 4 + 8 bytes a parameter: the same sum */
    cr_assert_eq(b.params, 2 * a.params);
    cr_assert_eq(b.grads, 2 * a.grads);
    cr_assert_eq(b.params + b.grads + b.optimizer, a.params + a.grads + a.optimizer);
    f.grads_lazy = 1;
    f.weight_copy_bytes = 2;
    framework_stage_memory(&f, &c, &l, NULL, 0, 8, 1, &b);
    const int64_t copies = b.params - 2 * a.params;
    const int64_t head = (int64_t)c.vocab * c.d_model; /* Llama 3's vocabulary needs no padding at tp 1 */
    cr_assert_eq(copies, 2 * (layer_params_per_gpu(&c, &l) * 8 + head),
                 "bf16 copies of the layers' and the head's matrices, not of the embedding lookup");
    layout full = l;
    full.recompute = RECOMPUTE_FULL;
    layout_memory fa, fb;
    layout_stage_memory_p(&c, &full, NULL, 0, 8, 1, &fa);
    framework_stage_memory(&f, &c, &full, NULL, 0, 8, 1, &fb);
    cr_assert_eq(fb.params - 2 * fa.params, 2 * head, "full recompute: the layers' casts are redone, the head's kept");
    const int64_t fwd = copies + b.activations + b.embedding_head;
    cr_assert_eq(b.total, 2 * a.params + b.optimizer + b.buffers + (fwd > b.grads ? fwd : b.grads));
    f.k[FW_K_ACT] = 2.0;
    layout_memory d;
    framework_stage_memory(&f, &c, &l, NULL, 0, 8, 1, &d);
    cr_assert_eq(d.activations, 2 * a.activations);
}

#define HDR "run,model,cluster,gpus,layout,seq,framework,step_ms,peak_gib\n"

/* Runs made by the simulator under known constants, then fitted from the
 * base (every constant 1): the fit must find the constants again. */
Test(layout_runs, fit_on_synthetic_runs_recovers_known_constants, .timeout = 120) {
    framework_profile truth;
    char msg[512];
    cr_assert_eq(framework_load("hf", &truth, msg, sizeof msg), PL_OK, "%s", msg);
    framework_profile base = truth;
    truth.k[FW_K_GEMM] = 0.83;
    truth.k[FW_K_MEMORY] = 1.9;
    truth.k[FW_K_ACT] = 1.35;
    static const struct {
        int mbs, seq;
        const char *rec;
    } shapes[] = {{1, 2048, "none"}, {2, 2048, "none"}, {1, 4096, "none"}, {4, 1024, "full"},
                  {2, 4096, "none"}, {1, 8192, "none"}, {8, 512, "none"},  {2, 2048, "full"}};
    const int n = (int)(sizeof shapes / sizeof shapes[0]);
    layout_run runs[8];
    for (int i = 0; i < n; i++) {
        layout_run *r = &runs[i];
        memset(r, 0, sizeof *r);
        snprintf(r->id, sizeof r->id, "s%d", i);
        snprintf(r->model, sizeof r->model, "llama-3-8b,layers=4");
        snprintf(r->cluster, sizeof r->cluster, "h200x2");
        snprintf(r->layout, sizeof r->layout, "mbs=%d,gbs=%d,recompute=%s,precision=bf16", shapes[i].mbs,
                 shapes[i].mbs, shapes[i].rec);
        snprintf(r->framework, sizeof r->framework, "synthetic");
        r->gpus = 1;
        r->seq = shapes[i].seq;
        r->split = -1;
        double res;
        cr_assert_eq(layout_run_predict(r, &truth, &r->step_us, &r->peak_bytes, &res, msg, sizeof msg), PL_OK, "%s", msg);
        r->reserved_bytes = -1;
    }
    layout_fit_result fit;
    cr_assert_eq(layout_runs_fit(runs, n, NULL, &base, &fit, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_eq(fit.n_fit, 4);
    cr_assert_eq(fit.n_test, 4);
    for (int k = 0; k < FW_K_COUNT; k++) {
        cr_assert(fit.fitted_k[k]);
        cr_assert(fabs(fit.fitted.k[k] - truth.k[k]) < 0.01 * truth.k[k], "%s: fitted %.5f, true %.5f",
                  framework_const_name((framework_const)k), fit.fitted.k[k], truth.k[k]);
    }
    cr_assert(fit.step_max[1] < 0.005 && fit.mem_max[1] < 0.005, "held out: step %.4f, memory %.4f", fit.step_max[1],
              fit.mem_max[1]);
    cr_assert_str_eq(fit.fitted.name, "synthetic");
    layout_fit_free(&fit);
}

/* The command: an unknown framework, a missing column and an unknown unit
 * are one line on stderr and exit 2. */
Test(layout_runs, command_refuses_bad_files_with_one_line_and_exit_2, .timeout = 60) {
    static const struct {
        const char *csv, *want;
    } bad[] = {
        {HDR "a,\"llama-3-8b,layers=2\",h200x2,1,\"mbs=1,gbs=1\",1024,mystack,10,5\n", "unknown framework 'mystack'"},
        {"run,model,cluster,gpus,layout,seq,framework,peak_gib\n" "a,m,c,1,l,1,hf,5\n", "missing column 'step_<unit>'"},
        {"run,model,cluster,gpus,layout,seq,framework,step_fortnights\n" "a,m,c,1,l,1,hf,5\n", "unknown unit 'fortnights'"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char csv[] = "/tmp/placer-runs-XXXXXX", err[] = "/tmp/placer-runs-err-XXXXXX", cmd[1024], line[1024] = "";
        int fd = mkstemp(csv), fe = mkstemp(err);
        cr_assert(fd >= 0 && fe >= 0);
        FILE *f = fdopen(fd, "w");
        fputs(bad[i].csv, f);
        fclose(f);
        close(fe);
        snprintf(cmd, sizeof cmd, "%s calibrate --layout-runs %s > /dev/null 2> %s", PLACER_BIN, csv, err);
        int rc = system(cmd);
        FILE *e = fopen(err, "r");
        int lines = 0;
        while (e && fgets(line + strlen(line), (int)(sizeof line - strlen(line)), e)) lines++;
        if (e) fclose(e);
        remove(csv);
        remove(err);
        cr_assert(WIFEXITED(rc) && WEXITSTATUS(rc) == 2, "case %zu: status %d", i, rc);
        cr_assert_eq(lines, 1, "case %zu: %d lines: %s", i, lines, line);
        cr_assert(strstr(line, bad[i].want), "case %zu: '%s'", i, line);
    }
}
