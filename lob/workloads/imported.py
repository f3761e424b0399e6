"""Your own data as a named workload: ``lob data import FORMAT FILE --name NAME``.

:func:`import_file` reads a LOBSTER, ITCH 5.0 or DBN MBO file (:mod:`lob.workloads.formats`),
converts the chosen symbol's events by the one model of real feeds
(:mod:`lob.workloads.feed`) and stores the result in lob's cache
(``<cache>/workloads/NAME.npz``, a :class:`~lob.workloads.Workload` file whose provenance
names the source file and its sha256, beside ``NAME.fills.npz``: the fills the venue's
executions must give). From then on NAME is a workload like any other: ``lob bench
--workload NAME``, a study's ``workload=NAME``, ``lob.workload(NAME)`` (``scale`` < 1 replays
a prefix). Both files are written under temporary names and renamed into place, the fills
first: a failed import leaves nothing behind, and a name is listed only when both are there.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import json
import os
import re
import time
import zipfile
from pathlib import Path

import numpy as np
from numpy.lib import format as npformat

from lob.semantics import COMMAND_DTYPE, FILL_DTYPE
from lob.workloads import Workload
from lob.workloads.feed import RULES, Converter, FeedError, compare_fills, describe_counts, to_ticks

__all__ = ["import_file", "imported_dir", "remove", "validate"]

CONVERTER_VERSION = 1
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


def imported_dir() -> Path:
    """Where imported workloads live: ``<lob cache>/workloads``."""
    from lob.paths import cache_dir

    return cache_dir("workloads")


def _check_name(name) -> None:
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise FeedError(f"workload name {name!r}: letters, digits, '_', '.', '-' (up to 64)")
    if name.endswith(".fills") or ".tmp" in name:  # the names of lob's own files here
        raise FeedError(f"workload name {name!r}: may not end in '.fills' or hold '.tmp'")


def _paths(name: str) -> tuple[Path, Path]:
    d = imported_dir()
    return d / f"{name}.npz", d / f"{name}.fills.npz"


def _sha256(path: Path) -> str:
    from lob.paths import file_sha256

    return file_sha256(path)


def import_file(fmt: str, path, *, name: str, symbol: str | None = None,
                book: str | None = None, t_from: str | None = None, t_to: str | None = None,
                progress=None, force: bool = True):
    """Read ``path`` (format ``fmt``: lobster, itch or dbn), convert it, store it as the
    workload ``name``; returns the :class:`~lob.workloads.Workload` (its commands mapped
    from the stored file, not read into memory). ``book``: LOBSTER's orderbook file;
    ``t_from`` / ``t_to``: the window (time of day), events before it build the book
    untimed. The file streams through in chunks: read, converted, appended to the output."""
    from lob.workloads import _SPECS, spec, workload_names
    from lob.workloads.formats import parse_time, read

    _check_name(name)
    if book is not None and fmt != "lobster":
        raise FeedError(f"--book is LOBSTER's orderbook file; a {fmt} file holds its own book")
    if name in workload_names() and spec(name)["family"] != "imported":
        raise FeedError(f"{name!r} is a built-in workload: choose another name")
    src = Path(path)
    t0 = time.perf_counter()
    parsed = read(fmt, src, symbol=symbol, book=book, t_from=parse_time(t_from),
                  t_to=parse_time(t_to), progress=progress)
    d = imported_dir()
    d.mkdir(parents=True, exist_ok=True)
    wpath, fpath = _paths(name)
    tag = f".tmp{os.getpid()}"
    tw, tf = d / f"{name}{tag}.npz", d / f"{name}{tag}.fills.npz"
    spool = _Spool(d / f"{name}{tag}")
    try:
        res = _convert(parsed, spool, src)
        prov = {"format": fmt, "file": src.name, "sha256": _sha256(src),
                "symbol": parsed.symbol, "book_file": Path(book).name if book else None,
                "book_sha256": _sha256(Path(book)) if book else None, "from": t_from,
                "to": t_to, "converter": CONVERTER_VERSION,
                "messages_in_file": parsed.messages, "tick": res.tick, "counts": res.counts,
                "first_book_mismatch_event": res.first_mismatch, "notes": parsed.notes,
                "read_convert_s": round(time.perf_counter() - t0, 3)}
        sha = spool.write(tw, tf, res.tick, _meta(name, fmt, src, parsed.symbol, res, prov))
        with _pair_lock(d):  # two imports of one name never interleave their renames
            os.replace(tf, fpath)
            os.replace(tw, wpath)
    finally:
        spool.close()
        for t in (tw, tf):
            t.unlink(missing_ok=True)
    _SPECS.clear()
    return _mapped(name, wpath, res, sha)


def _convert(parsed, spool, src: Path):
    """Stream the reader's chunks through a :class:`~lob.workloads.feed.Converter` into
    ``spool``; the :class:`~lob.workloads.feed.Result`."""
    chunks = iter(parsed.chunks)
    first = next(chunks, None)  # the reader states its pre-load and depth as it reads it
    conv = Converter(parsed.preload, parsed.book_depth)
    for ev, bk in itertools.chain([first] if first is not None else [], chunks):
        spool.add(*conv.feed(ev, bk))
    if not conv.events:
        raise FeedError(f"{src.name}: no events of {parsed.symbol!r} in the window")
    return conv.finish()


def _meta(name, fmt, src, symbol, res, prov) -> Workload:
    c = res.counts
    desc = (f"Imported {fmt} file {src.name}, symbol {symbol}: {c['events']:,} events "
            f"-> {c['commands']:,} commands, {c['trades_reproduced']:,} executions reproduced "
            f"fill by fill; tick {res.tick} venue price units, band "
            f"{res.config.min_price:,}..{res.config.max_price:,}. Rules and counts: "
            "`lob workloads describe` (lob.workloads.feed).")
    return Workload(name, "imported", np.zeros(0, COMMAND_DTYPE), res.config, 0,
                    {"seed": 0, "scale": 1.0}, desc, json.dumps(prov, sort_keys=True))


class _Spool:
    """Commands, their venue ids and the fills, appended chunk by chunk to raw files beside
    the cache (never whole in memory), then written as the workload's two ``.npz`` files
    once the conversion's tick is known."""

    DTYPES = {"commands": COMMAND_DTYPE, "venue_id": np.dtype(np.int64), "fills": FILL_DTYPE}

    def __init__(self, stem: Path):
        self.raw = {k: stem.with_name(f"{stem.name}.{k}.raw") for k in self.DTYPES}
        self.files = {k: open(p, "wb") for k, p in self.raw.items()}
        self.n = dict.fromkeys(self.DTYPES, 0)

    def add(self, commands, venue_id, fills) -> None:
        for k, a in (("commands", commands), ("venue_id", venue_id), ("fills", fills)):
            self.files[k].write(np.ascontiguousarray(a).data)
            self.n[k] += len(a)

    def write(self, tw: Path, tf: Path, tick: int, wl: Workload) -> str:
        """Both files, prices in ticks; returns the commands' sha256 (the workload's own,
        which binds the fills to it)."""
        for f in self.files.values():
            f.close()
        sha = hashlib.sha256()

        def commands(a):
            to_ticks(a, tick)
            sha.update(a.data)
        with zipfile.ZipFile(tw, "w", zipfile.ZIP_STORED, allowZip64=True) as z:
            self._member(z, "commands", commands)
            meta = wl._meta()
            meta.update(n_commands=self.n["commands"], sha256=sha.hexdigest())
            _array_member(z, "meta", np.array(json.dumps(meta, sort_keys=True)))
        with zipfile.ZipFile(tf, "w", zipfile.ZIP_STORED, allowZip64=True) as z:
            self._member(z, "fills", lambda a: to_ticks(a, tick))
            self._member(z, "venue_id", None)
            _array_member(z, "commands_sha256", np.array(sha.hexdigest()))
        return sha.hexdigest()

    def _member(self, z, key: str, each) -> None:
        dt, n = self.DTYPES[key], self.n[key]
        with z.open(f"{key}.npy", "w", force_zip64=True) as f, open(self.raw[key], "rb") as r:
            npformat.write_array_header_2_0(f, {"descr": npformat.dtype_to_descr(dt),
                                                "fortran_order": False, "shape": (n,)})
            buf = bytearray(dt.itemsize * (1 << 18))  # read into, changed in place, written
            while k := r.readinto(buf):
                a = np.frombuffer(memoryview(buf)[:k], dt)
                if each:
                    each(a)
                f.write(a.data)

    def close(self) -> None:
        for k, f in self.files.items():
            f.close()
            self.raw[k].unlink(missing_ok=True)


def _array_member(z, key: str, a: np.ndarray) -> None:
    with z.open(f"{key}.npy", "w", force_zip64=True) as f:
        npformat.write_array(f, a, allow_pickle=False)


def _mapped(name: str, wpath: Path, res, sha: str) -> Workload:
    """The stored workload, its commands a read-only map of the file's ``commands`` member
    (an uncompressed zip member: its bytes sit in the file as they are)."""
    with zipfile.ZipFile(wpath) as z:
        info = z.getinfo("commands.npy")
        with z.open("meta.npy") as f:
            meta = json.loads(str(npformat.read_array(f, allow_pickle=False)[()]))
    with open(wpath, "rb") as f:
        f.seek(info.header_offset)
        local = f.read(30)  # a zip local header: 30 bytes, then the name and the extra field
        f.seek(info.header_offset + 30 + int.from_bytes(local[26:28], "little")
               + int.from_bytes(local[28:30], "little"))
        version = npformat.read_magic(f)
        header = (npformat.read_array_header_1_0 if version == (1, 0)
                  else npformat.read_array_header_2_0)
        shape, _, dtype = header(f)
        offset = f.tell()
    if meta["sha256"] != sha or dtype != COMMAND_DTYPE:
        raise FeedError(f"imported workload {name!r}: replaced while it was being imported")
    cmds = np.memmap(wpath, COMMAND_DTYPE, "r", offset, shape) if shape[0] else \
        np.zeros(0, COMMAND_DTYPE)
    return Workload(name, "imported", cmds, res.config, 0, meta["params"], meta["description"],
                    meta["provenance"])


def _commands_sha(cmds: np.ndarray) -> str:
    import hashlib

    return hashlib.sha256(np.ascontiguousarray(cmds).tobytes()).hexdigest()


@contextlib.contextmanager
def _pair_lock(d: Path):
    import fcntl

    with open(d / ".lock", "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        yield


def remove(name: str) -> bool:
    """Delete an imported workload; True if it was there."""
    from lob.workloads import _SPECS

    _check_name(name)  # a name, never a path
    hit = False
    for p in _paths(name):
        if p.exists():
            p.unlink()
            hit = True
    _SPECS.clear()
    return hit


def _load(name: str):
    from lob.workloads import Workload, WorkloadFileError

    wpath, fpath = _paths(name)
    try:
        wl = Workload.load(wpath)
        with np.load(fpath, allow_pickle=False) as z:
            fills = z["fills"]
            bound = str(z["commands_sha256"][()]) if "commands_sha256" in z else None
    except (WorkloadFileError, OSError, KeyError, ValueError) as e:
        raise FeedError(f"imported workload {name!r}: {e}".splitlines()[0]) from None
    if bound is not None and bound != _commands_sha(wl.commands):
        raise FeedError(f"imported workload {name!r}: its expected fills belong to another "
                        "import of that name (an import was killed or raced another); "
                        "import it again")
    return wl, fills


def expected_fills(name: str) -> np.ndarray:
    """The fills (taker, maker, price, quantity) the venue's executions must give."""
    return _load(name)[1]


def provenance(name: str) -> dict:
    return json.loads(_load(name)[0].provenance)


def validate(name: str, engine: str = "reference", *, commands: np.ndarray | None = None
             ) -> dict:
    """Replay the imported workload (or a prefix ``commands``) on ``engine``; compare its
    fills with the venue's executions fill by fill (:func:`~lob.workloads.feed.compare_fills`,
    plus ``"engine"``). For a prefix, the executions of the takers it submits."""
    from lob.engines import get_engine

    wl, want = _load(name)
    cmds = wl.commands if commands is None else commands
    got = get_engine(engine, wl.config).replay(cmds).fills
    if commands is not None:
        n_sub = int(np.count_nonzero(cmds["kind"] == 0))
        want = want[want["taker"] <= n_sub]
    return {"engine": engine, **compare_fills(got, want)}


def _build_for(name: str):
    def build(*, scale: float, seed: int):
        if scale > 1:
            raise ValueError(f"{name} is a recorded stream: scale must be <= 1 (a prefix)")
        wl, _ = _load(name)
        cmds = wl.commands
        n_pre = int(np.argmax(cmds["timed"])) if cmds["timed"].any() else len(cmds)
        end = n_pre + max(1, round(scale * (len(cmds) - n_pre)))
        return cmds[:end].copy(), wl.config
    return build


def _describe(wl) -> str:
    prov = provenance(wl.name)
    lines = [f"  conversion ({prov['format']} file {prov['file']}, sha256 "
             f"{prov['sha256'][:16]}..., symbol {prov['symbol']}, tick {prov['tick']}; counts "
             "over the whole stream):"]
    lines += describe_counts(prov["counts"], RULES)
    v = validate(wl.name, commands=wl.commands)
    lines.append(f"  validation (reference replay of these {len(wl):,} commands): "
                 f"{v['matched']:,} of {v['trades']:,} executions reproduced fill by fill, "
                 f"{v['extra']:,} extra fills, {v['missing']:,} missing: "
                 f"{'OK' if v['ok'] else 'MISMATCH'}")
    return "\n".join(lines)


def _workloads() -> dict:
    d = imported_dir()
    out = {}
    if not d.is_dir():
        return out
    for p in sorted(d.glob("*.npz")):
        name = p.name[:-4]
        if name.endswith(".fills") or ".tmp" in name or not _paths(name)[1].exists():
            continue
        try:
            with np.load(p, allow_pickle=False) as z:
                meta = json.loads(str(z["meta"][()]))
        except Exception:  # an unreadable file: listed by nobody, refused by _load
            continue
        out[name] = dict(build=_build_for(name), defaults={"seed": 0},
                         description=meta.get("description", ""),
                         provenance=_short_prov(meta.get("provenance", "{}")),
                         describe=_describe)
    return out


def _short_prov(text: str) -> str:
    try:
        p = json.loads(text)
        win = f", window {p['from']}..{p['to']}" if p["from"] or p["to"] else ""
        return (f"{p['format']} file {p['file']} (sha256 {p['sha256']}), symbol "
                f"{p['symbol']}{win}, imported by lob's converter v{p['converter']}")
    except (ValueError, KeyError, TypeError):
        return text


def __getattr__(attr):  # WORKLOADS: read from the cache each time the registry is built
    if attr == "WORKLOADS":
        return _workloads()
    raise AttributeError(attr)

