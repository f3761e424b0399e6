"""The native allocation counter (lob/engines/foreign/alloc_count.c, linked with --wrap) on a
tiny library whose allocations are known by construction: mallocs, callocs, reallocs,
frees, every kind of operator new / delete. Built with g++ into a temporary folder; without
g++ these tests skip, saying so."""

import ctypes
import shutil
import subprocess

import pytest

from lob.engines.foreign.counting import WRAPPED, NativeAllocCounter, link_args

TINY = r"""
#include <cstdlib>
#include <new>
#include <vector>
struct alignas(64) Wide { char c[64]; };
extern "C" int64_t known(void) {
    void *a = std::malloc(10);                 /* alloc 10 */
    void *b = std::calloc(4, 8);               /* alloc 32 */
    a = std::realloc(a, 100);                  /* realloc 100 */
    void *c = std::realloc(nullptr, 7);        /* alloc 7 */
    std::free(a); std::free(b); std::free(c);  /* 3 frees */
    std::free(nullptr);                        /* not a free */
    int *i = new int(3);                       /* alloc 4 */
    delete i;                                  /* free (sized delete) */
    char *arr = new char[50];                  /* alloc 50 */
    delete[] arr;                              /* free */
    int *n = new (std::nothrow) int(1);        /* alloc 4 */
    delete n;                                  /* free */
    Wide *w = new Wide;                        /* alloc 64 (aligned new) */
    delete w;                                  /* free (aligned delete) */
    std::vector<long> v(16);                   /* alloc 128 (std::allocator -> new) */
    return (int64_t)v.size();
}                                              /* ~vector: free */
"""
# allocs: malloc, calloc, realloc(NULL), new, new[], nothrow new, aligned new, vector = 8
# reallocs: 1; frees: 3 free + delete, delete[], delete, aligned delete, vector = 8
# bytes: 10 + 32 + 100 + 7 + 4 + 50 + 4 + 64 + 128 = 399
KNOWN = (8, 1, 8, 399)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    cxx = shutil.which("g++")
    if cxx is None:
        pytest.skip("g++ not found: the tiny counted library cannot be built")
    d = tmp_path_factory.mktemp("tiny")
    src = d / "tiny.cpp"
    src.write_text("#include <cstdint>\n" + TINY)
    lib = d / "libtiny.so"
    r = subprocess.run([cxx, "-std=c++17", "-O0", "-fPIC", "-shared", str(src), *link_args(),
                        "-o", str(lib)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    dll = ctypes.CDLL(str(lib))
    dll.known.restype = ctypes.c_int64
    return dll


def test_counts_every_kind_of_allocation_and_free(tiny):
    counter = NativeAllocCounter.of(tiny)
    assert counter is not None
    counter.start()
    assert tiny.known() == 16
    assert counter.stop() == KNOWN


def test_counts_only_while_started_and_from_zero(tiny):
    counter = NativeAllocCounter.of(tiny)
    tiny.known()  # not counting
    counter.start()
    counter.stop()
    tiny.known()  # stopped again: not counted
    counter.start()
    assert counter.stop() == (0, 0, 0, 0)
    counter.start()
    tiny.known()
    tiny.known()
    assert counter.stop() == tuple(2 * k for k in KNOWN)


def test_a_library_without_the_counter_has_none():
    libc = ctypes.CDLL(None)
    assert NativeAllocCounter.of(libc) is None


def test_every_operator_new_and_delete_is_wrapped():
    assert {"malloc", "calloc", "realloc", "free", "_Znwm", "_Znam", "_ZdlPv", "_ZdaPv",
            "_ZdlPvm", "_ZnwmSt11align_val_t", "_ZdlPvmSt11align_val_t",
            "_ZnwmRKSt9nothrow_t"} <= set(WRAPPED)
    news = [s for s in WRAPPED if s.startswith("_Zn")]
    deletes = [s for s in WRAPPED if s.startswith("_Zd")]
    assert len(news) == 8 and len(deletes) == 12  # plain/array x nothrow x aligned (x sized)
