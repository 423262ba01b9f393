/*
 * _queries.c: module functions that read what is stored or built in:
 * placer runs and their samples in a profile database, a graph's shape,
 * the spec machines' names, and the library's random integers (so that
 * the Python side can reproduce a C seed).
 */
#include "_core.h"

/* ---- module functions -------------------------------------------------- */

static pl_status open_db_read(const char *path, profile_db **db) {
    char msg[MSG_LEN] = "";
    pl_status st;
    Py_BEGIN_ALLOW_THREADS
    st = profile_db_open(path, PROFILE_DB_READ, db, msg, sizeof msg);
    Py_END_ALLOW_THREADS
    if (st != PL_OK) pyc_raise_status(st, msg);
    return st;
}

typedef struct {
    PyObject *list;
    int failed;
} py_collect;

static int collect_run(void *ctx, const profile_run_info *r) {
    py_collect *c = ctx;
    PyObject *d = Py_BuildValue("{s:L,s:s,s:s,s:s,s:O,s:L}", "id", (long long)r->id, "method", r->method ? r->method : "",
                                "args", r->args ? r->args : "", "created_at", r->created_at ? r->created_at : "",
                                "finished", r->finished ? Py_True : Py_False, "n_samples", (long long)r->n_samples);
    if (!d || PyList_Append(c->list, d) != 0) {
        Py_XDECREF(d);
        c->failed = 1;
        return 1;
    }
    Py_DECREF(d);
    return 0;
}

PyObject *mod_runs(PyObject *mod, PyObject *args) {
    const char *path;
    if (!PyArg_ParseTuple(args, "s", &path)) return NULL;
    profile_db *db = NULL;
    if (open_db_read(path, &db) != PL_OK) return NULL;
    py_collect c = {PyList_New(0), 0};
    if (!c.list) {
        profile_db_close(db);
        return NULL;
    }
    pl_status st = profile_db_runs(db, collect_run, &c);
    if (c.failed) {
        Py_CLEAR(c.list);
    } else if (st != PL_OK) {
        pyc_raise_status(st, profile_db_last_error(db));
        Py_CLEAR(c.list);
    }
    profile_db_close(db);
    return c.list;
}

typedef struct {
    PyObject *update, *sample, *placement, *step, *peak, *oom;
    int failed;
    char msg[MSG_LEN];
} sample_collect;

static int collect_sample(void *ctx, const profile_run_sample *s) {
    sample_collect *c = ctx;
    int n = placement_count_fields(s->placement);
    int *dev = n > 0 ? malloc(sizeof *dev * (size_t)n) : NULL;
    if (n <= 0 || !dev ||
        placement_parse(s->placement, n, PLACEMENT_MAX_DEVICES, dev, c->msg, sizeof c->msg) != PL_OK) {
        if (n <= 0) snprintf(c->msg, sizeof c->msg, "sample %d of update %d has an empty placement", s->sample, s->update);
        free(dev);
        c->failed = 2;
        return 1;
    }
    PyObject *t = pyc_int_tuple(dev, n);
    free(dev);
    if (pyc_append_new(c->update, PyLong_FromLong(s->update)) || pyc_append_new(c->sample, PyLong_FromLong(s->sample)) ||
        pyc_append_new(c->placement, t) || pyc_append_new(c->step, PyFloat_FromDouble(s->step_us)) ||
        pyc_append_new(c->peak, PyLong_FromLongLong((long long)s->peak_bytes)) ||
        pyc_append_new(c->oom, PyBool_FromLong(s->oom))) {
        c->failed = 1;
        return 1;
    }
    return 0;
}

PyObject *mod_run_samples(PyObject *mod, PyObject *args) {
    const char *path;
    long long run_id;
    if (!PyArg_ParseTuple(args, "sL", &path, &run_id)) return NULL;
    profile_db *db = NULL;
    if (open_db_read(path, &db) != PL_OK) return NULL;
    sample_collect c = {PyList_New(0), PyList_New(0), PyList_New(0), PyList_New(0), PyList_New(0), PyList_New(0), 0, ""};
    PyObject *ret = NULL;
    if (!c.update || !c.sample || !c.placement || !c.step || !c.peak || !c.oom) goto out;
    pl_status st = profile_db_run_samples(db, (int64_t)run_id, collect_sample, &c);
    if (c.failed == 2) {
        pyc_raise_status(PL_ERR_INVALID, c.msg);
        goto out;
    }
    if (c.failed) goto out;
    if (st != PL_OK) {
        char msg[MSG_LEN];
        if (st == PL_ERR_NOT_FOUND) snprintf(msg, sizeof msg, "run %lld is not in %s", run_id, path);
        else snprintf(msg, sizeof msg, "%s", profile_db_last_error(db));
        pyc_raise_status(st, msg);
        goto out;
    }
    ret = Py_BuildValue("{s:O,s:O,s:O,s:O,s:O,s:O}", "update", c.update, "sample", c.sample, "placement", c.placement,
                        "step_us", c.step, "peak_bytes", c.peak, "oom", c.oom);
out:
    Py_XDECREF(c.update);
    Py_XDECREF(c.sample);
    Py_XDECREF(c.placement);
    Py_XDECREF(c.step);
    Py_XDECREF(c.peak);
    Py_XDECREF(c.oom);
    profile_db_close(db);
    return ret;
}

PyObject *mod_graph_info(PyObject *mod, PyObject *args) {
    const char *config = "default";
    if (!PyArg_ParseTuple(args, "|s", &config)) return NULL;
    char msg[MSG_LEN] = "";
    gpt_config cfg;
    graph *g = NULL;
    pl_status st = model_config_load(config, &cfg, NULL, 0, msg, sizeof msg);
    if (st == PL_OK) st = graph_build_gpt(&cfg, &g, msg, sizeof msg);
    if (st != PL_OK) return pyc_raise_status(st, msg);
    char key[PROFILE_NAME_LEN];
    gpt_config_key(&cfg, key, sizeof key);
    PyObject *nodes = PyList_New(g->n_nodes), *ret = NULL;
    if (!nodes) goto out;
    for (int i = 0; i < g->n_nodes; i++) {
        const graph_node *nd = &g->nodes[i];
        PyObject *shape = PyTuple_New(nd->out_rank);
        if (!shape) goto out;
        for (int k = 0; k < nd->out_rank; k++) PyTuple_SET_ITEM(shape, k, PyLong_FromLongLong(nd->out_shape[k]));
        PyObject *d = Py_BuildValue("{s:s,s:s,s:i,s:N,s:N,s:L}", "name", nd->name, "kind", op_kind_name(nd->kind),
                                    "layer", nd->layer, "inputs", pyc_int_tuple(nd->inputs, nd->n_inputs), "out_shape",
                                    shape, "params", (long long)nd->params);
        if (!d) goto out;
        PyList_SET_ITEM(nodes, i, d);
    }
    ret = Py_BuildValue("{s:s,s:i,s:L,s:{s:i,s:i,s:i,s:i,s:i,s:i},s:O}", "key", key, "n_nodes", g->n_nodes,
                        "params", (long long)g->total_params, "config", "vocab", cfg.vocab, "d_model", cfg.d_model,
                        "heads", cfg.n_heads, "layers", cfg.n_layers, "seq", cfg.seq_len, "batch", cfg.batch, "nodes",
                        nodes);
out:
    Py_XDECREF(nodes);
    graph_destroy(g);
    return ret;
}

PyObject *mod_spec_names(PyObject *mod, PyObject *unused) {
    int n = spec_count();
    PyObject *l = PyList_New(n);
    if (!l) return NULL;
    for (int i = 0; i < n; i++) PyList_SET_ITEM(l, i, PyUnicode_FromString(spec_get(i)->name));
    return l;
}

/* rng_ints(seed, count, bound) -> bytes of count int32 from the library's
 * generator (pl_rng_int), e.g. to reproduce sim_speed's placements. */
PyObject *mod_rng_ints(PyObject *mod, PyObject *args) {
    unsigned long long seed;
    Py_ssize_t count;
    int bound;
    if (!PyArg_ParseTuple(args, "Kni", &seed, &count, &bound)) return NULL;
    if (count < 0 || bound < 1) {
        PyErr_SetString(PyExc_ValueError, "count must be >= 0 and bound >= 1");
        return NULL;
    }
    PyObject *b = PyBytes_FromStringAndSize(NULL, count * (Py_ssize_t)sizeof(int32_t));
    if (!b) return NULL;
    int32_t *out = (int32_t *)PyBytes_AS_STRING(b);
    pl_rng r;
    pl_rng_seed(&r, (uint64_t)seed);
    for (Py_ssize_t i = 0; i < count; i++) out[i] = pl_rng_int(&r, bound);
    return b;
}
