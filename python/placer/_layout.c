/*
 * _layout.c: the layout simulator and planner as module functions
 * (placer layout, placer plan).
 */
#include "_core.h"

/* ---- layouts (placer layout, placer plan) ------------------------------ */

/* Load model (model_config_load; seq > 0 replaces its sequence length) and
 * cluster (cluster_load) for the layout functions. Returns 0, or -1 with the
 * exception set. */
static int load_model_cluster(const char *model, int seq, const char *cluster_name, gpt_config *cfg, cluster *c) {
    char msg[MSG_LEN] = "", full[MSG_LEN + 600];
    pl_status st = model_config_load(model, cfg, NULL, 0, msg, sizeof msg);
    if (st != PL_OK) {
        snprintf(full, sizeof full, "model '%s': %s", model, msg);
        pyc_raise_status(st, full);
        return -1;
    }
    if (seq > 0) cfg->seq_len = seq;
    st = cluster_load(cluster_name, NULL, c, msg, sizeof msg);
    if (st != PL_OK) {
        snprintf(full, sizeof full, "cluster '%s': %s", cluster_name, msg);
        pyc_raise_status(st, full);
        return -1;
    }
    return 0;
}

/* A layout and its simulation as a dict (the figures `placer layout --json`
 * prints). */
static PyObject *layout_result_dict(const layout *l, const layout_result *r) {
    char text[1024];
    layout_format(l, text, sizeof text);
    PyObject *parts = PyDict_New(), *stages = PyList_New(0), *split = PyList_New(0);
    if (!parts || !stages || !split) goto fail;
    for (int i = 0; i < LAYOUT_T_COUNT; i++) {
        if (i == LAYOUT_T_HIDDEN && r->parts_us[i] == 0) continue; /* hidden: only when paired ops hid some */
        PyObject *v = PyFloat_FromDouble(r->parts_us[i]);
        if (!v || PyDict_SetItemString(parts, layout_time_part_name((layout_time_part)i), v) != 0) {
            Py_XDECREF(v);
            goto fail;
        }
        Py_DECREF(v);
    }
    for (int k = 0; k < l->pp && k < LAYOUT_MAX_CHUNKS; k++)
        if (pyc_append_new(stages, PyLong_FromLongLong((long long)r->stage_mem[k])) != 0) goto fail;
    for (int k = 0; k < l->n_stage_layers; k++)
        if (pyc_append_new(split, PyLong_FromLong(l->stage_layers[k])) != 0) goto fail;
    return Py_BuildValue("{s:s,s:d,s:d,s:d,s:d,s:d,s:d,s:d,s:N,s:i,s:L,s:i,s:i,s:L,s:L,s:N,s:O,s:N}", "layout", text,
                         "step_us", r->step_us, "tokens_per_s", r->tokens_per_s, "model_flops", r->model_flops,
                         "hw_flops", r->hw_flops, "model_tflops_per_gpu", r->model_tflops_per_gpu,
                         "hw_tflops_per_gpu", r->hw_tflops_per_gpu, "mfu", r->mfu, "breakdown_us", parts,
                         "micro_batches", r->micro_batches, "gpus", (long long)r->world, "critical_stage",
                         r->critical_stage, "worst_stage", r->worst_stage, "memory_bytes", (long long)r->mem.total,
                         "mem_cap_bytes", (long long)r->mem_cap, "stage_memory_bytes", stages, "oom",
                         r->oom ? Py_True : Py_False, "stage_layers", split);
fail:
    Py_XDECREF(parts);
    Py_XDECREF(stages);
    Py_XDECREF(split);
    return NULL;
}

/* simulate_layout(model, cluster, layout, seq=0, trace=None) -> dict: one
 * training step of a parallel layout on a cluster, as `placer layout`. */
PyObject *mod_simulate_layout(PyObject *mod, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"model", "cluster", "layout", "seq", "trace", NULL};
    const char *model, *cluster_name, *layout_text, *trace = NULL;
    int seq = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "sss|iz", kwlist, &model, &cluster_name, &layout_text, &seq, &trace))
        return NULL;
    gpt_config cfg;
    cluster *c = calloc(1, sizeof *c);
    layout_sim *sim = NULL;
    PyObject *ret = NULL;
    char msg[MSG_LEN] = "", full[MSG_LEN + 600];
    if (!c) return PyErr_NoMemory();
    if (load_model_cluster(model, seq, cluster_name, &cfg, c) != 0) goto out;
    layout l;
    pl_status st = layout_parse(layout_text, &l, msg, sizeof msg);
    if (st != PL_OK) {
        snprintf(full, sizeof full, "layout: %s", msg);
        pyc_raise_status(st, full);
        goto out;
    }
    layout_result r;
    int prefixed = 0;
    Py_BEGIN_ALLOW_THREADS
    st = layout_sim_create(&cfg, &l, c, &sim, msg, sizeof msg);
    /* a layout that does not fit the model or cluster: as placer layout says it */
    prefixed = st == PL_ERR_INVALID;
    if (prefixed) snprintf(full, sizeof full, "layout: %s", msg);
    if (st == PL_OK) st = layout_sim_run(sim, NULL, trace != NULL, &r, msg, sizeof msg);
    if (st == PL_OK && trace) {
        FILE *f = fopen(trace, "w");
        if (!f) {
            st = PL_ERR_IO;
            snprintf(msg, sizeof msg, "cannot write trace '%s': %s", trace, strerror(errno));
        } else {
            st = layout_sim_write_chrome_trace(sim, f);
            if (fclose(f) != 0 && st == PL_OK) st = PL_ERR_IO;
            if (st != PL_OK) snprintf(msg, sizeof msg, "cannot write trace '%s'", trace);
        }
    }
    Py_END_ALLOW_THREADS
    if (st != PL_OK) {
        pyc_raise_status(st, prefixed ? full : msg);
        goto out;
    }
    ret = layout_result_dict(&l, &r);
out:
    layout_sim_destroy(sim);
    free(c);
    return ret;
}

/* plan(model, cluster, gpus=0, global_batch=0, seq=0, precision="bf16",
 * top=5, fix=None, framework="any", max_tp=0, max_cp=0, max_vp=4,
 * max_mbs=16) -> dict: the layout search of `placer plan`. */
PyObject *mod_plan(PyObject *mod, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"model", "cluster", "gpus", "global_batch", "seq", "precision", "top", "fix",
                             "framework", "max_tp", "max_cp", "max_vp", "max_mbs", NULL};
    const char *model, *cluster_name, *prec = "bf16", *fix = NULL, *framework = "any";
    long long gpus = 0;
    int gbs = 0, seq = 0;
    plan_options o;
    plan_options_default(&o);
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "ss|Liisizsiiii", kwlist, &model, &cluster_name, &gpus, &gbs, &seq,
                                     &prec, &o.top_k, &fix, &framework, &o.max_tp, &o.max_cp, &o.max_vp, &o.max_mbs))
        return NULL;
    gpt_config cfg;
    cluster *c = calloc(1, sizeof *c);
    plan_result *res = calloc(1, sizeof *res);
    PyObject *ret = NULL, *top = NULL;
    char msg[MSG_LEN] = "";
    if (!c || !res) {
        PyErr_NoMemory();
        goto out;
    }
    if (load_model_cluster(model, seq, cluster_name, &cfg, c) != 0) goto out;
    pl_status st = plan_parse_precisions(prec, &o, msg, sizeof msg); /* "bf16", "fp8", "bf16,fp8=delayed" */
    if (st == PL_OK && fix) st = plan_parse_fixed(fix, &o, msg, sizeof msg);
    if (st == PL_OK) {
        if (!plan_framework_parse(framework, &o.framework))
            st = pl_fail(msg, sizeof msg, PL_ERR_INVALID,
                         "unknown framework '%s' (use any, megatron, torchtitan or deepspeed)", framework);
    }
    if (st == PL_OK && (o.top_k < 1 || o.top_k > PLAN_MAX_TOP))
        st = pl_fail(msg, sizeof msg, PL_ERR_INVALID, "top must be between 1 and %d", PLAN_MAX_TOP);
    o.gpus = gpus > 0 ? (int64_t)gpus : cluster_n_gpus(c);
    o.global_batch = gbs > 0 ? gbs : cfg.batch;
    if (st == PL_OK && gbs <= 0 && o.global_batch < 2)
        st = pl_fail(msg, sizeof msg, PL_ERR_INVALID,
                     "model '%s' has batch %d: pass global_batch (sequences per step)", model, cfg.batch);
    if (st != PL_OK) {
        pyc_raise_status(st, msg);
        goto out;
    }
    Py_BEGIN_ALLOW_THREADS
    st = plan_search(&cfg, c, &o, NULL, NULL, res, msg, sizeof msg);
    Py_END_ALLOW_THREADS
    if (st != PL_OK) {
        pyc_raise_status(st, msg);
        goto out;
    }
    if (!(top = PyList_New(0))) goto out;
    for (int i = 0; i < res->n_top; i++) {
        PyObject *d = layout_result_dict(&res->top[i].l, &res->top[i].res);
        if (!d) goto out;
        PyObject *lb = PyFloat_FromDouble(res->top[i].lb_us);
        int bad = !lb || PyDict_SetItemString(d, "lower_bound_us", lb) != 0 ||
                  PyDict_SetItemString(d, "split_dp", res->top[i].split_dp ? Py_True : Py_False) != 0;
        Py_XDECREF(lb);
        if (bad || PyList_Append(top, d) != 0) {
            Py_DECREF(d);
            goto out;
        }
        Py_DECREF(d);
    }
    ret = Py_BuildValue("{s:N,s:L,s:i,s:i,s:s,s:L,s:L,s:L,s:L,s:L,s:L,s:d,s:L}", "top", top, "gpus", (long long)o.gpus,
                        "global_batch", o.global_batch, "seq_len", cfg.seq_len, "precision", precision_name(o.prec),
                        "considered", (long long)res->considered, "pruned_memory", (long long)res->pruned_memory,
                        "pruned_bound", (long long)res->pruned_bound, "simulated", (long long)res->simulated,
                        "sim_runs", (long long)res->sim_runs, "sim_oom", (long long)res->sim_oom, "wall_s",
                        res->wall_s, "min_mem_bytes", (long long)res->min_mem_bytes);
    top = NULL;
out:
    Py_XDECREF(top);
    free(res);
    free(c);
    return ret;
}
