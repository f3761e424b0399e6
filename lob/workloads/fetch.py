"""Real data fetched on demand, never shipped: one pinned wheel in a cache outside the repo.

lob ships no market data. The real order flow of :mod:`lob.workloads.bitstamp` comes from the
sample capture inside the PyPI wheel ``ob-analytics==0.1.0`` (GPL-2.0-or-later; the data is
Bitstamp's). :func:`fetch` downloads that wheel with ``pip download --no-deps`` into the cache
(:func:`data_dir`: ``$LOB_DATA_DIR``, else ``$XDG_CACHE_HOME/lob``, else ``~/.cache/lob``),
checks its sha256 against the pinned value and that its CSV members are intact, and says what
it downloaded, from where, its size and its hash. The wheel is never installed and none of
its code is imported: :func:`read_member` reads the CSVs straight out of the zip.

Every way this can fail raises :class:`DataFetchError` with one line naming the package and
the command to run elsewhere (offline, a wrong hash, a corrupt or truncated file).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path

__all__ = ["DataFetchError", "Dataset", "OB_ANALYTICS", "data_dir", "ensure", "fetch",
           "read_member", "status"]

ENV = "LOB_DATA_DIR"


class DataFetchError(ValueError):
    """The real data is missing, cannot be downloaded, or is not the pinned file (one line)."""


@dataclass(frozen=True)
class Dataset:
    """A pinned file from a package index: what to ask pip for and what must come back."""

    package: str
    version: str
    filename: str
    sha256: str
    size: int
    licence: str
    members: tuple[str, ...]

    @property
    def requirement(self) -> str:
        return f"{self.package}=={self.version}"

    @property
    def command(self) -> str:
        """The command that fetches the file by hand (run it where the index is reachable)."""
        return f"pip download --no-deps {self.requirement}"


OB_ANALYTICS = Dataset(
    package="ob-analytics", version="0.1.0",
    filename="ob_analytics-0.1.0-py3-none-any.whl",
    sha256="0326a93aaee4ea08356d8dea59868d68592623a2434bbe4d9be379fa855c9c62",
    size=2_957_590,
    licence="ob-analytics is GPL-2.0-or-later; the sample capture is Bitstamp's market data",
    members=("ob_analytics/_sample_data/orders.csv.gz", "ob_analytics/_sample_data/trades.csv",
             "ob_analytics/_sample_data/meta.json"))


def data_dir() -> Path:
    """The data's folder: ``$LOB_DATA_DIR``, else lob's cache (:func:`lob.paths.cache_dir`)."""
    from lob.paths import cache_dir

    if os.environ.get(ENV):
        return Path(os.environ[ENV]).expanduser()
    return cache_dir()


def _path(ds: Dataset) -> Path:
    return data_dir() / ds.filename


def _sha256(path: Path) -> str:
    from lob.paths import file_sha256

    return file_sha256(path)


def _why(e: OSError) -> str:
    return {IsADirectoryError: "a folder sits at its path", FileNotFoundError: "it is gone",
            PermissionError: "permission denied"}.get(type(e), e.strerror or str(e))


def _elsewhere(ds: Dataset) -> str:
    return (f"run `{ds.command}` on a machine that reaches the package index and copy "
            f"{ds.filename} into {data_dir()} (or point {ENV} at a folder holding it)")


def _verify(ds: Dataset, path: Path) -> None:
    """Raise DataFetchError unless ``path`` is the pinned file with intact members (also
    when it cannot be read: a folder in its place, no permission, gone meanwhile)."""
    try:
        got = _sha256(path)
    except OSError as e:
        raise DataFetchError(f"{path}: cannot read it ({_why(e)}); delete or fix it and run "
                             "`lob data fetch`") from None
    if got != ds.sha256:
        raise DataFetchError(
            f"{path}: sha256 {got[:16]}... is not the pinned {ds.sha256[:16]}... of "
            f"{ds.requirement} (wrong or altered file; delete it and run `lob data fetch`)")
    try:
        with zipfile.ZipFile(path) as z:
            for m in ds.members:
                z.read(m)  # checks each member's CRC
    except (zipfile.BadZipFile, KeyError, OSError, EOFError, zlib.error) as e:
        raise DataFetchError(
            f"{path}: corrupt or truncated {ds.requirement} wheel ({type(e).__name__}: "
            f"{str(e).splitlines()[0] if str(e) else ''}); delete it and run `lob data fetch`"
        ) from None


def status(ds: Dataset = OB_ANALYTICS) -> str:
    """One line: where the file is cached and whether it checks out (no download)."""
    p = _path(ds)
    if not p.exists():
        return f"{ds.requirement}: not fetched (would be {p}; `lob data fetch`)"
    try:
        _verify(ds, p)
        size = p.stat().st_size
    except DataFetchError as e:
        return f"{ds.requirement}: BAD: {e}"
    except OSError as e:
        return f"{ds.requirement}: BAD: {p}: {_why(e)}"
    return f"{ds.requirement}: {p} ({size:,} bytes, sha256 {ds.sha256}) ok"


def fetch(ds: Dataset = OB_ANALYTICS, *, force: bool = False, log=print) -> Path:
    """Download the pinned wheel into :func:`data_dir` (if not already there and valid).

    Prints (through ``log``) the requirement, the index pip looked in, the size and the
    sha256. Raises :class:`DataFetchError` (one line) when pip cannot get it (offline, no
    index), when the hash differs or the zip is corrupt; nothing is left in the cache then.
    """
    dest = _path(ds)
    if dest.exists() and not force:
        _verify(ds, dest)
        log(f"{ds.requirement}: already cached at {dest} ({dest.stat().st_size:,} bytes, "
            f"sha256 {ds.sha256})")
        return dest
    try:
        return _download(ds, dest, log)
    except OSError as e:  # a read-only cache, a folder in the wheel's place, a full disk
        raise DataFetchError(f"cannot save {ds.filename} into {dest.parent} ({_why(e)}); "
                             f"make it writable, or point {ENV} at a folder that is") from None


def _download(ds: Dataset, dest: Path, log) -> Path:
    dest.parent.mkdir(parents=True, exist_ok=True)
    log(f"fetching {ds.requirement} ({ds.filename}, {ds.size:,} bytes, sha256 {ds.sha256}) "
        f"with `{ds.command}` into {dest.parent}; {ds.licence}; not installed, only read")
    with tempfile.TemporaryDirectory(dir=dest.parent, prefix=".fetch-") as tmp:
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
               "--disable-pip-version-check", "-v", "-d", tmp, ds.requirement]
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        except (OSError, subprocess.TimeoutExpired) as e:
            raise DataFetchError(f"cannot download {ds.requirement} (pip: {type(e).__name__}); "
                                 f"{_elsewhere(ds)}") from None
        where = [ln.strip() for ln in r.stdout.splitlines() if ln.startswith("Looking in")]
        if r.returncode != 0:
            last = next((ln.strip() for ln in reversed(r.stderr.splitlines()) if ln.strip()),
                        f"exit status {r.returncode}")
            raise DataFetchError(f"cannot download {ds.requirement} (offline or no package "
                                 f"index? pip said: {last}); {_elsewhere(ds)}")
        got = Path(tmp) / ds.filename
        if not got.exists():
            raise DataFetchError(f"pip did not produce {ds.filename} for {ds.requirement}; "
                                 f"{_elsewhere(ds)}")
        _verify(ds, got)
        os.replace(got, dest)
    if where:
        log(f"  from: {where[0]}")
    log(f"  saved {dest} ({dest.stat().st_size:,} bytes, sha256 {ds.sha256}: matches the pin)")
    return dest


def ensure(ds: Dataset = OB_ANALYTICS, *, download: bool = True, log=None) -> Path:
    """The verified cached file; fetched first when missing and ``download`` (prints to
    stderr what it fetches), else :class:`DataFetchError` naming the command."""
    p = _path(ds)
    if p.exists():
        _verify(ds, p)
        return p
    if not download:
        raise DataFetchError(f"{ds.requirement} is not in {data_dir()}: run `lob data fetch` "
                             f"(or {_elsewhere(ds)})")
    return fetch(ds, log=log or (lambda s: print(s, file=sys.stderr, flush=True)))


def read_member(path: Path, member: str) -> bytes:
    """The bytes of one member of the (verified) wheel, read without installing it."""
    try:
        with zipfile.ZipFile(path) as z:
            return z.read(member)
    except (OSError, zipfile.BadZipFile, KeyError) as e:  # gone or replaced since verified
        why = _why(e) if isinstance(e, OSError) else type(e).__name__
        raise DataFetchError(f"{path}: cannot read {member} ({why}); run `lob data status`"
                             ) from None


def clear(ds: Dataset = OB_ANALYTICS) -> str:
    """Delete the cached wheel: what was done, in one line; DataFetchError when the path is
    a folder or cannot be removed."""
    p = _path(ds)
    if p.is_dir() and not p.is_symlink():
        raise DataFetchError(f"{p} is a folder, not the cached wheel; left alone")
    try:
        p.unlink()
    except FileNotFoundError:
        return f"nothing to remove ({p} is not there)"
    except OSError as e:
        raise DataFetchError(f"cannot remove {p} ({_why(e)})") from None
    return f"removed {p}"
