/*
 * _core.c: the CPython extension behind the `placer` package. It exposes
 * the C library as it is, without changing it: a Session is a
 * policy_session (profile database or spec machine, graph, grouping,
 * schedule, memory caps, calibrated simulator parameters, evaluator
 * threads), and its methods run the simulator, the searches and the
 * REINFORCE placer on it. The pure-Python modules (placer/api.py,
 * placer/envs.py) wrap these methods with NumPy arrays and Gymnasium.
 *
 * Arrays cross the boundary through the buffer protocol only (no NumPy C
 * API, so the extension builds without NumPy headers): the wrapper
 * allocates C-contiguous NumPy arrays and passes them in; the C code
 * checks their item size, kind and length, fills them, and never keeps a
 * reference after the call returns.
 *
 * Threads. Session._simulate (the batch call) runs every placement in C on
 * the session evaluator's threads, one simulator context per thread, with
 * the GIL released and no Python object touched; results go to row i of
 * each output by index, so they never depend on which thread ran what.
 * Session.evaluate (one placement, the Gymnasium environment's hot path)
 * uses a context of its own. A session is for one Python thread at a
 * time: a second thread that calls it while a call is running gets
 * RuntimeError instead of a data race.
 *
 * Errors. Every C status becomes a Python exception carrying the C
 * library's one-line message: InputError (also a ValueError) for bad
 * input (placements, schedules, options, configs), NotFoundError (also a
 * FileNotFoundError) for a missing file or nothing stored, PlacerError for
 * the rest; each has .status (the pl_status number) and .status_name.
 */
#include "_core.h"

PyObject *PlacerError;   /* base of the package's exceptions */
PyObject *InputError;    /* bad input; also a ValueError */
PyObject *NotFoundError; /* missing file or nothing stored; also a FileNotFoundError */

/* Set the Python exception for status st with the C message msg (the
 * status's own description when msg is empty). Returns NULL, so callers
 * can `return pyc_raise_status(...)`. */
PyObject *pyc_raise_status(pl_status st, const char *msg) {
    PyObject *type = PlacerError;
    switch (st) {
    case PL_ERR_INVALID:
    case PL_ERR_PLACEMENT_EMPTY:
    case PL_ERR_PLACEMENT_JUNK:
    case PL_ERR_PLACEMENT_LENGTH:
    case PL_ERR_PLACEMENT_RANGE:
    case PL_ERR_SCHEDULE:
        type = InputError;
        break;
    case PL_ERR_NOT_FOUND:
        type = NotFoundError;
        break;
    case PL_ERR_NOMEM:
        return PyErr_NoMemory();
    default:
        break;
    }
    const char *text = msg && *msg ? msg : pl_status_str(st);
    PyObject *exc = PyObject_CallFunction(type, "s", text);
    if (!exc) return NULL;
    PyObject *code = PyLong_FromLong((long)st);
    PyObject *name = PyUnicode_FromString(pl_status_str(st));
    if (code && name) {
        PyObject_SetAttrString(exc, "status", code);
        PyObject_SetAttrString(exc, "status_name", name);
    }
    Py_XDECREF(code);
    Py_XDECREF(name);
    PyErr_SetObject(type, exc);
    Py_DECREF(exc);
    return NULL;
}
/* ---- buffers --------------------------------------------------------- */

/* Get a C-contiguous buffer of o with items of itemsize bytes and kind
 * 'i' (signed integer), 'u' (unsigned byte or bool) or 'f' (float), and
 * exactly n_items items (n_items < 0: any). Returns 0, or -1 with a
 * TypeError / ValueError set (nothing to release then). */
int pyc_get_buffer(PyObject *o, Py_buffer *v, int writable, char kind, Py_ssize_t itemsize, Py_ssize_t n_items,
                   const char *what) {
    int flags = PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(o, v, flags) != 0) return -1;
    const char *f = v->format ? v->format : "B";
    if (*f == '<' || *f == '=' || *f == '@') f++;
    int ok = v->itemsize == itemsize && f[0] && !f[1];
    if (ok) {
        if (kind == 'i') ok = strchr("bhilq", f[0]) != NULL;
        else if (kind == 'u') ok = strchr("B?", f[0]) != NULL;
        else ok = strchr("fd", f[0]) != NULL;
    }
    if (!ok) {
        PyErr_Format(PyExc_TypeError, "%s: expected a C-contiguous array of %s%d, got format '%s' of %zd-byte items",
                     what, kind == 'f' ? "float" : kind == 'u' ? "uint" : "int", (int)(itemsize * 8),
                     v->format ? v->format : "B", v->itemsize);
        PyBuffer_Release(v);
        return -1;
    }
    if (n_items >= 0 && v->len / itemsize != n_items) {
        PyErr_Format(PyExc_ValueError, "%s: expected %zd items, got %zd", what, n_items, v->len / itemsize);
        PyBuffer_Release(v);
        return -1;
    }
    return 0;
}
/* Append v (a new reference, or NULL after a failed constructor) to list and
 * drop the reference: 0, or -1 with the exception set. */
int pyc_append_new(PyObject *list, PyObject *v) {
    if (!v) return -1;
    int rc = PyList_Append(list, v);
    Py_DECREF(v);
    return rc;
}

/* A tuple of the n ints of a (a new reference, or NULL with the exception set). */
PyObject *pyc_int_tuple(const int *a, int n) {
    PyObject *t = PyTuple_New(n);
    if (!t) return NULL;
    for (int i = 0; i < n; i++) PyTuple_SET_ITEM(t, i, PyLong_FromLong(a[i]));
    return t;
}

/* ---- the module --------------------------------------------------------- */

static PyMethodDef module_methods[] = {
    {"simulate_layout", (PyCFunction)(void (*)(void))mod_simulate_layout, METH_VARARGS | METH_KEYWORDS,
     "simulate_layout(model, cluster, layout, seq=0, trace=None) -> dict (placer layout)"},
    {"plan", (PyCFunction)(void (*)(void))mod_plan, METH_VARARGS | METH_KEYWORDS,
     "plan(model, cluster, gpus=0, global_batch=0, seq=0, precision='bf16', top=5, fix=None, framework='any', "
     "max_tp=0, max_cp=0, max_vp=4, max_mbs=16) -> dict (placer plan)"},
    {"runs", mod_runs, METH_VARARGS, "runs(db) -> list of the placer runs stored in a profile database"},
    {"run_samples", mod_run_samples, METH_VARARGS, "run_samples(db, run_id) -> dict of lists, one entry per sample"},
    {"graph_info", mod_graph_info, METH_VARARGS, "graph_info(config='default') -> the graph of a preset, shipped model name or config.json path"},
    {"spec_names", mod_spec_names, METH_NOARGS, "spec_names() -> names of the built-in spec machines"},
    {"rng_ints", mod_rng_ints, METH_VARARGS, "rng_ints(seed, count, bound) -> bytes of int32 from pl_rng_int"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef moduledef = {PyModuleDef_HEAD_INIT, "placer._core",
                                       "The placer C library: simulator, searches and placers.", -1, module_methods};

PyMODINIT_FUNC PyInit__core(void) {
    if (PyType_Ready(&SessionType) < 0) return NULL;
    PyObject *m = PyModule_Create(&moduledef);
    if (!m) return NULL;
    PlacerError = PyErr_NewExceptionWithDoc("placer.PlacerError", "A failure reported by the placer C library.",
                                            PyExc_RuntimeError, NULL);
    PyObject *bases = PlacerError ? PyTuple_Pack(2, PlacerError, PyExc_ValueError) : NULL;
    InputError = bases ? PyErr_NewExceptionWithDoc("placer.InputError",
                                                   "Bad input: placement, schedule, option or config.", bases, NULL)
                       : NULL;
    Py_XDECREF(bases);
    bases = PlacerError ? PyTuple_Pack(2, PlacerError, PyExc_FileNotFoundError) : NULL;
    NotFoundError = bases ? PyErr_NewExceptionWithDoc("placer.NotFoundError",
                                                      "A missing file, or nothing stored for the request.", bases, NULL)
                          : NULL;
    Py_XDECREF(bases);
    if (!PlacerError || !InputError || !NotFoundError || PyModule_AddObjectRef(m, "PlacerError", PlacerError) < 0 ||
        PyModule_AddObjectRef(m, "InputError", InputError) < 0 ||
        PyModule_AddObjectRef(m, "NotFoundError", NotFoundError) < 0 ||
        PyModule_AddObjectRef(m, "Session", (PyObject *)&SessionType) < 0 ||
        PyModule_AddIntConstant(m, "OOM_PENALTY_US", (long)POLICY_OOM_PENALTY_US) < 0 ||
        PyModule_AddIntConstant(m, "N_FEATURES", GROUP_N_FEATURES) < 0 ||
        PyModule_AddIntConstant(m, "MAX_DEVICES", SIM_MAX_DEVICES) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
