"""Build-and-load of the native helpers in ``_native.c`` (capture loops, counting allocator).

The C source is compiled with ``gcc`` the first time it is needed, into a cache folder
(:func:`lob.paths.cache_dir`: ``$LOB_CACHE`` or ``~/.cache/lob``), under a name that
includes a hash of the source and the interpreter's extension suffix, and imported as an
extension module. No packaging step is involved, so ``pip install -e .`` stays pure Python.
When no compiler is available :func:`native` returns ``None`` and callers fall back to
pure-Python loops (and say so in their results).
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import os
import shutil
import subprocess
import sysconfig
import tempfile
from pathlib import Path
from types import ModuleType

_SRC = Path(__file__).with_name("_native.c")
_module: ModuleType | None = None
_error: str | None = None


def cache_dir() -> Path:
    """Where the helper is built: :func:`lob.paths.cache_dir` (``$LOB_CACHE``)."""
    from lob.paths import cache_dir as lob_cache

    return lob_cache()


def build_shared(src: Path, stem: str, flags: tuple[str, ...] = ()) -> Path:
    """``src`` compiled with gcc into a shared object in :func:`cache_dir`, named after a
    hash of the source, the flags and the interpreter's extension suffix (built once;
    later calls return the file). RuntimeError when there is no compiler or it fails."""
    text = src.read_bytes()
    suffix = sysconfig.get_config_var("EXT_SUFFIX") or ".so"
    tag = hashlib.sha256(text + suffix.encode() + " ".join(flags).encode()).hexdigest()[:16]
    out = cache_dir() / f"{stem}-{tag}{suffix}"
    if out.exists():
        return out
    cc = os.environ.get("CC") or shutil.which("gcc") or shutil.which("cc")
    if not cc:
        raise RuntimeError("no C compiler (gcc/cc) found to build lob's measurement helpers")
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(suffix=suffix, dir=out.parent)
    os.close(fd)
    cmd = [cc, "-O2", "-shared", "-fPIC", *flags, str(src), "-o", tmp]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        os.unlink(tmp)
        raise RuntimeError(f"building {src.name} failed: {proc.stderr.strip()[:2000]}")
    os.replace(tmp, out)  # atomic: concurrent builders never see a half-written file
    return out


def _build() -> Path:
    return build_shared(_SRC, "_lobmeasure", (f"-I{sysconfig.get_paths()['include']}",))


def native() -> ModuleType | None:
    """The compiled helper module, building it on first use; ``None`` if it cannot be built."""
    global _module, _error
    if _module is not None or _error is not None:
        return _module
    if os.environ.get("LOB_NO_NATIVE"):
        _error = "disabled by LOB_NO_NATIVE"
        return None
    try:
        path = _build()
        loader = importlib.machinery.ExtensionFileLoader("_lobmeasure", str(path))
        spec = importlib.util.spec_from_file_location("_lobmeasure", path, loader=loader)
        mod = importlib.util.module_from_spec(spec)
        loader.exec_module(mod)
        _module = mod
    except (OSError, RuntimeError, ImportError) as e:
        _error = str(e)
    return _module


def native_error() -> str | None:
    """Why :func:`native` returned ``None`` (``None`` when it did not)."""
    native()
    return _error
