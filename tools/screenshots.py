"""Screenshots of JupyterLab with headless Chromium, to check the workbench by eye (not CI).

    python tools/screenshots.py                      # start page + latest executed notebook
    python tools/screenshots.py --notebook artifacts/tail_analysis/quick-xxxx/tail_analysis.ipynb
    python tools/screenshots.py --url http://127.0.0.1:8888 --token TOKEN   # a running Lab

Starts its own Jupyter server on loopback (a free port, a random token, the repository as
root, the same options as ``make lab``) unless ``--url`` is given, then writes
``lab_start.png`` and ``lab_notebook.png`` into ``--out`` (default: a new temp dir) and
prints their paths. Needs Chromium (Debian/Ubuntu: ``apt-get install chromium``).
"""

from __future__ import annotations

import argparse
import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--hide-scrollbars"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def lab_command(port: int, token: str) -> list[str]:
    """The ``make lab`` server, on loopback, without a browser."""
    jupyter = Path(sys.executable).with_name("jupyter")
    cmd = [str(jupyter), "lab", f"--ServerApp.root_dir={ROOT}",
           "--LabApp.default_url=/lab/tree/notebooks/README.md",
           f"--LabApp.app_settings_dir={ROOT / 'notebooks' / '.lab'}",
           "--no-browser", "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={port}",
           f"--IdentityProvider.token={token}", "--ServerApp.port_retries=0"]
    if os.geteuid() == 0:
        cmd.append("--allow-root")
    return cmd


def wait_up(url: str, token: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(f"{url}/api/status?token={token}", timeout=2):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.3)


def chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome", "chrome"):
        path = shutil.which(name)
        if path:
            return path
    raise SystemExit("no Chromium found: apt-get install chromium")


def shoot(url: str, png: Path, size: str, wait_ms: int) -> Path:
    with tempfile.TemporaryDirectory(prefix="lob-chromium-") as profile:
        subprocess.run([chromium(), *FLAGS, f"--user-data-dir={profile}",
                        f"--window-size={size}", f"--virtual-time-budget={wait_ms}",
                        f"--screenshot={png}", url],
                       check=True, capture_output=True, timeout=180)
    return png


def latest_executed() -> Path | None:
    markers = sorted((ROOT / "artifacts").glob("*/*/COMPLETE"), key=lambda p: p.stat().st_mtime)
    for m in reversed(markers):
        nbs = [p for p in m.parent.glob("*.ipynb")]
        if nbs:
            return nbs[0]
    return None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--url", help="a running Jupyter server (default: start one)")
    ap.add_argument("--token", default="", help="its token")
    ap.add_argument("--notebook", help="notebook to show, relative to the repository "
                                       "(default: the latest executed run under artifacts/)")
    ap.add_argument("--out", help="folder for the PNGs (default: a new temp dir)")
    ap.add_argument("--size", default="1400,1800", help="window size W,H (default 1400,1800)")
    ap.add_argument("--wait-ms", type=int, default=20000,
                    help="virtual time Chromium gives the page to render (default 20000)")
    args = ap.parse_args(argv)
    out = Path(args.out or tempfile.mkdtemp(prefix="lob-screens-"))
    out.mkdir(parents=True, exist_ok=True)
    server = None
    url, token = args.url, args.token
    if not url:
        port, token = free_port(), secrets.token_hex(16)
        url = f"http://127.0.0.1:{port}"
        server = subprocess.Popen(lab_command(port, token), cwd=ROOT,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_up(url, token)
        q = f"?reset&token={token}"
        shots = [shoot(f"{url}/lab/tree/notebooks/README.md{q}", out / "lab_start.png",
                       args.size, args.wait_ms)]
        nb = Path(args.notebook) if args.notebook else latest_executed()
        if nb is None:
            print("no executed notebook under artifacts/ (run `lob experiments run NAME`)",
                  file=sys.stderr)
        else:
            rel = nb.resolve().relative_to(ROOT).as_posix()
            shots.append(shoot(f"{url}/lab/tree/{rel}{q}", out / "lab_notebook.png",
                               args.size, args.wait_ms))
        for s in shots:
            print(s)
    finally:
        if server is not None:
            server.terminate()
            server.wait(timeout=30)
    return 0


if __name__ == "__main__":
    sys.exit(main())
