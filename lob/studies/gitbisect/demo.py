"""A synthetic repository for the notebook's quick preset and the tests: a package that
registers engine ``demo`` through the ``lob.engines`` entry point, one commit of which adds
a fixed cost per command.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

# --- the demo repository (the notebook's quick preset, the tests) ----------------------

_DEMO_ENGINE = '''"""lobdemo: lob's reference engine plus a fixed cost per command (bisect demo)."""

import time

SPIN_NS = {spin}  # the deliberate cost per command, in ns


def _spin(ns):
    end = time.perf_counter_ns() + ns
    while time.perf_counter_ns() < end:
        pass


class DemoEngine:
    def __init__(self, config):
        import lob

        self._inner = lob.get_engine("reference", config)
        self.name, self.config = "demo", config

    def __getattr__(self, attr):
        return getattr(self._inner, attr)

    def execute(self, row):
        _spin(SPIN_NS)
        return self._inner.execute(row)

    def replay(self, commands):
        _spin(SPIN_NS * len(commands))
        return self._inner.replay(commands)


def factory(config):
    return DemoEngine(config)


try:
    from lob.engines.registry import EngineSpec
except ImportError:  # a lob without the registry module: a spec-shaped stand-in
    from collections import namedtuple

    EngineSpec = namedtuple("EngineSpec", "name factory description")

ENGINES = [EngineSpec("demo", factory, "reference + a fixed cost per command")]
'''


def demo_repo(path, *, n_commits: int = 12, slow_at: int | None = 7,
              broken_at: int | None = 5, spin_ns: int = 20_000) -> list[str]:
    """A git repository at ``path`` holding a package ``lobdemo`` that registers engine
    ``demo`` through the ``lob.engines`` entry point (a committed ``.dist-info`` makes
    ``importlib.metadata`` find it from ``PYTHONPATH``, no install). ``n_commits`` commits;
    commit ``slow_at`` adds ``spin_ns`` per command; commit ``broken_at`` does not import and
    the next one repairs it; the others change a notes file. Returns the shas, oldest first."""
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "GIT_AUTHOR_NAME": "lob", "GIT_AUTHOR_EMAIL": "lob@example.invalid",
           "GIT_COMMITTER_NAME": "lob", "GIT_COMMITTER_EMAIL": "lob@example.invalid",
           "GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z", "GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z"}

    def git(*a):
        subprocess.run(["git", "-C", str(path), *a], check=True, capture_output=True, env=env)

    git("init", "-q", "-b", "main")
    dist = path / "lobdemo-0.1.dist-info"
    dist.mkdir(exist_ok=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: lobdemo\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[lob.engines]\ndemo = lobdemo:ENGINES\n")
    pkg = path / "lobdemo"
    pkg.mkdir(exist_ok=True)
    spin = 0
    shas = []
    for i in range(n_commits):
        if i == 0:
            msg = "demo engine: reference behind lob.engines entry point"
        elif i == slow_at:
            spin, msg = spin_ns, f"demo engine: {spin_ns} ns of extra work per command"
        elif i == broken_at:
            msg = "demo engine: a syntax error (does not import)"
        elif broken_at is not None and i == broken_at + 1:
            msg = "demo engine: repair the syntax error"
        else:
            msg = f"notes: entry {i}"
        src = _DEMO_ENGINE.format(spin=spin)
        if i == broken_at:
            src += "\ndef broken(:\n"
        (pkg / "__init__.py").write_text(src)
        with open(path / "NOTES.md", "a") as f:
            f.write(f"- {msg}\n")
        git("add", "-A")
        git("commit", "-q", "-m", msg)
        shas.append(subprocess.run(["git", "-C", str(path), "rev-parse", "HEAD"], check=True,
                                   capture_output=True, text=True).stdout.strip())
    return shas
