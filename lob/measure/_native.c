/* lob.measure native helpers, compiled at first use by lob/measure/_native.py.
 *
 * 1. timed_loop / open_loop: the per-op capture loops. Running the loop in C leaves only the
 *    two clock_gettime(CLOCK_MONOTONIC) reads (the clock behind time.perf_counter_ns) and one
 *    store between consecutive ops; a Python-level loop costs ~4x more per sample.
 * 2. A counting allocator: wraps the PYMEM_DOMAIN_RAW / MEM / OBJ allocators and counts every
 *    call and the bytes requested. OBJ and MEM are only called with the GIL held, so plain
 *    counters are safe there; RAW may be called without the GIL, so it uses relaxed atomics.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <time.h>
#include <stdint.h>

static inline int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* The time-stamp counter: ~10 ns a read where clock_gettime costs 20-30 ns on this class of
 * machine. Ticks, not ns: Python converts with a tick rate measured against CLOCK_MONOTONIC
 * over the same capture (see lob.measure.clock), and uses it only on CPUs whose flags say
 * the counter is constant and non-stop. */
#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#define HAVE_TSC 1
static int64_t now_ticks(void) { return (int64_t)__rdtsc(); }
#else
#define HAVE_TSC 0
static int64_t now_ticks(void) { return now_ns(); }
#endif
static int64_t now_ns_fn(void) { return now_ns(); }

/* timed_loop(fn, rows, timed, buf, outs[, use_tsc]) -> number of samples written.
 * rows: list of tuples; timed: bytes-like of len(rows) (0/1); buf: writable int64 buffer
 * (ns, or TSC ticks when use_tsc); outs: list of len(rows) receiving fn(*row), or None. */
static PyObject *timed_loop(PyObject *self, PyObject *args) {
    PyObject *fn, *rows, *outs;
    Py_buffer tb, bb;
    int use_tsc = 0;
    if (!PyArg_ParseTuple(args, "OO!y*w*O|p", &fn, &PyList_Type, &rows, &tb, &bb, &outs,
                          &use_tsc))
        return NULL;
    int64_t (*clk)(void) = use_tsc ? now_ticks : now_ns_fn;
    Py_ssize_t n = PyList_GET_SIZE(rows), k = 0;
    const char *timed = (const char *)tb.buf;
    int64_t *buf = (int64_t *)bb.buf;
    Py_ssize_t cap = bb.len / (Py_ssize_t)sizeof(int64_t);
    PyObject *err = NULL;
    if (tb.len < n) { err = PyExc_ValueError; goto fail_msg; }
    if (outs != Py_None && (!PyList_Check(outs) || PyList_GET_SIZE(outs) < n)) {
        err = PyExc_ValueError; goto fail_msg;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *row = PyList_GET_ITEM(rows, i), *r;
        if (timed[i]) {
            if (k >= cap) { err = PyExc_ValueError; goto fail_msg; }
            int64_t t0 = clk();
            r = PyObject_Call(fn, row, NULL);
            int64_t t1 = clk();
            buf[k++] = t1 - t0;
        } else {
            r = PyObject_Call(fn, row, NULL);
        }
        if (r == NULL) goto fail;
        if (outs != Py_None) PyList_SetItem(outs, i, r); else Py_DECREF(r);
        if ((i & 0xFFFF) == 0xFFFF && PyErr_CheckSignals() < 0) goto fail;
    }
    PyBuffer_Release(&tb); PyBuffer_Release(&bb);
    return PyLong_FromSsize_t(k);
fail_msg:
    PyErr_SetString(err, "timed_loop: buffer shorter than the rows / timed samples");
fail:
    PyBuffer_Release(&tb); PyBuffer_Release(&bb);
    return NULL;
}

/* open_loop(fn, rows, timed, period_ns, lat, svc) -> (samples, start_ns, last_due, last_end).
 * Timed row j is due at start + j*period (start = clock when the first timed row is reached);
 * it starts at max(now, due) (busy-wait) and lat[j] = end - due, svc[j] = end - begin.
 * Untimed rows run unscheduled when reached. */
static PyObject *open_loop(PyObject *self, PyObject *args) {
    PyObject *fn, *rows;
    Py_buffer tb, lb, sb;
    long long period;
    if (!PyArg_ParseTuple(args, "OO!y*Lw*w*", &fn, &PyList_Type, &rows, &tb, &period, &lb, &sb))
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(rows), k = 0;
    const char *timed = (const char *)tb.buf;
    int64_t *lat = (int64_t *)lb.buf, *svc = (int64_t *)sb.buf;
    Py_ssize_t cap = lb.len < sb.len ? lb.len / 8 : sb.len / 8;
    int64_t start = 0, due = 0, end = 0;
    if (tb.len < n) { PyErr_SetString(PyExc_ValueError, "open_loop: timed shorter than rows"); goto fail; }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *row = PyList_GET_ITEM(rows, i), *r;
        if (timed[i]) {
            if (k >= cap) { PyErr_SetString(PyExc_ValueError, "open_loop: buffer too short"); goto fail; }
            if (k == 0) start = now_ns();
            due = start + (int64_t)k * period;
            int64_t t0 = now_ns();
            while (t0 < due) t0 = now_ns();
            r = PyObject_Call(fn, row, NULL);
            end = now_ns();
            lat[k] = end - due; svc[k] = end - t0; k++;
        } else {
            r = PyObject_Call(fn, row, NULL);
        }
        if (r == NULL) goto fail;
        Py_DECREF(r);
        if ((i & 0xFFFF) == 0xFFFF && PyErr_CheckSignals() < 0) goto fail;
    }
    PyBuffer_Release(&tb); PyBuffer_Release(&lb); PyBuffer_Release(&sb);
    return Py_BuildValue("nLLL", k, (long long)start, (long long)due, (long long)end);
fail:
    PyBuffer_Release(&tb); PyBuffer_Release(&lb); PyBuffer_Release(&sb);
    return NULL;
}

/* clock_deltas(buf[, use_tsc]): back-to-back clock read differences (calibration). */
static PyObject *clock_deltas(PyObject *self, PyObject *args) {
    Py_buffer bb;
    int use_tsc = 0;
    if (!PyArg_ParseTuple(args, "w*|p", &bb, &use_tsc)) return NULL;
    int64_t (*clk)(void) = use_tsc ? now_ticks : now_ns_fn;
    int64_t *buf = (int64_t *)bb.buf;
    Py_ssize_t n = bb.len / 8;
    for (Py_ssize_t i = 0; i < n; i++) {
        int64_t a = clk();
        int64_t b = clk();
        buf[i] = b - a;
    }
    PyBuffer_Release(&bb);
    Py_RETURN_NONE;
}

/* tsc_pair() -> (CLOCK_MONOTONIC ns, TSC ticks), read back to back. */
static PyObject *tsc_pair(PyObject *self, PyObject *noargs) {
    int64_t a = now_ns();
    int64_t t = now_ticks();
    return Py_BuildValue("(LL)", (long long)a, (long long)t);
}

static PyObject *has_tsc(PyObject *self, PyObject *noargs) { return PyBool_FromLong(HAVE_TSC); }

/* ---- counting allocator ------------------------------------------------------------ */
typedef struct { PyMemAllocatorEx orig; } hook_t;
static hook_t h_raw, h_mem, h_obj;
static int installed = 0;
/* GIL-protected counters (MEM + OBJ domains) */
static unsigned long long g_alloc, g_realloc, g_free, g_bytes;
/* RAW domain: may run without the GIL */
static unsigned long long r_alloc, r_realloc, r_free, r_bytes;

#define ADD(v, x) __atomic_fetch_add(&(v), (x), __ATOMIC_RELAXED)

static void *g_malloc(void *ctx, size_t n) {
    hook_t *h = ctx; void *p = h->orig.malloc(h->orig.ctx, n);
    if (p) { g_alloc++; g_bytes += n; }
    return p;
}
static void *g_calloc(void *ctx, size_t ne, size_t es) {
    hook_t *h = ctx; void *p = h->orig.calloc(h->orig.ctx, ne, es);
    if (p) { g_alloc++; g_bytes += ne * es; }
    return p;
}
static void *g_realloc_(void *ctx, void *ptr, size_t n) {
    hook_t *h = ctx; void *p = h->orig.realloc(h->orig.ctx, ptr, n);
    if (p) { if (ptr) g_realloc++; else g_alloc++; g_bytes += n; }
    return p;
}
static void g_free_(void *ctx, void *ptr) {
    hook_t *h = ctx;
    if (ptr) g_free++;
    h->orig.free(h->orig.ctx, ptr);
}
static void *r_malloc(void *ctx, size_t n) {
    hook_t *h = ctx; void *p = h->orig.malloc(h->orig.ctx, n);
    if (p) { ADD(r_alloc, 1); ADD(r_bytes, n); }
    return p;
}
static void *r_calloc(void *ctx, size_t ne, size_t es) {
    hook_t *h = ctx; void *p = h->orig.calloc(h->orig.ctx, ne, es);
    if (p) { ADD(r_alloc, 1); ADD(r_bytes, ne * es); }
    return p;
}
static void *r_realloc_(void *ctx, void *ptr, size_t n) {
    hook_t *h = ctx; void *p = h->orig.realloc(h->orig.ctx, ptr, n);
    if (p) { if (ptr) ADD(r_realloc, 1); else ADD(r_alloc, 1); ADD(r_bytes, n); }
    return p;
}
static void r_free_(void *ctx, void *ptr) {
    hook_t *h = ctx;
    if (ptr) ADD(r_free, 1);
    h->orig.free(h->orig.ctx, ptr);
}

static void hook(PyMemAllocatorDomain d, hook_t *h, int raw) {
    PyMemAllocatorEx a;
    PyMem_GetAllocator(d, &h->orig);
    a.ctx = h;
    a.malloc = raw ? r_malloc : g_malloc;
    a.calloc = raw ? r_calloc : g_calloc;
    a.realloc = raw ? r_realloc_ : g_realloc_;
    a.free = raw ? r_free_ : g_free_;
    PyMem_SetAllocator(d, &a);
}

static PyObject *alloc_install(PyObject *self, PyObject *noargs) {
    if (installed) { PyErr_SetString(PyExc_RuntimeError, "allocation counter already installed"); return NULL; }
    hook(PYMEM_DOMAIN_RAW, &h_raw, 1);
    hook(PYMEM_DOMAIN_MEM, &h_mem, 0);
    hook(PYMEM_DOMAIN_OBJ, &h_obj, 0);
    installed = 1;
    Py_RETURN_NONE;
}

static PyObject *alloc_uninstall(PyObject *self, PyObject *noargs) {
    if (installed) {
        PyMem_SetAllocator(PYMEM_DOMAIN_OBJ, &h_obj.orig);
        PyMem_SetAllocator(PYMEM_DOMAIN_MEM, &h_mem.orig);
        PyMem_SetAllocator(PYMEM_DOMAIN_RAW, &h_raw.orig);
        installed = 0;
    }
    Py_RETURN_NONE;
}

/* alloc_read() -> (allocs, reallocs, frees, bytes) summed over the three domains */
static PyObject *alloc_read(PyObject *self, PyObject *noargs) {
    unsigned long long a = g_alloc + __atomic_load_n(&r_alloc, __ATOMIC_RELAXED);
    unsigned long long re = g_realloc + __atomic_load_n(&r_realloc, __ATOMIC_RELAXED);
    unsigned long long f = g_free + __atomic_load_n(&r_free, __ATOMIC_RELAXED);
    unsigned long long b = g_bytes + __atomic_load_n(&r_bytes, __ATOMIC_RELAXED);
    return Py_BuildValue("KKKK", a, re, f, b);
}

static PyObject *alloc_installed(PyObject *self, PyObject *noargs) {
    return PyBool_FromLong(installed);
}

static PyMethodDef methods[] = {
    {"timed_loop", timed_loop, METH_VARARGS, "closed-loop per-op capture"},
    {"open_loop", open_loop, METH_VARARGS, "open-loop per-op capture at a fixed period"},
    {"clock_deltas", clock_deltas, METH_VARARGS, "back-to-back clock read differences"},
    {"tsc_pair", tsc_pair, METH_NOARGS, "(monotonic ns, TSC ticks)"},
    {"has_tsc", has_tsc, METH_NOARGS, "is the TSC readable on this build"},
    {"alloc_install", alloc_install, METH_NOARGS, "install the counting allocator"},
    {"alloc_uninstall", alloc_uninstall, METH_NOARGS, "restore the previous allocators"},
    {"alloc_read", alloc_read, METH_NOARGS, "(allocs, reallocs, frees, bytes)"},
    {"alloc_installed", alloc_installed, METH_NOARGS, "is the counter installed"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef moddef = {PyModuleDef_HEAD_INIT, "_lobmeasure", NULL, -1, methods};

PyMODINIT_FUNC PyInit__lobmeasure(void) { return PyModule_Create(&moddef); }
