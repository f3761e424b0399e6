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
import json
import os
import re
import time
from pathlib import Path

import numpy as np

from lob.workloads.feed import RULES, Conversion, FeedError, compare_fills, convert, describe_counts

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


def _dense(ev: np.ndarray) -> int:
    """Venue ids -> dense 0..n-1 in place (-1 stays); returns n."""
    n = len(ev)
    has2 = bool((ev["oid2"] >= 0).any())
    ids = np.concatenate([ev["oid"], ev["oid2"]]) if has2 else ev["oid"]
    used = ids >= 0
    top = int(ids.max()) if len(ids) else -1
    if top < 4 * len(ids) + 1_000_000:  # ids of a bounded range: a direct map, no sort
        seen = np.zeros(top + 2, bool)
        seen[ids[used]] = True
        rank = np.cumsum(seen) - 1
        out = np.where(used, rank[np.where(used, ids, 0)], -1)
        k = int(seen.sum())
    else:
        uniq, inv = np.unique(ids[used], return_inverse=True)
        out = np.full(len(ids), -1, np.int64)
        out[used] = inv
        k = len(uniq)
    ev["oid"] = out[:n]
    if has2:
        ev["oid2"] = out[n:]
    return k


def convert_parsed(parsed) -> Conversion:
    """The :class:`~lob.workloads.feed.Conversion` of a reader's output."""
    ev = parsed.events  # the reader's own array: made dense in place
    n_ids = _dense(ev)
    if parsed.book is None:
        return convert(ev, n_ids=n_ids, preload=parsed.preload)
    book = np.zeros((len(ev), parsed.book.shape[1]), np.int64)
    book[parsed.book_rows] = parsed.book
    rows = np.zeros(len(ev), bool)
    rows[parsed.book_rows] = True
    return convert(ev, n_ids=n_ids, preload=parsed.preload, book=book,
                   book_depth=parsed.book_depth, check_rows=rows)


def import_file(fmt: str, path, *, name: str, symbol: str | None = None,
                book: str | None = None, t_from: str | None = None, t_to: str | None = None,
                progress=None, force: bool = True):
    """Read ``path`` (format ``fmt``: lobster, itch or dbn), convert it, store it as the
    workload ``name``; returns the :class:`~lob.workloads.Workload`. ``book``: LOBSTER's
    orderbook file; ``t_from`` / ``t_to``: the window (time of day), events before it
    build the book untimed."""
    from lob.workloads import _SPECS, Workload, spec, workload_names
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
    t_read = time.perf_counter() - t0
    if not len(parsed.events):
        raise FeedError(f"{src.name}: no events of {parsed.symbol!r} in the window")
    conv = convert_parsed(parsed)
    t_conv = time.perf_counter() - t0 - t_read
    sha = _sha256(src)
    bsha = _sha256(Path(book)) if book else None
    params = {"seed": 0, "scale": 1.0}
    c = conv.counts
    desc = (f"Imported {fmt} file {src.name}, symbol {parsed.symbol}: {c['events']:,} events "
            f"-> {c['commands']:,} commands, {c['trades_reproduced']:,} executions reproduced "
            f"fill by fill; tick {conv.tick} venue price units, band "
            f"{conv.config.min_price:,}..{conv.config.max_price:,}. Rules and counts: "
            "`lob workloads describe` (lob.workloads.feed).")
    prov = {"format": fmt, "file": src.name, "sha256": sha, "symbol": parsed.symbol,
            "book_file": Path(book).name if book else None, "book_sha256": bsha,
            "from": t_from, "to": t_to, "converter": CONVERTER_VERSION,
            "messages_in_file": parsed.messages, "tick": conv.tick, "counts": c,
            "first_book_mismatch_event": conv.first_mismatch, "notes": parsed.notes,
            "read_s": round(t_read, 3), "convert_s": round(t_conv, 3)}
    wl = Workload(name, "imported", conv.commands, conv.config, 0, params, desc,
                  json.dumps(prov, sort_keys=True))
    d = imported_dir()
    d.mkdir(parents=True, exist_ok=True)
    wpath, fpath = _paths(name)
    tag = f".tmp{os.getpid()}"
    tw, tf = d / f"{name}{tag}.npz", d / f"{name}{tag}.fills.npz"
    try:
        with open(tf, "wb") as f:  # bound to its workload: the hash of the commands
            np.savez(f, fills=conv.expected_fills, venue_id=conv.venue_id,
                     commands_sha256=np.array(_commands_sha(conv.commands)))
        wl.save(tw)
        with _pair_lock(d):  # two imports of one name never interleave their renames
            os.replace(tf, fpath)
            os.replace(tw, wpath)
    finally:
        for t in (tw, tf):
            t.unlink(missing_ok=True)
    _SPECS.clear()
    return wl


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

