"""Where lob finds its checkout's folders: the one definition of each path (bottom layer:
imports nothing from lob).

``LOB_EXPERIMENTS_DIR`` and ``LOB_ARTIFACTS`` override the defaults (tests, CI, a user's own
artifacts folder); ``LOB_CACHE`` moves the cache (compiled helpers, built engine adapters,
fetched data, bisect checkouts)."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

__all__ = ["repo_root", "experiments_dir", "artifacts_dir", "notebooks_dir", "cache_dir",
           "file_sha256", "absolute_env", "PATH_VARIABLES"]

# environment variables that name files or folders (LOB_ENGINES_TOML: a list of them)
PATH_VARIABLES = ("LOB_ARTIFACTS", "LOB_BISECT_CACHE", "LOB_CACHE", "LOB_DATA_DIR",
                  "LOB_ENGINES_TOML", "LOB_EXPERIMENTS_DIR", "XDG_CACHE_HOME")


def absolute_env(environ=None) -> dict[str, str]:
    """Make every path in :data:`PATH_VARIABLES` absolute, against the current folder, in
    ``environ`` (default ``os.environ``): done once, where the command line is read, so that
    a notebook's kernel (started in ``notebooks/``) or any child finds what the user named,
    never a path of the same name under its own folder. Returns what it changed."""
    env = os.environ if environ is None else environ
    changed = {}
    for var in PATH_VARIABLES:
        value = env.get(var)
        if not value:
            continue
        parts = value.split(os.pathsep) if var == "LOB_ENGINES_TOML" else [value]
        fixed = os.pathsep.join(os.path.abspath(os.path.expanduser(p)) if p else p
                                for p in parts)
        if fixed != value:
            env[var] = changed[var] = fixed
    return changed


def repo_root() -> Path:
    """The checkout lob runs from (holds ``experiments/``, ``notebooks/`` and ``artifacts/``)."""
    return Path(__file__).resolve().parents[1]


def experiments_dir() -> Path:
    """Where the YAML definitions live (``LOB_EXPERIMENTS_DIR`` overrides, for tests)."""
    return Path(os.environ.get("LOB_EXPERIMENTS_DIR") or repo_root() / "experiments")


def artifacts_dir() -> Path:
    """``artifacts/`` of the checkout (``LOB_ARTIFACTS`` overrides)."""
    return Path(os.environ.get("LOB_ARTIFACTS") or repo_root() / "artifacts")


def notebooks_dir() -> Path:
    """The parameterised notebooks of the checkout."""
    return repo_root() / "notebooks"


def cache_dir(*parts: str) -> Path:
    """lob's cache outside the checkout: ``$LOB_CACHE``, else ``$XDG_CACHE_HOME/lob``, else
    ``~/.cache/lob`` (with ``parts`` appended)."""
    base = os.environ.get("LOB_CACHE")
    if base:
        root = Path(base).expanduser()
    else:
        xdg = os.environ.get("XDG_CACHE_HOME")
        root = (Path(xdg).expanduser() if xdg else Path.home() / ".cache") / "lob"
    return root.joinpath(*parts)


def file_sha256(path: str | os.PathLike) -> str:
    """The SHA-256 of a file's bytes, read in 1 MiB blocks (a fetched wheel, a built library)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()
