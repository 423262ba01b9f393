/*
 * _session.c: placer._core.Session, a policy_session behind a Python
 * object (threads and errors: see _core.c's header).
 */
#include "_core.h"

/* ---- Session --------------------------------------------------------- */

typedef struct {
    PyObject_HEAD
    policy_session *ss;    /* owned; NULL before __init__ succeeds */
    policy_worker one;     /* evaluate()'s own worker: ctx, node_dev and res owned */
    sim_ctx *trace_ctx;    /* trace()'s context, tracing on; made on first use */
    sim_result one_res;    /* one.res points here */
    int *unit_buf;         /* n_units ints for sequence arguments */
    int busy;              /* a call is running (one Python thread at a time) */
    char origin[512];      /* "db PATH" or "spec NAME" */
} SessionObject;

static void session_free_c(SessionObject *s) {
    policy_session_close(s->ss);
    s->ss = NULL;
    sim_ctx_destroy(s->one.ctx);
    s->one.ctx = NULL;
    sim_ctx_destroy(s->trace_ctx);
    s->trace_ctx = NULL;
    free(s->one.node_dev);
    s->one.node_dev = NULL;
    free(s->unit_buf);
    s->unit_buf = NULL;
}

static void Session_dealloc(SessionObject *s) {
    session_free_c(s);
    Py_TYPE(s)->tp_free((PyObject *)s);
}

/* Enter a call: 0, or -1 with an exception when the session is not open
 * or another thread is inside it. */
static int session_enter(SessionObject *s) {
    if (!s->ss) {
        PyErr_SetString(PyExc_RuntimeError, "placer.Session is not open (its __init__ failed or was not called)");
        return -1;
    }
    if (s->busy) {
        PyErr_SetString(PyExc_RuntimeError, "placer.Session is in use by another thread; use one session per thread");
        return -1;
    }
    s->busy = 1;
    return 0;
}

static void session_leave(SessionObject *s) { s->busy = 0; }

/* Build a spec session: the model of config (a preset text, a shipped
 * model name or a config.json path: model_config_load) on spec machine
 * name (its device count replaced by devices when > 0), micro-batch sizes
 * 1..16 as the benchmarks use. */
static pl_status open_spec_session(const policy_session_options *o, const char *name, int devices,
                                   policy_session **out, char *msg, size_t len) {
    const machine_spec *ms = spec_find(name);
    if (!ms) {
        char names[256];
        spec_names(names, sizeof names);
        return pl_fail(msg, len, PL_ERR_NOT_FOUND, "no spec machine '%s' (known: %s)", name, names);
    }
    machine_spec m = *ms;
    if (devices > 0) {
        if (devices > SIM_MAX_DEVICES)
            return pl_fail(msg, len, PL_ERR_INVALID, "devices %d exceeds the simulator's %d", devices,
                           SIM_MAX_DEVICES);
        m.n_devices = devices;
    }
    gpt_config cfg;
    graph *g = NULL;
    profile_data *p = NULL;
    pl_status st = model_config_load(o->config ? o->config : "default", &cfg, NULL, 0, msg, len);
    if (st == PL_OK) st = graph_build_gpt(&cfg, &g, msg, len);
    if (st == PL_OK) {
        static const int sizes[5] = {1, 2, 4, 8, 16};
        st = spec_profile_build(&m, g, sizes, 5, &p);
        if (st != PL_OK) pl_fail(msg, len, st, "cannot build the spec profile of '%s'", name);
    }
    if (st == PL_OK) {
        policy_session_options so = *o;
        so.devices = 0;
        so.calibrated = 0;
        st = policy_session_from_profile(&so, &cfg, p, out, msg, len);
    }
    profile_data_destroy(p);
    graph_destroy(g);
    return st;
}

static int Session_init(SessionObject *self, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"db", "config", "groups", "micro_batches", "schedule", "mem_cap", "devices",
                             "threads", "calibrated", "write", "spec", NULL};
    const char *db = NULL, *config = NULL, *groups = "colocate", *sched = "gpipe", *cap = NULL, *spec = NULL;
    int m = 1, devices = 0, threads = 0, calibrated = 1, write = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|zzsiszii$ppz", kwlist, &db, &config, &groups, &m, &sched, &cap,
                                     &devices, &threads, &calibrated, &write, &spec))
        return -1;
    if (self->busy) {
        PyErr_SetString(PyExc_RuntimeError, "placer.Session is in use by another thread");
        return -1;
    }
    session_free_c(self);
    char msg[MSG_LEN] = "";
    policy_session_options o;
    policy_session_options_default(&o);
    pl_status st = grouping_parse_mode(groups, &o.groups, msg, sizeof msg);
    if (st == PL_OK) st = schedule_parse_order(sched, &o.order, msg, sizeof msg);
    if (st == PL_OK && m < 1) st = pl_fail(msg, sizeof msg, PL_ERR_SCHEDULE, "micro_batches %d is not positive", m);
    if (st == PL_OK && (devices < 0 || threads < 0))
        st = pl_fail(msg, sizeof msg, PL_ERR_INVALID, "devices and threads must be >= 0 (0: all)");
    if (st == PL_OK && !db == !spec)
        st = pl_fail(msg, sizeof msg, PL_ERR_INVALID, "pass exactly one of db=PATH (a profile database) or spec=NAME");
    if (st != PL_OK) {
        pyc_raise_status(st, msg);
        return -1;
    }
    o.db_path = db;
    o.write = write;
    o.config = config;
    o.micro_batches = m;
    o.mem_cap = cap;
    o.devices = devices;
    o.threads = threads;
    o.calibrated = calibrated;
    policy_session *ss = NULL;
    Py_BEGIN_ALLOW_THREADS
    if (spec) st = open_spec_session(&o, spec, devices, &ss, msg, sizeof msg);
    else st = policy_session_open(&o, &ss, msg, sizeof msg);
    Py_END_ALLOW_THREADS
    if (st != PL_OK) {
        pyc_raise_status(st, msg);
        return -1;
    }
    self->ss = ss;
    snprintf(self->origin, sizeof self->origin, "%s %s", spec ? "spec" : "db", spec ? spec : db);
    st = sim_ctx_create(ss->g, ss->p, ss->pb.sched.micro_batches, &self->one.ctx);
    self->one.node_dev = malloc(sizeof(int) * (size_t)ss->g->n_nodes);
    self->unit_buf = malloc(sizeof(int) * (size_t)ss->g->n_nodes);
    self->one.res = &self->one_res;
    if (st != PL_OK || !self->one.node_dev || !self->unit_buf) {
        session_free_c(self);
        pyc_raise_status(st != PL_OK ? st : PL_ERR_NOMEM, "cannot create the simulator context");
        return -1;
    }
    return 0;
}

/* Read a placement argument (a C-contiguous int32 buffer, the fast path,
 * or any other sequence of ints) into the session's unit_buf; *len gets its length. 0, or -1 with an
 * exception. */
static int read_placement(SessionObject *s, PyObject *o, const int **out, int *len) {
    const int N = s->ss->g->n_nodes;
    Py_buffer v;
    if (PyObject_CheckBuffer(o) && pyc_get_buffer(o, &v, 0, 'i', sizeof(int), -1, "placement") != 0) {
        /* not a C-contiguous int32 buffer (e.g. an int64 array): read it as a sequence */
        PyErr_Clear();
    } else if (PyObject_CheckBuffer(o)) {
        Py_ssize_t n = v.len / (Py_ssize_t)sizeof(int);
        if (n > N) n = N + 1; /* too long either way; do not copy past the buffer */
        memcpy(s->unit_buf, v.buf, sizeof(int) * (size_t)(n > N ? N : n));
        PyBuffer_Release(&v);
        *out = s->unit_buf;
        *len = (int)n;
        return 0;
    }
    PyObject *seq = PySequence_Fast(o, "placement must be a sequence of device indices or an int32 array");
    if (!seq) return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    PyObject **items = PySequence_Fast_ITEMS(seq);
    for (Py_ssize_t i = 0; i < n && i < N; i++) {
        long d = PyLong_AsLong(items[i]);
        if (d == -1 && PyErr_Occurred()) {
            Py_DECREF(seq);
            return -1;
        }
        s->unit_buf[i] = d < INT32_MIN ? INT32_MIN : d > INT32_MAX ? INT32_MAX : (int)d;
    }
    Py_DECREF(seq);
    *out = s->unit_buf;
    *len = n > N ? N + 1 : (int)n;
    return 0;
}

/* Validate a placement of len entries: unit form (n_groups entries) or
 * node form (n_nodes). *groups gets 1 for the unit form. On failure sets
 * the exception (with the C message) and returns -1. */
static int check_placement(const policy_session *ss, const int *dev, int len, int want_groups, int *groups,
                           const char *prefix) {
    const int N = ss->g->n_nodes, G = ss->gr->n_groups, D = ss->p->n_devices;
    char msg[2 * MSG_LEN];
    int g;
    if (want_groups == 1 || (want_groups < 0 && len == G)) g = 1;
    else g = 0;
    int expected = g ? G : N;
    if (len != expected) {
        if (want_groups < 0)
            snprintf(msg, sizeof msg, "%splacement has %d entries but the graph needs %d (one per node) or %d (one per group)",
                     prefix, len > N ? N + 1 : len, N, G);
        else
            snprintf(msg, sizeof msg, "%splacement has %d entries but the graph needs %d", prefix, len > N ? N + 1 : len,
                     expected);
        pyc_raise_status(PL_ERR_PLACEMENT_LENGTH, msg);
        return -1;
    }
    char detail[MSG_LEN];
    pl_status st = placement_validate(dev, expected, D, detail, sizeof detail);
    if (st != PL_OK) {
        snprintf(msg, sizeof msg, "%s%s%s", prefix, detail, g ? " (entries are groups)" : "");
        pyc_raise_status(st, msg);
        return -1;
    }
    *groups = g;
    return 0;
}

static PyObject *Session_evaluate(SessionObject *self, PyObject *arg) {
    if (session_enter(self) != 0) return NULL;
    PyObject *ret = NULL;
    const int *dev;
    int len, groups;
    if (read_placement(self, arg, &dev, &len) != 0 || check_placement(self->ss, dev, len, -1, &groups, "") != 0)
        goto out;
    policy_eval e;
    pl_status st;
    Py_BEGIN_ALLOW_THREADS
    if (groups) st = policy_eval_unit(&self->ss->pb, &self->one, dev, &e);
    else st = policy_eval_nodes(&self->ss->pb, &self->one, dev, &e);
    Py_END_ALLOW_THREADS
    if (st != PL_OK) {
        pyc_raise_status(st, sim_last_error(self->one.ctx));
        goto out;
    }
    ret = Py_BuildValue("ddLOi", e.step_us, e.cost_us, (long long)e.peak_bytes, e.oom ? Py_True : Py_False,
                        e.devices_used);
out:
    session_leave(self);
    return ret;
}

static PyObject *events_to_list(const sim_event *ev, int n) {
    PyObject *l = PyList_New(n);
    if (!l) return NULL;
    for (int i = 0; i < n; i++) {
        PyObject *t = Py_BuildValue("(siiiidd)", sim_event_kind_name(ev[i].kind), ev[i].node, ev[i].micro_batch,
                                    ev[i].device, ev[i].dst_device, ev[i].start_us, ev[i].end_us);
        if (!t) {
            Py_DECREF(l);
            return NULL;
        }
        PyList_SET_ITEM(l, i, t);
    }
    return l;
}

/* trace(placement, path=None) -> (step_us, events, critical_path): one
 * placement simulated with tracing on; events and the critical path as
 * (kind, node, micro_batch, device, dst_device, start_us, end_us) tuples
 * (sim.h's sim_event); with path, the Chrome trace `placer simulate
 * --trace` writes. */
static PyObject *Session_trace(SessionObject *self, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"placement", "path", NULL};
    PyObject *o;
    const char *path = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O|z", kwlist, &o, &path)) return NULL;
    if (session_enter(self) != 0) return NULL;
    policy_session *ss = self->ss;
    PyObject *ret = NULL, *events = NULL, *crit = NULL;
    const int *dev;
    int len, groups;
    if (read_placement(self, o, &dev, &len) != 0 || check_placement(ss, dev, len, -1, &groups, "") != 0) goto out;
    pl_status st = PL_OK;
    if (!self->trace_ctx) {
        st = sim_ctx_create(ss->g, ss->p, ss->pb.sched.micro_batches, &self->trace_ctx);
        if (st == PL_OK) st = sim_ctx_set_trace(self->trace_ctx, 1);
        if (st != PL_OK) {
            sim_ctx_destroy(self->trace_ctx);
            self->trace_ctx = NULL;
            pyc_raise_status(st, "cannot create the traced simulator context");
            goto out;
        }
    }
    const int *nodes = dev;
    if (groups) {
        grouping_expand(ss->gr, dev, self->one.node_dev);
        nodes = self->one.node_dev;
    }
    sim_result res;
    char msg[MSG_LEN + 600] = "";
    Py_BEGIN_ALLOW_THREADS
    st = sim_run(self->trace_ctx, nodes, &ss->pb.sched, ss->pb.caps, &ss->pb.prm, &res);
    if (st != PL_OK) snprintf(msg, sizeof msg, "%s", sim_last_error(self->trace_ctx));
    if (st == PL_OK && path) {
        FILE *f = fopen(path, "w");
        if (!f) {
            st = PL_ERR_IO;
            snprintf(msg, sizeof msg, "cannot write trace '%s': %s", path, strerror(errno));
        } else {
            st = sim_write_chrome_trace(self->trace_ctx, f);
            if (fclose(f) != 0 && st == PL_OK) st = PL_ERR_IO;
            if (st != PL_OK) snprintf(msg, sizeof msg, "cannot write trace '%s'", path);
        }
    }
    Py_END_ALLOW_THREADS
    if (st != PL_OK) {
        pyc_raise_status(st, msg);
        goto out;
    }
    int n_ev = 0, n_crit = 0;
    const sim_event *ev = sim_events(self->trace_ctx, &n_ev);
    const sim_event *cp = sim_critical_path(self->trace_ctx, &n_crit);
    if (!(events = events_to_list(ev, ev ? n_ev : 0)) || !(crit = events_to_list(cp, cp ? n_crit : 0))) goto out;
    ret = Py_BuildValue("dNN", res.step_us, events, crit);
    events = crit = NULL;
out:
    Py_XDECREF(events);
    Py_XDECREF(crit);
    session_leave(self);
    return ret;
}

/* The batch: rows i in [0, n) of `rows` (row_len ints each) simulated on
 * the evaluator's workers; outputs by row. */
#define BATCH_CHUNK 16
typedef struct {
    const policy_problem *pb;
    const grouping *gr;
    const int *rows;
    int row_len;
    int groups;
    Py_ssize_t n;
    double *step_us, *cost_us, *busy_us; /* n, n, n x D */
    int64_t *peak;                       /* n x D */
    uint8_t *oom;                        /* n */
    int32_t *oom_device, *used;          /* n, n */
    atomic_long next;                    /* next row to take */
    pthread_mutex_t mu;                  /* guards the error fields */
    Py_ssize_t err_row;                  /* first failing row (n: none) */
    pl_status err_st;
    char err_msg[MSG_LEN];
} batch_job;

static void batch_worker(void *arg, policy_worker *w) {
    batch_job *j = arg;
    const policy_problem *pb = j->pb;
    const int D = pb->p->n_devices;
    for (;;) {
        long i0 = atomic_fetch_add(&j->next, BATCH_CHUNK);
        if (i0 >= j->n) break;
        long i1 = i0 + BATCH_CHUNK < j->n ? i0 + BATCH_CHUNK : (long)j->n;
        for (long i = i0; i < i1; i++) {
            const int *nd = j->rows + (size_t)i * (size_t)j->row_len;
            if (j->groups) {
                grouping_expand(j->gr, nd, w->node_dev);
                nd = w->node_dev;
            }
            pl_status st = sim_run(w->ctx, nd, &pb->sched, pb->caps, &pb->prm, w->res);
            if (st != PL_OK) {
                pthread_mutex_lock(&j->mu);
                if (i < j->err_row) {
                    j->err_row = i;
                    j->err_st = st;
                    snprintf(j->err_msg, sizeof j->err_msg, "%s", sim_last_error(w->ctx));
                }
                pthread_mutex_unlock(&j->mu);
                continue;
            }
            const sim_result *r = w->res;
            j->step_us[i] = r->step_us;
            j->cost_us[i] = r->oom ? pb->oom_penalty_us : r->step_us;
            j->oom[i] = r->oom ? 1 : 0;
            j->oom_device[i] = r->oom ? r->oom_device : -1;
            j->used[i] = r->n_used_devices;
            for (int d = 0; d < D; d++) {
                j->peak[(size_t)i * D + d] = r->peak_bytes[d];
                j->busy_us[(size_t)i * D + d] = r->busy_us[d];
            }
        }
    }
}

/* _simulate(placements, n, groups, step_us, cost_us, peak_bytes, busy_us,
 * oom, oom_device, devices_used): placements is n rows of int32 (row
 * length n_nodes, or n_groups when groups is true); outputs as the
 * wrapper allocates them (float64 n, float64 n, int64 n x D, float64
 * n x D, uint8 n, int32 n, int32 n). Every row is validated before any
 * runs. Returns None. */
static PyObject *Session_simulate(SessionObject *self, PyObject *args) {
    PyObject *o_rows, *o_step, *o_cost, *o_peak, *o_busy, *o_oom, *o_oomd, *o_used;
    Py_ssize_t n;
    int groups;
    if (!PyArg_ParseTuple(args, "OnpOOOOOOO", &o_rows, &n, &groups, &o_step, &o_cost, &o_peak, &o_busy, &o_oom,
                          &o_oomd, &o_used))
        return NULL;
    if (session_enter(self) != 0) return NULL;
    policy_session *ss = self->ss;
    const int N = ss->g->n_nodes, G = ss->gr->n_groups, D = ss->p->n_devices;
    const int row_len = groups ? G : N;
    Py_buffer b[8];
    int nb = 0;
    PyObject *ret = NULL;
    if (n < 0) {
        PyErr_SetString(PyExc_ValueError, "n must be >= 0");
        goto out;
    }
    if (pyc_get_buffer(o_rows, &b[nb], 0, 'i', sizeof(int), n * row_len, "placements") != 0) goto out;
    nb++;
    if (pyc_get_buffer(o_step, &b[nb], 1, 'f', 8, n, "step_us") != 0) goto out;
    nb++;
    if (pyc_get_buffer(o_cost, &b[nb], 1, 'f', 8, n, "cost_us") != 0) goto out;
    nb++;
    if (pyc_get_buffer(o_peak, &b[nb], 1, 'i', 8, n * D, "peak_bytes") != 0) goto out;
    nb++;
    if (pyc_get_buffer(o_busy, &b[nb], 1, 'f', 8, n * D, "busy_us") != 0) goto out;
    nb++;
    if (pyc_get_buffer(o_oom, &b[nb], 1, 'u', 1, n, "oom") != 0) goto out;
    nb++;
    if (pyc_get_buffer(o_oomd, &b[nb], 1, 'i', 4, n, "oom_device") != 0) goto out;
    nb++;
    if (pyc_get_buffer(o_used, &b[nb], 1, 'i', 4, n, "devices_used") != 0) goto out;
    nb++;
    const int *rows = b[0].buf;
    for (Py_ssize_t i = 0; i < n; i++) {
        char prefix[64];
        int g;
        snprintf(prefix, sizeof prefix, "row %zd: ", i);
        if (check_placement(ss, rows + (size_t)i * row_len, row_len, groups, &g, prefix) != 0) goto out;
    }
    batch_job j;
    memset(&j, 0, sizeof j);
    j.pb = &ss->pb;
    j.gr = ss->gr;
    j.rows = rows;
    j.row_len = row_len;
    j.groups = groups;
    j.n = n;
    j.step_us = b[1].buf;
    j.cost_us = b[2].buf;
    j.peak = b[3].buf;
    j.busy_us = b[4].buf;
    j.oom = b[5].buf;
    j.oom_device = b[6].buf;
    j.used = b[7].buf;
    atomic_init(&j.next, 0);
    j.err_row = n;
    if (pthread_mutex_init(&j.mu, NULL) != 0) {
        PyErr_SetString(PyExc_RuntimeError, "pthread_mutex_init failed");
        goto out;
    }
    if (n > 0) {
        Py_BEGIN_ALLOW_THREADS
        policy_evaluator_run_all(ss->ev, batch_worker, &j);
        Py_END_ALLOW_THREADS
    }
    pthread_mutex_destroy(&j.mu);
    if (j.err_row < n) {
        char msg[MSG_LEN + 64];
        snprintf(msg, sizeof msg, "row %zd: %s", j.err_row, j.err_msg);
        pyc_raise_status(j.err_st, msg);
        goto out;
    }
    ret = Py_NewRef(Py_None);
out:
    for (int k = 0; k < nb; k++) PyBuffer_Release(&b[k]);
    session_leave(self);
    return ret;
}

/* A candidate list as a list of dicts. */
static PyObject *cands_to_list(const policy_cands *c) {
    PyObject *list = PyList_New(0);
    if (!list) return NULL;
    for (int i = 0; i < c->n; i++) {
        const policy_cand *x = &c->items[i];
        PyObject *nodes = PyTuple_New(c->n_nodes), *units;
        if (!nodes) goto fail;
        for (int k = 0; k < c->n_nodes; k++) PyTuple_SET_ITEM(nodes, k, PyLong_FromLong(x->node_dev[k]));
        if (x->unit_dev) {
            units = PyTuple_New(c->n_units);
            if (!units) {
                Py_DECREF(nodes);
                goto fail;
            }
            for (int k = 0; k < c->n_units; k++) PyTuple_SET_ITEM(units, k, PyLong_FromLong(x->unit_dev[k]));
        } else {
            units = Py_NewRef(Py_None);
        }
        PyObject *d = Py_BuildValue("{s:s,s:d,s:d,s:L,s:O,s:i,s:N,s:N,s:d}", "label", x->label, "step_us", x->ev.step_us,
                                    "cost_us", x->ev.cost_us, "peak_bytes", (long long)x->ev.peak_bytes, "oom",
                                    x->ev.oom ? Py_True : Py_False, "devices_used", x->ev.devices_used, "nodes", nodes,
                                    "units", units, "aux", x->aux);
        if (!d || PyList_Append(list, d) != 0) {
            Py_XDECREF(d);
            goto fail;
        }
        Py_DECREF(d);
    }
    return list;
fail:
    Py_DECREF(list);
    return NULL;
}

static PyObject *curve_to_list(const double *curve, int n) {
    PyObject *l = PyList_New(n);
    if (!l) return NULL;
    for (int i = 0; i < n; i++) PyList_SET_ITEM(l, i, PyFloat_FromDouble(curve[i]));
    return l;
}

/* search(method, budget=2000, seed=1, batch=8, max_evals=5e7) ->
 * (candidates, info). Methods as in search.h, and Baechi's m-ETF ("etf")
 * and m-SCT ("sct"; PL_ERR_UNSUPPORTED without GLPK) of baechi.h. */
static PyObject *Session_search(SessionObject *self, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"method", "budget", "seed", "batch", "max_evals", NULL};
    const char *method;
    int budget = 2000, batch = 8;
    unsigned long long seed = 1;
    double max_evals = 5e7;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "s|iKid", kwlist, &method, &budget, &seed, &batch, &max_evals))
        return NULL;
    if (session_enter(self) != 0) return NULL;
    PyObject *ret = NULL, *info = NULL;
    policy_session *ss = self->ss;
    policy_cands *c = NULL;
    double *curve = NULL;
    char msg[MSG_LEN] = "";
    enum { M_SINGLE, M_HUMAN, M_DP, M_RANDOM, M_ANNEAL, M_LOCAL, M_EXHAUSTIVE, M_ETF, M_SCT } which;
    if (!strcmp(method, "single")) which = M_SINGLE;
    else if (!strcmp(method, "human")) which = M_HUMAN;
    else if (!strcmp(method, "dp")) which = M_DP;
    else if (!strcmp(method, "random")) which = M_RANDOM;
    else if (!strcmp(method, "anneal")) which = M_ANNEAL;
    else if (!strcmp(method, "local")) which = M_LOCAL;
    else if (!strcmp(method, "exhaustive")) which = M_EXHAUSTIVE;
    else if (!strcmp(method, "etf")) which = M_ETF;
    else if (!strcmp(method, "sct")) which = M_SCT;
    else {
        snprintf(msg, sizeof msg,
                 "unknown search method '%s' (use single, human, dp, random, anneal, local, exhaustive, etf or sct)",
                 method);
        pyc_raise_status(PL_ERR_INVALID, msg);
        goto out;
    }
    int budgeted = which == M_RANDOM || which == M_ANNEAL || which == M_LOCAL;
    if (budgeted && (budget < 1 || batch < 1)) {
        pyc_raise_status(PL_ERR_INVALID, "budget and batch must be >= 1");
        goto out;
    }
    if (which == M_EXHAUSTIVE && !(max_evals >= 1)) {
        pyc_raise_status(PL_ERR_INVALID, "max_evals must be >= 1");
        goto out;
    }
    pl_status st = policy_cands_create(ss->g->n_nodes, ss->gr->n_groups, &c);
    if (st != PL_OK) {
        pyc_raise_status(st, "out of memory");
        goto out;
    }
    if (budgeted && !(curve = malloc(sizeof *curve * (size_t)budget))) {
        PyErr_NoMemory();
        goto out;
    }
    search_budget sb = {budget, batch, (uint64_t)seed, curve};
    search_dp_info di;
    search_exhaustive_info xi;
    memset(&di, 0, sizeof di);
    memset(&xi, 0, sizeof xi);
    Py_BEGIN_ALLOW_THREADS
    switch (which) {
    case M_SINGLE: st = search_single(ss->ev, c); break;
    case M_HUMAN: st = search_human(ss->ev, c); break;
    case M_DP: st = search_dp(ss->ev, c, &di); break;
    case M_RANDOM: st = search_random(ss->ev, &sb, c); break;
    case M_ANNEAL: st = search_anneal(ss->ev, &sb, c); break;
    case M_LOCAL: st = search_local(ss->ev, &sb, c); break;
    case M_EXHAUSTIVE: st = search_exhaustive(ss->ev, max_evals, c, &xi, msg, sizeof msg); break;
    case M_ETF: st = search_etf(ss->ev, c); break;
    case M_SCT: st = search_sct(ss->ev, c, msg, sizeof msg); break;
    }
    Py_END_ALLOW_THREADS
    if (st != PL_OK) {
        pyc_raise_status(st, *msg ? msg : "the search failed");
        goto out;
    }
    if (which == M_DP)
        info = Py_BuildValue("{s:d,s:i,s:i,s:O}", "best_estimate_us", di.best_estimate_us, "best_estimate_k",
                             di.best_estimate_k, "n_candidates", di.n_candidates, "mem_feasible",
                             di.mem_feasible ? Py_True : Py_False);
    else if (which == M_EXHAUSTIVE)
        info = Py_BuildValue("{s:d,s:d,s:i,s:L,s:d}", "space", xi.space, "orbits", xi.orbits, "n_automorphisms",
                             xi.n_automorphisms, "evaluated", (long long)xi.evaluated, "wall_s", xi.wall_s);
    else if (budgeted)
        info = Py_BuildValue("{s:N}", "curve", curve_to_list(curve, budget));
    else
        info = PyDict_New();
    if (!info) goto out;
    PyObject *list = cands_to_list(c);
    if (!list) goto out;
    ret = Py_BuildValue("NN", list, info);
    info = NULL;
out:
    Py_XDECREF(info);
    free(curve);
    policy_cands_destroy(c);
    session_leave(self);
    return ret;
}

/* REINFORCE progress, kept in C while the GIL is released. */
typedef struct {
    reinforce_progress *rows; /* cap entries */
    int n, cap;
} progress_log;

static int log_progress(void *ud, const reinforce_progress *p) {
    progress_log *l = ud;
    if (l->n < l->cap) l->rows[l->n++] = *p;
    return 0;
}

/* train(updates=250, samples=8, seed=1, baseline="ema", entropy, lr, clip,
 * hidden, top_k, stay, logit_clip, ema_decay, record=True, *, algo=
 * "reinforce"|"ppo", ppo_epochs, ppo_clip, grouper_groups, group_prior):
 * trains the seq2seq placer with REINFORCE or PPO (reinforce.h; defaults
 * from reinforce_options_default); a session with groups="learned" or
 * "eagle" trains the grouper jointly, as placer train does. With record and a session opened with
 * write=True on a database, every update's samples and a checkpoint are
 * committed under a new run (method "reinforce-python"). Returns a dict:
 * run_id (or None), updates, shortlist (candidates), progress (one dict
 * per update), best_cost_us. */
static PyObject *Session_train(SessionObject *self, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"updates", "samples", "seed", "baseline", "entropy", "lr", "clip", "hidden", "top_k",
                             "stay", "logit_clip", "ema_decay", "record", "algo", "ppo_epochs", "ppo_clip",
                             "grouper_groups", "group_prior", NULL};
    reinforce_options ro;
    reinforce_options_default(&ro);
    unsigned long long seed = ro.seed;
    const char *baseline = reinforce_baseline_name(ro.baseline), *algo = reinforce_algo_name(ro.algo);
    int record = 1;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|iiKsdddiidddp$sidid", kwlist, &ro.updates, &ro.samples, &seed,
                                     &baseline, &ro.entropy, &ro.lr, &ro.clip, &ro.hidden, &ro.top_k, &ro.stay,
                                     &ro.logit_clip, &ro.ema_decay, &record, &algo, &ro.ppo_epochs, &ro.ppo_clip,
                                     &ro.n_groups, &ro.group_prior))
        return NULL;
    if (session_enter(self) != 0) return NULL;
    ro.seed = (uint64_t)seed;
    policy_session *ss = self->ss;
    char msg[MSG_LEN] = "";
    PyObject *ret = NULL, *prog = NULL, *shortlist = NULL;
    reinforce *r = NULL;
    policy_cands *c = NULL;
    progress_log log = {NULL, 0, 0};
    int64_t run_id = 0;
    pl_status st = reinforce_parse_baseline(baseline, &ro.baseline, msg, sizeof msg);
    if (st == PL_OK) st = reinforce_parse_algo(algo, &ro.algo, msg, sizeof msg);
    /* the session's grouping picks the grouper, as placer train does */
    ro.grouper = ss->gr->mode == GROUPING_LEARNED ? GROUPER_HIER
                 : ss->gr->mode == GROUPING_EAGLE ? GROUPER_EAGLE
                                                  : GROUPER_NONE;
    if (st != PL_OK) {
        pyc_raise_status(st, msg);
        goto out;
    }
    if (ro.updates < 1 || ro.updates > 10000000) {
        pyc_raise_status(PL_ERR_INVALID, "updates must be between 1 and 10000000");
        goto out;
    }
    profile_db *db = record ? ss->db : NULL;
    if (record && !db) {
        /* a spec session has no database: nothing to record into */
        record = 0;
    }
    log.cap = ro.updates;
    log.rows = malloc(sizeof *log.rows * (size_t)log.cap);
    if (!log.rows) {
        PyErr_NoMemory();
        goto out;
    }
    st = reinforce_create(ss->ev, &ro, &r, msg, sizeof msg);
    if (st != PL_OK) {
        pyc_raise_status(st, msg);
        goto out;
    }
    if (record) {
        char rargs[512], key[PROFILE_NAME_LEN];
        gpt_config_key(&ss->cfg, key, sizeof key);
        snprintf(rargs, sizeof rargs,
                 "graph %s groups %s micro_batches %d schedule %s cap_bytes %lld updates %d samples %d baseline %s "
                 "entropy %.17g lr %.17g seed %llu stay %.17g hidden %d algo %s",
                 key, grouping_mode_name(ss->gr->mode), ss->pb.sched.micro_batches,
                 schedule_order_name(ss->pb.sched.order), (long long)ss->cap_bytes, ro.updates, ro.samples,
                 reinforce_baseline_name(ro.baseline), ro.entropy, ro.lr, (unsigned long long)ro.seed, ro.stay,
                 ro.hidden, reinforce_algo_name(ro.algo));
        st = profile_db_run_create(db, "reinforce-python", rargs, &run_id);
        if (st != PL_OK) {
            snprintf(msg, sizeof msg, "cannot create the run (open the session with write=True): %s",
                     profile_db_last_error(db));
            pyc_raise_status(st, msg);
            goto out;
        }
    }
    Py_BEGIN_ALLOW_THREADS
    st = reinforce_train(r, db, run_id, log_progress, &log, msg, sizeof msg);
    if (st == PL_OK && record) {
        st = profile_db_run_finish(db, run_id);
        if (st != PL_OK) snprintf(msg, sizeof msg, "%s", profile_db_last_error(db));
    }
    if (st == PL_OK) {
        st = policy_cands_create(ss->g->n_nodes, ss->gr->n_groups, &c);
        if (st == PL_OK) st = reinforce_shortlist(r, c);
        if (st != PL_OK) snprintf(msg, sizeof msg, "cannot build the shortlist");
    }
    Py_END_ALLOW_THREADS
    if (st != PL_OK) {
        pyc_raise_status(st, msg);
        goto out;
    }
    prog = PyList_New(log.n);
    if (!prog) goto out;
    for (int i = 0; i < log.n; i++) {
        const reinforce_progress *p = &log.rows[i];
        PyObject *d = Py_BuildValue("{s:i,s:d,s:d,s:d,s:d,s:d,s:d,s:i,s:d}", "update", p->update, "mean_cost_us",
                                    p->mean_cost_us, "best_sample_us", p->best_sample_us, "best_us", p->best_us,
                                    "entropy", p->entropy, "baseline", p->baseline, "grad_norm", p->grad_norm, "n_oom",
                                    p->n_oom, "elapsed_s", p->elapsed_s);
        if (!d) goto out;
        PyList_SET_ITEM(prog, i, d);
    }
    shortlist = cands_to_list(c);
    if (!shortlist) goto out;
    PyObject *rid = record ? PyLong_FromLongLong((long long)run_id) : Py_NewRef(Py_None);
    ret = Py_BuildValue("{s:N,s:i,s:N,s:N,s:d}", "run_id", rid, "updates", reinforce_updates_done(r), "shortlist",
                        shortlist, "progress", prog, "best_cost_us", reinforce_best_cost(r));
    shortlist = prog = NULL;
out:
    Py_XDECREF(prog);
    Py_XDECREF(shortlist);
    policy_cands_destroy(c);
    reinforce_destroy(r);
    free(log.rows);
    session_leave(self);
    return ret;
}

/* Tuple of n ints. */
static PyObject *Session_info(SessionObject *self, PyObject *unused) {
    if (session_enter(self) != 0) return NULL;
    policy_session *ss = self->ss;
    const graph *g = ss->g;
    const grouping *gr = ss->gr;
    const profile_data *p = ss->p;
    PyObject *ret = NULL, *nodes = NULL, *feats = NULL, *devs = NULL, *prm = NULL, *caps = NULL, *ng = NULL;
    char key[PROFILE_NAME_LEN];
    gpt_config_key(&ss->cfg, key, sizeof key);
    if (!(nodes = PyList_New(g->n_nodes))) goto out;
    for (int i = 0; i < g->n_nodes; i++) {
        const graph_node *nd = &g->nodes[i];
        PyObject *shape = PyTuple_New(nd->out_rank);
        if (!shape) goto out;
        for (int k = 0; k < nd->out_rank; k++) PyTuple_SET_ITEM(shape, k, PyLong_FromLongLong(nd->out_shape[k]));
        PyObject *d = Py_BuildValue("{s:s,s:s,s:i,s:i,s:N,s:N,s:L,s:L,s:L,s:d,s:d,s:i}", "name", nd->name, "kind",
                                    op_kind_name(nd->kind), "kind_index", (int)nd->kind, "layer", nd->layer, "inputs",
                                    pyc_int_tuple(nd->inputs, nd->n_inputs), "out_shape", shape, "params",
                                    (long long)nd->params, "out_bytes_per_sample", (long long)nd->out_bytes_per_sample,
                                    "act_bytes_per_sample", (long long)nd->act_bytes_per_sample, "fwd_flops_per_sample",
                                    nd->fwd_flops_per_sample, "bwd_flops_per_sample", nd->bwd_flops_per_sample,
                                    "group", gr->node_group[i]);
        if (!d) goto out;
        PyList_SET_ITEM(nodes, i, d);
    }
    if (!(feats = PyList_New(gr->n_groups))) goto out;
    for (int k = 0; k < gr->n_groups; k++) {
        PyObject *row = PyTuple_New(GROUP_N_FEATURES);
        if (!row) goto out;
        for (int f = 0; f < GROUP_N_FEATURES; f++)
            PyTuple_SET_ITEM(row, f, PyFloat_FromDouble(gr->features[(size_t)k * GROUP_N_FEATURES + f]));
        PyList_SET_ITEM(feats, k, row);
    }
    if (!(devs = PyList_New(p->n_devices)) || !(caps = PyTuple_New(p->n_devices))) goto out;
    for (int d = 0; d < p->n_devices; d++) {
        PyObject *x = Py_BuildValue("{s:s,s:L}", "name", p->devices[d].name, "mem_bytes",
                                    (long long)p->devices[d].mem_bytes);
        if (!x) goto out;
        PyList_SET_ITEM(devs, d, x);
        PyTuple_SET_ITEM(caps, d, PyLong_FromLongLong((long long)ss->pb.caps[d]));
    }
    if (!(prm = PyDict_New())) goto out;
    for (int i = 0; i < SIM_N_PARAMS; i++) {
        PyObject *v = PyFloat_FromDouble(*sim_param_ptr((sim_params *)&ss->pb.prm, i));
        if (!v || PyDict_SetItemString(prm, sim_param_name(i), v) != 0) {
            Py_XDECREF(v);
            goto out;
        }
        Py_DECREF(v);
    }
    if (!(ng = pyc_int_tuple(gr->node_group, g->n_nodes))) goto out;
    ret = Py_BuildValue(
        "{s:s,s:s,s:s,s:s,s:{s:i,s:i,s:i,s:i,s:i,s:i},s:i,s:i,s:i,s:i,s:s,s:i,s:s,s:O,s:d,s:i,s:N,s:N,s:N,s:N,s:N,"
        "s:i,s:N}",
        "origin", self->origin, "machine", p->machine, "source", p->source, "graph_key", key, "config", "vocab",
        ss->cfg.vocab, "d_model", ss->cfg.d_model, "heads", ss->cfg.n_heads, "layers", ss->cfg.n_layers, "seq",
        ss->cfg.seq_len, "batch", ss->cfg.batch, "n_nodes", g->n_nodes, "n_groups", gr->n_groups, "n_devices",
        p->n_devices, "micro_batches", ss->pb.sched.micro_batches, "schedule", schedule_order_name(ss->pb.sched.order),
        "n_features", GROUP_N_FEATURES, "groups", grouping_mode_name(gr->mode), "chain", gr->chain ? Py_True : Py_False,
        "oom_penalty_us", ss->pb.oom_penalty_us, "n_sim_params", ss->n_sim_params, "sim_params", prm, "cap_bytes",
        caps, "devices", devs, "nodes", nodes, "features", feats, "threads", policy_evaluator_threads(ss->ev),
        "node_group", ng);
    prm = caps = devs = nodes = feats = ng = NULL;
out:
    Py_XDECREF(nodes);
    Py_XDECREF(feats);
    Py_XDECREF(devs);
    Py_XDECREF(prm);
    Py_XDECREF(caps);
    Py_XDECREF(ng);
    session_leave(self);
    return ret;
}

static PyMethodDef Session_methods[] = {
    {"evaluate", (PyCFunction)Session_evaluate, METH_O,
     "evaluate(placement) -> (step_us, cost_us, peak_bytes, oom, devices_used) for one unit or node placement"},
    {"_simulate", (PyCFunction)Session_simulate, METH_VARARGS, "batch simulation into caller-allocated buffers"},
    {"_trace", (PyCFunction)(void (*)(void))Session_trace, METH_VARARGS | METH_KEYWORDS,
     "_trace(placement, path=None) -> (step_us, events, critical_path)"},
    {"search", (PyCFunction)(void (*)(void))Session_search, METH_VARARGS | METH_KEYWORDS,
     "search(method, budget=2000, seed=1, batch=8, max_evals=5e7) -> (candidates, info); methods: single, human, dp, random, anneal, local, exhaustive, etf, sct"},
    {"train", (PyCFunction)(void (*)(void))Session_train, METH_VARARGS | METH_KEYWORDS,
     "train(updates=250, samples=8, seed=1, ..., algo='reinforce') -> dict (REINFORCE / PPO placer)"},
    {"_info", (PyCFunction)Session_info, METH_NOARGS, "the session's problem as a dict"},
    {NULL, NULL, 0, NULL}};

PyTypeObject SessionType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "placer._core.Session",
    .tp_basicsize = sizeof(SessionObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc = "A placement problem over a profile database or spec machine (see placer.Session).",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Session_init,
    .tp_dealloc = (destructor)Session_dealloc,
    .tp_methods = Session_methods,
};
