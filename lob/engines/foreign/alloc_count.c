/* Allocation counter for a native engine library, linked into it with -Wl,--wrap=SYMBOL for
 * every C and C++ allocation symbol (WRAPPED in lob/engines/foreign/counting.py): the linker sends each
 * call the library's own code makes to malloc, calloc, realloc, free, aligned_alloc,
 * posix_memalign and every operator new / delete (plain, array, nothrow, sized, aligned) to
 * the __wrap_ function here, which counts it and calls the real one (__real_). Calls made
 * inside other libraries (libstdc++'s own out-of-line code, libc) are not the engine's and
 * are not counted.
 *
 * The definition is orderbook-rs's counting GlobalAlloc wrapper's: over a window, the number
 * of allocations (malloc, calloc, aligned, operator new; realloc(NULL, n) counts as one), of
 * reallocations of an existing block (counted apart), of frees (free or delete of a non-NULL
 * pointer; realloc(p, 0) counts as a free) and the bytes requested by allocations and
 * reallocations. Counting is off until lob_alloc_reset(1): a timed replay runs the same code
 * with one untaken branch per allocation. The engine is single-threaded inside a replay call,
 * so the counters are plain integers.
 *
 * Exported outside the engine ABI (lob_engine.h):
 *   void lob_alloc_reset(int32_t enable)  zero the counters; count from now on iff enable
 *   void lob_alloc_read(int64_t out[4])   allocs, reallocs, frees, bytes_alloc
 */
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus /* g++ compiles a .c file as C++: keep every name unmangled */
extern "C" {
#endif

/* the wrappers stay inside the library: no other library may bind to them */
#define HIDDEN __attribute__((visibility("hidden")))

static int on;
static int64_t n_alloc, n_realloc, n_free, n_bytes;

void lob_alloc_reset(int32_t enable) {
    n_alloc = n_realloc = n_free = n_bytes = 0;
    on = enable != 0;
}

void lob_alloc_read(int64_t *out) {
    out[0] = n_alloc;
    out[1] = n_realloc;
    out[2] = n_free;
    out[3] = n_bytes;
}

static inline void *got(void *p, size_t n) {
    if (on && p) { n_alloc++; n_bytes += (int64_t)n; }
    return p;
}

static inline void gone(void *p) {
    if (on && p) n_free++;
}

/* ---- C ------------------------------------------------------------------------------ */
void *__real_malloc(size_t);
void *__real_calloc(size_t, size_t);
void *__real_realloc(void *, size_t);
void __real_free(void *);
void *__real_aligned_alloc(size_t, size_t);
int __real_posix_memalign(void **, size_t, size_t);

HIDDEN void *__wrap_malloc(size_t n) { return got(__real_malloc(n), n); }
HIDDEN void *__wrap_calloc(size_t k, size_t n) { return got(__real_calloc(k, n), k * n); }
HIDDEN void *__wrap_aligned_alloc(size_t a, size_t n) { return got(__real_aligned_alloc(a, n), n); }
HIDDEN void __wrap_free(void *p) { gone(p); __real_free(p); }

HIDDEN int __wrap_posix_memalign(void **p, size_t a, size_t n) {
    int r = __real_posix_memalign(p, a, n);
    if (r == 0) got(*p, n);
    return r;
}

HIDDEN void *__wrap_realloc(void *p, size_t n) {
    if (!p) return got(__real_realloc(p, n), n);
    void *q = __real_realloc(p, n);
    if (on) {
        if (n == 0) n_free++;  /* glibc frees the block */
        else if (q) { n_realloc++; n_bytes += (int64_t)n; }
    }
    return q;
}

/* ---- C++: operator new / delete (Itanium ABI names, size_t = unsigned long) ----------- */
#define NEW(sym, args, call_args, size)                                                    \
    void *__real_##sym args;                                                               \
    HIDDEN void *__wrap_##sym args { return got(__real_##sym call_args, size); }
#define DEL(sym, args, call_args, ptr)                                                     \
    void __real_##sym args;                                                                \
    HIDDEN void __wrap_##sym args { gone(ptr); __real_##sym call_args; }

typedef struct { char c; } nothrow_t;  /* std::nothrow_t: passed by reference */
typedef size_t align_t;                /* std::align_val_t: an enum over size_t */

NEW(_Znwm, (size_t n), (n), n)                                                /* new */
NEW(_Znam, (size_t n), (n), n)                                                /* new[] */
NEW(_ZnwmRKSt9nothrow_t, (size_t n, const nothrow_t *t), (n, t), n)
NEW(_ZnamRKSt9nothrow_t, (size_t n, const nothrow_t *t), (n, t), n)
NEW(_ZnwmSt11align_val_t, (size_t n, align_t a), (n, a), n)
NEW(_ZnamSt11align_val_t, (size_t n, align_t a), (n, a), n)
NEW(_ZnwmSt11align_val_tRKSt9nothrow_t, (size_t n, align_t a, const nothrow_t *t), (n, a, t), n)
NEW(_ZnamSt11align_val_tRKSt9nothrow_t, (size_t n, align_t a, const nothrow_t *t), (n, a, t), n)

DEL(_ZdlPv, (void *p), (p), p)                                                /* delete */
DEL(_ZdaPv, (void *p), (p), p)                                                /* delete[] */
DEL(_ZdlPvm, (void *p, size_t n), (p, n), p)                                  /* sized */
DEL(_ZdaPvm, (void *p, size_t n), (p, n), p)
DEL(_ZdlPvRKSt9nothrow_t, (void *p, const nothrow_t *t), (p, t), p)
DEL(_ZdaPvRKSt9nothrow_t, (void *p, const nothrow_t *t), (p, t), p)
DEL(_ZdlPvSt11align_val_t, (void *p, align_t a), (p, a), p)
DEL(_ZdaPvSt11align_val_t, (void *p, align_t a), (p, a), p)
DEL(_ZdlPvmSt11align_val_t, (void *p, size_t n, align_t a), (p, n, a), p)
DEL(_ZdaPvmSt11align_val_t, (void *p, size_t n, align_t a), (p, n, a), p)
DEL(_ZdlPvSt11align_val_tRKSt9nothrow_t, (void *p, align_t a, const nothrow_t *t), (p, a, t), p)
DEL(_ZdaPvSt11align_val_tRKSt9nothrow_t, (void *p, align_t a, const nothrow_t *t), (p, a, t), p)

#ifdef __cplusplus
}
#endif
