/* print_confirm.c: `placer confirm`'s tables (print_confirm.h). */
#include "print_confirm.h"

#include <stdio.h>

#include "stats.h"
#include "util.h"

void print_confirm_start(const calib_session *s) {
    const calib_confirm *cf = s->cf;
    const calib_confirm_config *cfg = &s->cfg;
    const calib_sides_info *info = &s->info;
    fprintf(stderr, "placer confirm: %d candidates over %d sides (rl %d%s, single %d, human %d, dp %d, search %d %s); "
                    "%d selection rounds, then %d confirmation rounds of %d steps after %d warm-up, %s timer%s%s\n",
            cf->n_cand, cf->n_sides, info->n_added[0], info->rl_from_checkpoint ? " from checkpoint" : " from samples",
            info->n_added[1], info->n_added[2], info->n_added[3], info->n_added[4], info->search_method,
            cfg->selection_rounds, cfg->confirm_rounds, cfg->steps, cfg->warmup, s->t.name, s->hw ? " in " : "",
            s->hw ? hw_precision_name(calib_hw_timer_precision(s->hw)) : "");
}

/* One row of the table: side s's pick and its confirmation rounds. */
static void print_side_row(const calib_confirm *cf, int s, int win) {
    const calib_side *sd = &cf->sides[s];
    int n_oom = 0;
    for (int i = 0; i < cf->n_cand; i++) n_oom += cf->cands[i].side == s && cf->cands[i].oom;
    char cands[16], conf[48] = "OOM", se[16] = "-", pred[24] = "-";
    snprintf(cands, sizeof cands, "%d/%d", sd->n_cand, n_oom);
    const calib_candidate *k = sd->pick >= 0 ? &cf->cands[sd->pick] : NULL;
    if (k && sd->summary.n > 0) {
        snprintf(conf, sizeof conf, "%.3f +- %.3f", sd->summary.mean / 1000, sd->summary.sd / 1000);
        snprintf(se, sizeof se, "%.3f", sd->summary.se / 1000);
    }
    if (k) snprintf(pred, sizeof pred, "%.3f%s", k->pred_us / 1000, k->pred_oom ? " OOM" : "");
    printf("  %-8s %-32.32s %9s %20s %9s %12s%s\n", sd->name, k ? k->label : "-", cands, conf, se, pred,
           s == win ? "  <- fastest" : "");
}

void print_confirm(const calib_session *s, const calib_model *mo, const char *layout) {
    const calib_confirm *cf = s->cf;
    const calib_confirm_config *cfg = &s->cfg;
    const int win = s->winner;
    char capbuf[32] = "none";
    if (cfg->mem_cap > 0) pl_format_bytes((double)cfg->mem_cap, capbuf, sizeof capbuf);
    printf("confirm %s: m=%d %s, cap %s, graph %s; simulator %s\n", cfg->label, cfg->sched.micro_batches,
           schedule_order_name(cfg->sched.order), capbuf, mo->key,
           s->n_calibrated ? "calibrated" : "neutral (not calibrated)");
    if (layout) printf("layout %s: its pipeline split is the side 'layout'\n", layout);
    printf("%d selection rounds over %d candidates, %d confirmation rounds of the picks (%d steps each after %d "
           "warm-up); only confirmation rounds below\n\n",
           cfg->selection_rounds, cf->n_cand, cfg->confirm_rounds, cfg->steps, cfg->warmup);
    printf("  %-8s %-32s %9s %20s %9s %12s\n", "side", "pick", "cands/OOM", "mean +- sd (ms)", "se (ms)",
           "predicted");
    for (int i = 0; i < cf->n_sides; i++) print_side_row(cf, i, win);
    if (win >= 0) {
        printf("\ndifference to the fastest side (%s), in standard errors (Welch):\n", cf->sides[win].name);
        for (int i = 0; i < cf->n_sides; i++) {
            if (i == win || cf->sides[i].summary.n == 0) continue;
            calib_diff d = calib_welch(cf->sides[i].summary, cf->sides[win].summary);
            printf("  %-8s %+8.3f ms (%+.1f%%), %+.1f se, dof %.1f\n", cf->sides[i].name, d.diff / 1000,
                   100.0 * d.diff / cf->sides[win].summary.mean, d.z, d.dof);
        }
    }
    printf("\nstored: %d timings (purposes confirm-select, confirm), confirmation %lld%s\n", cf->n_timings,
           (long long)s->confirm_id, s->traced ? ", a measured trace of the fastest side" : "");
}

static const char *layouts_backend(const calib_layouts_opts *o) {
    return o->cuda ? "CUDA backend, every rank on GPU 0" : "CPU backend";
}

void print_confirm_layouts_start(const calib_layouts_opts *o, int n) {
    fprintf(stderr, "placer confirm: %d layout%s, %d rounds of %d steps after %d warm-up, %s, one process per rank\n",
            n, n > 1 ? "s" : "", o->rounds, o->steps, o->warmup, layouts_backend(o));
}

void print_confirm_layouts(const calib_layouts_confirm *c, const calib_model *mo, const step_layout *sl,
                           const calib_layouts_opts *o) {
    const calib_layout_prediction *pred = c->pred;
    printf("confirm --layout: graph %s, batch %d, %s, one process per rank; %d rounds of %d steps after %d warm-up, "
           "layouts shuffled each round\n",
           mo->key, mo->cfg.batch, layouts_backend(o), o->rounds, o->steps, o->warmup);
    printf("predicted: the layout simulator on a one-node cluster made from the profile (compute and memory rates "
           "fitted to its single-device steps, collectives from its curves: %s)\n\n",
           c->meas->source);
    printf("  %5s %22s %9s %13s %8s %14s  %s\n", "ranks", "measured mean +- sd ms", "se ms", "predicted ms", "error",
           "collectives", "layout");
    for (int i = 0; i < c->n; i++) {
        calib_summary s = calib_summarize(c->median_us + (size_t)i * c->rounds, c->rounds);
        const double err = 100.0 * (pred[i].step_us - s.mean) / s.mean;
        char coll[48];
        snprintf(coll, sizeof coll, "%d/%d/%d", pred[i].n_measured, pred[i].n_fitted, pred[i].n_model);
        printf("  %5d %14.3f +- %5.3f %9.3f %13.3f %+7.1f%% %14s  %s\n", sl[i].world, s.mean / 1e3, s.sd / 1e3,
               s.se / 1e3, pred[i].step_us / 1e3, err, coll, sl[i].text);
    }
    printf("  (collectives: how many of the simulator's collective times came from a measured curve / the fitted "
           "model / the cluster model)\n");
    printf("rates fitted to the profile's %d single-device step anchors: %.3g GFLOP/s, %.3g GB/s%s (%.1f us per "
           "kernel, not fitted); their relative error rms %.1f%%, max %.1f%%\n",
           pred[0].n_anchors, pred[0].flops / 1e9, pred[0].mem_bw / 1e9, pred[0].one_scale ? " (one common scale)" : "",
           pred[0].kernel_us, 100 * pred[0].anchor_rms, 100 * pred[0].anchor_max);
    printf("\nstored: %d timings (purpose confirm-layout)\n", c->n * c->rounds);
    printf("limits: the ranks share %s, which the simulator (one GPU per rank) does not model\n",
           o->cuda ? "GPU 0 and its collectives go through host memory" : "this host's cores");
}
