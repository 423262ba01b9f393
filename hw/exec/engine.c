/*
 * engine.c: engines (a backend and its devices) and programs (a compiled
 * placement with its device memory): creation, validation, the OOM verdict,
 * parameter initialisation, batches, and reading parameters back.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nodes.h"
#include "placement.h"
#include "placer_config.h"
#include "program_internal.h"
#include "util.h"

pl_status hw_engine_create(const hw_engine_opts *o, hw_engine **out, char *msg, size_t len) {
    *out = NULL;
    if (!o || o->n_devices < 1 || o->n_devices > HW_MAX_DEVICES)
        return pl_fail(msg, len, PL_ERR_INVALID, "the engine needs 1 to %d devices", HW_MAX_DEVICES);
    hw_engine *e = calloc(1, sizeof *e);
    if (!e) return pl_fail(msg, len, PL_ERR_NOMEM, "out of host memory");
    pl_status st;
    hw_precision prec = o->precision;
    if (prec < HW_PREC_DEFAULT || prec > HW_PREC_BF16) {
        free(e);
        return pl_fail(msg, len, PL_ERR_INVALID, "unknown precision %d", (int)prec);
    }
    if (prec == HW_PREC_DEFAULT)
        prec = o->backend == HW_BACKEND_CPU || o->strict_fp32 ? HW_PREC_FP32 : HW_PREC_TF32;
    /* the GEMMs of fp32 values: strict in fp32 mode, TF32 in tf32 and bf16 (where
     * only the attention core without the flash kernel has any) */
    int strict = prec == HW_PREC_FP32;
    if (o->backend == HW_BACKEND_CPU)
        st = hw_backend_cpu_create(o->n_devices, &e->be, msg, len);
    else
        st = hw_backend_cuda_create(o->gpus, o->n_devices, strict, &e->be, msg, len);
    if (st != PL_OK) {
        free(e);
        return st;
    }
    e->issue = o->issue;
    e->graphs = o->graphs;
    e->prec = prec;
    *out = e;
    return PL_OK;
}

void hw_engine_destroy(hw_engine *e) {
    if (!e) return;
    hw_pool_destroy(e->pool);
    hw_backend_destroy(e->be);
    free(e);
}

int hw_engine_n_devices(const hw_engine *e) { return e->be->n_devices; }

hw_precision hw_engine_precision(const hw_engine *e) { return e->prec; }

const char *hw_precision_name(hw_precision p) {
    switch (p) {
    case HW_PREC_FP32: return "fp32";
    case HW_PREC_TF32: return "tf32";
    case HW_PREC_BF16: return "bf16";
    default: return "default";
    }
}

pl_status hw_precision_parse(const char *s, hw_precision *out, char *msg, size_t len) {
    static const hw_precision all[] = {HW_PREC_FP32, HW_PREC_TF32, HW_PREC_BF16};
    for (int i = 0; s && i < 3; i++)
        if (!strcmp(s, hw_precision_name(all[i]))) {
            *out = all[i];
            return PL_OK;
        }
    return pl_fail(msg, len, PL_ERR_INVALID, "unknown precision '%s' (fp32, tf32 or bf16)", s ? s : "");
}

const hw_device_info *hw_engine_device(const hw_engine *e, int dev) {
    return (dev >= 0 && dev < e->be->n_devices) ? &e->be->info[dev] : NULL;
}

hw_backend *hw_engine_backend(hw_engine *e) { return e->be; }

int hw_engine_live_arenas(const hw_engine *e) { return e->live_arenas; }

void hw_engine_fail_alloc_at(hw_engine *e, int n) {
    e->fail_at = n;
    e->alloc_count = 0;
}

int64_t hw_engine_free_bytes(hw_engine *e, int dev) {
    int64_t f = -1;
    if (e->be->ops->mem_free_bytes(e->be, dev, &f) != PL_OK) return -1;
    return f;
}

hw_adamw hw_adamw_default(void) {
    hw_adamw a = {3e-4f, 0.9f, 0.95f, 1e-8f, 0.1f};
    return a;
}

/* ---- programs ---- */

/* The engine runs the original GPT block and its parallel-residual form
 * (y = x + attn(ln1(x)) + mlp(ln2(x)): the same nodes, only ln2 reads the
 * block input, which then has three consumers; the program's compiler
 * (program.c) sums any number of gradient contributions,
 * tests/hw/test_parallel_residual.c checks it against the definition). Every other extension changes a node's math and
 * is refused. */
static pl_status check_graph(const graph *g, char *msg, size_t len) {
    gpt_config serial = g->cfg;
    serial.parallel_residual = 0;
    if (!gpt_config_is_plain(&serial))
        return pl_fail(msg, len, PL_ERR_UNSUPPORTED,
                       "the engine runs only the original GPT block (layernorm, GELU, learned positions, "
                       "untied head, biases, no GQA or vocabulary padding; a parallel residual is allowed); "
                       "simulate this model with placer layout");
    int n_loss = 0, n_emb = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        const graph_node *n = &g->nodes[i];
        if (n->kind == OP_LOSS) {
            n_loss++;
            if (n->n_inputs != 1 || graph_n_consumers(g, n->inputs[0]) != 1)
                return pl_fail(msg, len, PL_ERR_UNSUPPORTED,
                               "the loss must be the only consumer of its one input (it works in place)");
            if (graph_n_consumers(g, i) != 0)
                return pl_fail(msg, len, PL_ERR_UNSUPPORTED, "nothing may consume the loss");
        } else if (graph_n_consumers(g, i) == 0) {
            return pl_fail(msg, len, PL_ERR_UNSUPPORTED, "node %s has no consumer", n->name);
        }
        if (n->kind == OP_EMBEDDING) n_emb++;
    }
    if (n_loss != 1 || n_emb != 1)
        return pl_fail(msg, len, PL_ERR_UNSUPPORTED, "the graph needs one embedding and one loss");
    return PL_OK;
}

void hw_program_destroy(hw_program *p) {
    if (!p) return;
    hw_backend *be = p->e->be;
    if (p->par) p->par->ops->detach(p->par_state); /* the groups' state first: it borrows the devices */
    for (int d = 0; d < p->n_dev; d++)
        if (p->dev[d].graph) be->ops->graph_destroy(be, d, p->dev[d].graph);
    for (int d = 0; d < p->n_dev; d++)
        if (p->dev[d].base) {
            be->ops->mem_free(be, d, p->dev[d].base);
            p->e->live_arenas--;
        }
    hw_program_free_code(p);
    free(p->placement);
    free(p->model_off);
    free(p->shard_off);
    free(p->trace);
    free(p);
}

static void format_need(char *buf, size_t n, int64_t bytes) { pl_format_bytes((double)bytes, buf, n); }

/* Gather the model view's shards of device d into host staging. */
static void gather_shards(const hw_program *p, int d, const float *model, float *staging) {
    const graph *g = p->g;
    for (int n = 0; n < g->n_nodes; n++) {
        if (p->placement[n] != d) continue;
        if (p->split.tp_size > 1) /* the tp rank's slice (param_memory.h) */
            hw_tp_shard_from_full(g, n, p->split.tp_rank, p->split.tp_size, model + p->model_off[n],
                                  staging + p->shard_off[n]);
        else
            memcpy(staging + p->shard_off[n], model + p->model_off[n],
                   sizeof(float) * (size_t)(p->model_off[n + 1] - p->model_off[n]));
    }
}

static void scatter_shards(const hw_program *p, int d, const float *staging, float *model) {
    const graph *g = p->g;
    for (int n = 0; n < g->n_nodes; n++) {
        if (p->placement[n] != d) continue;
        if (p->split.tp_size > 1) /* only the tp rank's slice; the rest of the view is left alone */
            hw_tp_shard_to_full(g, n, p->split.tp_rank, p->split.tp_size, staging + p->shard_off[n],
                                model + p->model_off[n]);
        else
            memcpy(model + p->model_off[n], staging + p->shard_off[n],
                   sizeof(float) * (size_t)(p->model_off[n + 1] - p->model_off[n]));
    }
}

/* Whether the engine runs this placement, schedule and graph, and what the
 * process groups split (o->parallel's describe and check hooks,
 * parallel.h). PL_OK with *split filled; else the first refusal's status
 * and one line in msg: PL_ERR_INVALID (no placement), the placement's and
 * the schedule's statuses, PL_ERR_UNSUPPORTED (an order, backend, precision
 * or graph the engine does not run), or the groups' own checks. */
static pl_status check_request(const hw_engine *e, const graph *g, const hw_program_opts *o, hw_split *split,
                               char *msg, size_t len) {
    const hw_backend *be = e->be;
    *split = hw_split_none();
    if (!o || !o->placement) return pl_fail(msg, len, PL_ERR_INVALID, "no placement given");
    pl_status st = placement_validate(o->placement, g->n_nodes, be->n_devices, msg, len);
    if (st != PL_OK) return st;
    if ((st = schedule_validate(&o->sched, g->cfg.batch, msg, len)) != PL_OK) return st;
    if (o->parallel) o->parallel->ops->describe(o->parallel, split);
    if (o->sched.order != SCHED_GPIPE && o->sched.order != SCHED_1F1B && o->sched.order != SCHED_ZB_H1 &&
        o->sched.order != SCHED_ZB_H2)
        return pl_fail(msg, len, PL_ERR_UNSUPPORTED, "the engine runs the gpipe, 1f1b, zb-h1 and zb-h2 schedules only");
    if (schedule_splits_backward(o->sched.order)) {
        /* the split backward (B, then W later): the fp32 kernels (CPU; CUDA
         * strict fp32, the plain paths), no tensor or data parallelism */
        if (strcmp(be->ops->name, "cpu") != 0 && strcmp(be->ops->name, "cuda") != 0)
            return pl_fail(msg, len, PL_ERR_UNSUPPORTED, "%s does not run on the %s backend",
                           schedule_order_name(o->sched.order), be->ops->name);
        const int fp32 = e->prec == HW_PREC_FP32 || (strcmp(be->ops->name, "cpu") == 0 && e->prec == HW_PREC_TF32);
        if (!fp32 || split->groups) /* the CPU backend computes tf32 as fp32 */
            return pl_fail(msg, len, PL_ERR_UNSUPPORTED,
                           "%s runs in fp32 (on CUDA: --strict-fp32) without tensor or data parallelism only",
                           schedule_order_name(o->sched.order));
    }
    if ((st = check_graph(g, msg, len)) != PL_OK) return st;
    /* the groups' own checks, and the rest of the split (parallel.h) */
    if (o->parallel && (st = o->parallel->ops->check(o->parallel, be, g, g->cfg.batch / o->sched.micro_batches,
                                                     e->prec == HW_PREC_BF16, split, msg, len)) != PL_OK)
        return st;
    return PL_OK;
}

/* A program with its host-side fields set (no code, no device memory yet):
 * the options' schedule and optimizer, the split, a copy of the placement,
 * the model view's offsets and the devices of the embedding and the loss.
 * On success *out owns it (hw_program_destroy); PL_ERR_NOMEM leaves *out
 * NULL and nothing allocated. */
static pl_status program_new(hw_engine *e, const graph *g, const hw_program_opts *o, const hw_split *split,
                             hw_program **out, char *msg, size_t len) {
    *out = NULL;
    hw_program *p = calloc(1, sizeof *p);
    if (!p) return pl_fail(msg, len, PL_ERR_NOMEM, "out of host memory");
    p->e = e;
    p->g = g;
    p->n_dev = e->be->n_devices;
    p->sched = o->sched;
    p->b = g->cfg.batch / o->sched.micro_batches;
    p->adamw = o->adamw;
    p->split = *split;
    p->bf16 = e->prec == HW_PREC_BF16;
    p->placement = malloc(sizeof(int) * (size_t)g->n_nodes);
    p->model_off = malloc(sizeof(int64_t) * (size_t)(g->n_nodes + 1));
    p->shard_off = calloc((size_t)g->n_nodes, sizeof(int64_t));
    if (!p->placement || !p->model_off || !p->shard_off) {
        hw_program_destroy(p);
        return pl_fail(msg, len, PL_ERR_NOMEM, "out of host memory");
    }
    memcpy(p->placement, o->placement, sizeof(int) * (size_t)g->n_nodes);
    hw_model_param_offsets(g, p->model_off);
    for (int i = 0; i < g->n_nodes; i++) {
        if (g->nodes[i].kind == OP_LOSS) p->loss_dev = p->placement[i];
        if (g->nodes[i].kind == OP_EMBEDDING) p->emb_dev = p->placement[i];
    }
    *out = p;
    return PL_OK;
}

/* Each device's cap into caps (be->n_devices entries): o->caps, or the
 * device's own memory. PL_ERR_INVALID with one line for a cap that is not
 * positive. */
static pl_status resolve_caps(const hw_backend *be, const hw_program_opts *o, int64_t *caps, char *msg, size_t len) {
    for (int d = 0; d < be->n_devices; d++) {
        caps[d] = o->caps ? o->caps[d] : be->info[d].mem_bytes;
        if (caps[d] <= 0)
            return pl_fail(msg, len, PL_ERR_INVALID, "device %d has a cap of %lld bytes", d, (long long)caps[d]);
    }
    return PL_OK;
}

/* Compile p under caps, and fill mem (or NULL) with each device's static
 * bytes, need and cap. Over a cap: compile again without caps to learn what
 * each device would need (-1 where that fails too), report it in mem (the
 * first device over, oom_device) and in one line, and return
 * PL_ERR_DEVICE_OOM. Other failures: the compiler's status and line. On
 * failure the caller destroys p. */
static pl_status compile_capped(hw_program *p, const int64_t *caps, hw_mem_report *mem, char *msg, size_t len) {
    const int nd = p->n_dev;
    int oom_dev = -1;
    pl_status st = hw_program_compile(p, caps, &oom_dev, msg, len);
    if (st == PL_ERR_DEVICE_OOM) {
        int64_t big[HW_MAX_DEVICES];
        for (int d = 0; d < nd; d++) big[d] = INT64_MAX / 4;
        int unused;
        pl_status st2 = hw_program_compile(p, big, &unused, NULL, 0);
        if (mem) {
            mem->oom_device = oom_dev;
            for (int d = 0; d < nd; d++) {
                mem->static_bytes[d] = p->dev[d].static_bytes;
                mem->need_bytes[d] = st2 == PL_OK ? p->dev[d].need_bytes : -1;
                mem->cap_bytes[d] = caps[d];
            }
        }
        char need[32], cap[32];
        format_need(need, sizeof need, st2 == PL_OK ? p->dev[oom_dev].need_bytes : 0);
        format_need(cap, sizeof cap, caps[oom_dev]);
        if (st2 == PL_OK)
            pl_fail(msg, len, PL_ERR_DEVICE_OOM, "device %d needs %s for this placement, over its cap of %s",
                    oom_dev, need, cap);
        else
            pl_fail(msg, len, PL_ERR_DEVICE_OOM, "device %d is over its cap of %s", oom_dev, cap);
        return PL_ERR_DEVICE_OOM;
    }
    if (st != PL_OK) return st;
    if (mem)
        for (int d = 0; d < nd; d++) {
            mem->static_bytes[d] = p->dev[d].static_bytes;
            mem->need_bytes[d] = p->dev[d].need_bytes;
            mem->cap_bytes[d] = caps[d];
        }
    return PL_OK;
}

/* The device memory: one allocation per used device, of exactly its need
 * (counted in the engine's live_arenas; the engine's fail_at injects a
 * failure), and the events its code uses. On failure: the status and one
 * line (a device short of memory is PL_ERR_DEVICE_OOM and mem's
 * oom_device); what was allocated stays in p for hw_program_destroy. */
static pl_status alloc_arenas(hw_program *p, hw_mem_report *mem, char *msg, size_t len) {
    hw_engine *e = p->e;
    hw_backend *be = e->be;
    for (int d = 0; d < p->n_dev; d++) {
        if (!p->dev[d].used) continue;
        int inject = e->fail_at > 0 && ++e->alloc_count == e->fail_at;
        pl_status st = inject ? PL_ERR_DEVICE_OOM : be->ops->mem_alloc(be, d, p->dev[d].need_bytes, &p->dev[d].base);
        if (st != PL_OK) {
            char need[32];
            format_need(need, sizeof need, p->dev[d].need_bytes);
            if (st == PL_ERR_DEVICE_OOM) {
                if (mem) mem->oom_device = d;
                pl_fail(msg, len, st, "device %d could not allocate %s%s", d, need,
                        inject ? " (injected failure)" : " (the GPU is short of free memory)");
            } else {
                pl_fail(msg, len, st, "device %d: %s", d, be->err);
            }
            p->dev[d].base = NULL;
            return st;
        }
        e->live_arenas++;
        if ((st = be->ops->events_reserve(be, d, p->dev[d].n_events)) != PL_OK)
            return pl_fail(msg, len, st, "device %d: %s", d, be->err);
    }
    return PL_OK;
}

/* The process groups' state for this program (the attach hook: their
 * collectives on each used device; collective, as every rank has the same
 * used devices), when the split has collectives to run. On failure p keeps
 * no hooks (attach left nothing behind) and the status and line are the
 * hook's. */
static pl_status attach_groups(hw_program *p, const hw_parallel *par, char *msg, size_t len) {
    if (!hw_split_active(&p->split)) return PL_OK;
    p->par = par;
    pl_status st = par->ops->attach(par, p, &p->par_state, msg, len);
    if (st != PL_OK) p->par = NULL;
    return st;
}

/* Parameters from o's seed (or o's model view) into every used device's
 * flat buffer (its tp slice with tensor parallelism), with zero gradients,
 * moments and step counter, and the bf16 copy where the program keeps one.
 * PL_ERR_NOMEM, or the backend's status with "device D: ..." in msg. */
static pl_status init_params(hw_program *p, const hw_program_opts *o, char *msg, size_t len) {
    hw_backend *be = p->e->be;
    float *model = NULL, *staging = NULL;
    int64_t total = p->model_off[p->g->n_nodes], max_dev = 1;
    for (int d = 0; d < p->n_dev; d++)
        if (p->dev[d].param_floats > max_dev) max_dev = p->dev[d].param_floats;
    staging = malloc(sizeof(float) * (size_t)max_dev);
    if (!o->init_params) model = malloc(sizeof(float) * (size_t)total);
    if (!staging || (!o->init_params && !model)) {
        free(staging);
        free(model);
        return pl_fail(msg, len, PL_ERR_NOMEM, "out of host memory for the parameters");
    }
    if (!o->init_params) hw_params_init(p->g, o->seed, model);
    const float *src = o->init_params ? o->init_params : model;
    pl_status st = PL_OK;
    for (int d = 0; d < p->n_dev && st == PL_OK; d++) {
        hw_program_dev *pd = &p->dev[d];
        if (!pd->used) continue;
        char *base = pd->base;
        int64_t bytes = pd->param_floats * 4;
        gather_shards(p, d, src, staging);
        st = be->ops->zero(be, d, base + pd->off_step, 4);
        if (st == PL_OK && bytes > 0) {
            st = be->ops->zero(be, d, base + pd->off_grads, bytes);
            if (st == PL_OK) st = be->ops->zero(be, d, base + pd->off_m, pd->moment_floats * 4);
            if (st == PL_OK) st = be->ops->zero(be, d, base + pd->off_v, pd->moment_floats * 4);
            if (st == PL_OK) st = be->ops->upload(be, d, base + pd->off_params, staging, bytes);
            if (st == PL_OK && pd->off_params16 >= 0) st = hw_upload_copy16(be, d, base + pd->off_params16, staging,
                                                                        pd->param_floats);
        }
        if (st != PL_OK) pl_fail(msg, len, st, "device %d: %s", d, be->err);
    }
    free(staging);
    free(model);
    return st;
}

/* Whether p's steps issue with one host thread per used device: where
 * launches cost host time (CUDA) with more than one used device, or when
 * the engine asks for threads (tests on the CPU backend); never with
 * process groups (their collectives run from one thread) or where the
 * backend cannot. */
static int issue_threaded(hw_program *p) {
    hw_backend *be = p->e->be;
    int used = 0;
    for (int d = 0; d < p->n_dev; d++) used += p->dev[d].used;
    return used > 1 && !p->par && be->ops->threads_ok(be) &&
           (p->e->issue == HW_ISSUE_THREADS || (p->e->issue == HW_ISSUE_AUTO && strcmp(be->ops->name, "cuda") == 0));
}

pl_status hw_program_create(hw_engine *e, const graph *g, const hw_program_opts *o, hw_program **out,
                            hw_mem_report *mem, char *msg, size_t len) {
    *out = NULL;
    if (mem) {
        memset(mem, 0, sizeof *mem);
        mem->n_devices = e->be->n_devices;
        mem->oom_device = -1;
    }
    hw_split split;
    pl_status st = check_request(e, g, o, &split, msg, len);
    if (st != PL_OK) return st;
    hw_program *p = NULL;
    if ((st = program_new(e, g, o, &split, &p, msg, len)) != PL_OK) return st;
    int64_t caps[HW_MAX_DEVICES];
    if ((st = resolve_caps(e->be, o, caps, msg, len)) == PL_OK &&
        (st = compile_capped(p, caps, mem, msg, len)) == PL_OK && (st = alloc_arenas(p, mem, msg, len)) == PL_OK &&
        (st = attach_groups(p, o->parallel, msg, len)) == PL_OK)
        st = init_params(p, o, msg, len);
    if (st != PL_OK) {
        hw_program_destroy(p); /* everything taken so far */
        return st;
    }
    p->threaded = issue_threaded(p);
    *out = p;
    return PL_OK;
}

int64_t hw_program_peak_bytes(const hw_program *p, int dev) {
    if (dev < 0 || dev >= p->n_dev || !p->dev[dev].used) return 0;
    return p->dev[dev].need_bytes;
}

int hw_program_reorders(const hw_program *p) { return p->reorders; }

int hw_program_graph_state(const hw_program *p) { return p->graph_state; }

const char *hw_program_collectives(const hw_program *p) {
    return p->par ? p->par->ops->transport(p->par_state, p) : "none";
}

void hw_make_batch(const gpt_config *cfg, uint64_t seed, int *tokens, int *targets) {
    pl_rng r;
    pl_rng_seed(&r, seed ^ 0xB47C4ull);
    const int B = cfg->batch, T = cfg->seq_len;
    for (int i = 0; i < B * T; i++) tokens[i] = pl_rng_int(&r, cfg->vocab);
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            targets[b * T + t] = t + 1 < T ? tokens[b * T + t + 1] : pl_rng_int(&r, cfg->vocab);
}

pl_status hw_program_set_batch(hw_program *p, const int *tokens, const int *targets, char *msg, size_t len) {
    const gpt_config *c = &p->g->cfg;
    const int64_t n = (int64_t)c->batch * c->seq_len;
    for (int64_t i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= c->vocab || targets[i] < 0 || targets[i] >= c->vocab)
            return pl_fail(msg, len, PL_ERR_INVALID, "token id out of range [0, %d) at position %lld", c->vocab,
                           (long long)i);
    hw_backend *be = p->e->be;
    hw_program_dev *ed = &p->dev[p->emb_dev], *ld = &p->dev[p->loss_dev];
    pl_status st = be->ops->upload(be, p->emb_dev, (char *)ed->base + ed->off_tokens, tokens, n * 4);
    if (st == PL_OK) st = be->ops->upload(be, p->loss_dev, (char *)ld->base + ld->off_targets, targets, n * 4);
    if (st != PL_OK) return pl_fail(msg, len, st, "uploading the batch: %s", be->err);
    p->batch_set = 1;
    return PL_OK;
}

static pl_status get_flat(hw_program *p, int which, float *model, char *msg, size_t len) {
    hw_backend *be = p->e->be;
    int64_t max_dev = 1;
    for (int d = 0; d < p->n_dev; d++)
        if (p->dev[d].param_floats > max_dev) max_dev = p->dev[d].param_floats;
    float *staging = malloc(sizeof(float) * (size_t)max_dev);
    if (!staging) return pl_fail(msg, len, PL_ERR_NOMEM, "out of host memory");
    pl_status st = PL_OK;
    for (int d = 0; d < p->n_dev && st == PL_OK; d++) {
        hw_program_dev *pd = &p->dev[d];
        if (!pd->used || pd->param_floats == 0) continue;
        int64_t off = which ? pd->off_grads : pd->off_params;
        st = be->ops->download(be, d, staging, (char *)pd->base + off, pd->param_floats * 4);
        if (st != PL_OK) {
            pl_fail(msg, len, st, "device %d: %s", d, be->err);
            break;
        }
        scatter_shards(p, d, staging, model);
    }
    free(staging);
    return st;
}

pl_status hw_program_get_params(hw_program *p, float *model, char *msg, size_t len) {
    return get_flat(p, 0, model, msg, len);
}

pl_status hw_program_get_grads(hw_program *p, float *model, char *msg, size_t len) {
    return get_flat(p, 1, model, msg, len);
}
