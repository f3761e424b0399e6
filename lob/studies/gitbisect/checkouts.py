"""The revisions of a search and their checkouts: ``git rev-list``, and a cache of
checkouts that lob manages alone (the repository is only read; a checkout is trusted only
once complete; the cache has a lock).
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

# --- git ------------------------------------------------------------------------------

def _git(repo, *args, check=True) -> str:
    try:
        p = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True,
                           timeout=120)
    except OSError as e:
        raise ValueError(f"git is not available: {e}") from None
    if check and p.returncode != 0:
        raise ValueError(f"git {' '.join(args)} in {repo}: {p.stderr.strip() or p.stdout}")
    return p.stdout.strip()


@dataclass
class Revision:
    """One commit of the searched range and what was measured on it."""

    index: int
    sha: str
    subject: str
    status: str = "untested"  # untested | ok | skipped
    reason: str = ""
    values: list[tuple[int, float]] = field(default_factory=list)  # (round, value)
    hists: list[str] = field(default_factory=list)

    @property
    def median(self) -> float | None:
        return float(np.median([v for _, v in self.values])) if self.values else None


def revisions(repo, good: str, bad: str) -> list[Revision]:
    """good, then ``git rev-list --first-parent good..bad`` oldest first (bad last)."""
    repo = Path(repo)
    if not (repo / ".git").exists() and _git(repo, "rev-parse", "--git-dir", check=False) == "":
        raise ValueError(f"{repo} is not a git repository")
    g = _git(repo, "rev-parse", "--verify", f"{good}^{{commit}}")
    b = _git(repo, "rev-parse", "--verify", f"{bad}^{{commit}}")
    if g == b:
        raise ValueError(f"good and bad are the same commit {g}")
    if subprocess.run(["git", "-C", str(repo), "merge-base", "--is-ancestor", g, b]
                      ).returncode != 0:
        raise ValueError(f"good {good} ({g[:10]}) is not an ancestor of bad {bad} ({b[:10]})")
    out = _git(repo, "log", "--first-parent", "--reverse", "--format=%H%x00%s", f"{g}..{b}")
    revs = [Revision(0, g, _git(repo, "log", "-1", "--format=%s", g))]
    for line in out.splitlines():
        sha, _, subject = line.partition("\x00")
        revs.append(Revision(len(revs), sha, subject))
    if revs[-1].sha != b:
        raise ValueError(f"bad {bad} is not on the first-parent line from good {good}")
    return revs


def cache_root() -> Path:
    """``$LOB_BISECT_CACHE``, else ``bisect/`` in lob's cache (:func:`lob.paths.cache_dir`)."""
    from lob.paths import cache_dir

    return Path(os.environ.get("LOB_BISECT_CACHE") or cache_dir("bisect"))


CHECKOUT_MARK = ".lob-checkout"  # written last into a checkout: it is complete


class Checkouts:
    """Checkouts of one repository's commits under a cache folder, one per commit, kept.

    Managed by lob alone: a checkout is the commit's tree written by ``git checkout-index``
    from a private index file (``GIT_INDEX_FILE``), so the repository is only read: no
    ``git worktree`` entry, no prune, nothing of the user's worktrees, index or refs is
    touched. A checkout is built in a staging folder, gets its :data:`CHECKOUT_MARK`
    (the sha) last and is then renamed into place, so a half-written one (Ctrl-C, a full
    disk) is never found, let alone trusted; building holds the cache's lock
    (``<cache>/.lock``, ``flock``), so two searches sharing the cache take turns and
    reuse each other's checkouts.
    """

    def __init__(self, repo, cache: str | os.PathLike | None = None, *, wait: float = 600.0):
        self.repo = Path(repo).resolve()
        key = hashlib.sha256(str(self.repo).encode()).hexdigest()[:12]
        self.root = Path(cache or cache_root()) / f"{self.repo.name}-{key}"
        self.wait = wait

    def complete(self, sha: str) -> Path | None:
        """The checkout of ``sha`` if one was completed, else None."""
        p = self.root / sha
        try:
            return p if (p / CHECKOUT_MARK).read_text().strip() == sha else None
        except OSError:
            return None

    def path(self, sha: str) -> Path:
        """The checkout of ``sha`` (a full 40-hex commit id), built if missing."""
        got = self.complete(sha)
        if got is not None:
            return got
        self.root.mkdir(parents=True, exist_ok=True)
        with self._locked():
            got = self.complete(sha)  # built by another search meanwhile
            if got is not None:
                return got
            for old in self.root.glob(".staging-*"):  # left by an interrupted build
                _rmtree(old)
            p = self.root / sha
            if p.exists():  # an unmarked folder: never trusted
                _rmtree(p)
            stage = self.root / f".staging-{sha}-{os.getpid()}"
            index = stage.with_name(stage.name + ".index")
            env = {**os.environ, "GIT_INDEX_FILE": str(index)}
            try:
                stage.mkdir()
                for cmd in (["read-tree", sha],
                            ["checkout-index", "--all", "--force", f"--prefix={stage}/"]):
                    r = subprocess.run(["git", "-C", str(self.repo), *cmd], env=env,
                                       capture_output=True, text=True, timeout=600)
                    if r.returncode != 0:
                        raise ValueError(f"git {cmd[0]} {sha[:10]}: {r.stderr.strip()}")
                (stage / CHECKOUT_MARK).write_text(sha + "\n")
                stage.rename(p)
            finally:
                index.unlink(missing_ok=True)
                if stage.exists():
                    _rmtree(stage)
            return p

    def _locked(self):
        import fcntl
        from contextlib import contextmanager

        @contextmanager
        def held():
            fd = os.open(self.root / ".lock", os.O_RDWR | os.O_CREAT, 0o644)
            try:
                deadline = time.monotonic() + self.wait
                while True:
                    try:
                        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                        break
                    except BlockingIOError:
                        if time.monotonic() > deadline:
                            raise ValueError(f"the bisect cache {self.root} is busy (another "
                                             f"search builds a checkout there) for more than "
                                             f"{self.wait:.0f} s") from None
                        time.sleep(0.1)
                yield
            finally:
                os.close(fd)

        return held()


Worktrees = Checkouts  # the name of lob <= 0.1's cache (git worktrees)


def _rmtree(p: Path) -> None:
    import shutil

    shutil.rmtree(p, ignore_errors=True)
