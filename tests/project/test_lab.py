"""JupyterLab as ``make lab`` starts it: the server answers on loopback with a token, the
start page and the notebooks are served, and a notebook runs cell by cell through a kernel
the server started (the Jupyter messaging protocol over the server's websocket)."""

from __future__ import annotations

import json
import os
import re
import secrets
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK = "alloc_profile"  # a quick, timing-free notebook
pytest.importorskip("jupyterlab")
websocket = pytest.importorskip("websocket")  # websocket-client, a jupyter_server dependency


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _make_lab_options() -> list[str]:
    """The options of the Makefile's ``lab`` target (checked to stay in step below)."""
    text = (ROOT / "Makefile").read_text()
    recipe = text[text.index("\nlab:"):].split("\n\n")[0]
    assert "--ServerApp.root_dir=\"$(CURDIR)\"" in recipe
    assert "$(if $(filter 0,$(shell id -u)),--allow-root)" in recipe
    assert "--LabApp.default_url=/lab/tree/notebooks/README.md" in recipe
    assert "--LabApp.app_settings_dir=\"$(CURDIR)/notebooks/.lab\"" in recipe
    opts = [f"--ServerApp.root_dir={ROOT}",
            "--LabApp.default_url=/lab/tree/notebooks/README.md",
            f"--LabApp.app_settings_dir={ROOT / 'notebooks' / '.lab'}"]
    return opts + (["--allow-root"] if os.geteuid() == 0 else [])


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("lab")
    port, token = _free_port(), secrets.token_hex(16)
    env = {**os.environ, "JUPYTER_RUNTIME_DIR": str(tmp / "runtime"),
           "LOB_ARTIFACTS": str(tmp / "art"),
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    cmd = [sys.executable, "-m", "jupyterlab", *_make_lab_options(), "--no-browser",
           "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={port}", "--ServerApp.port_retries=0",
           f"--IdentityProvider.token={token}", f"--LabApp.workspaces_dir={tmp / 'ws'}",
           f"--LabApp.user_settings_dir={tmp / 'settings'}"]
    log = open(tmp / "server.log", "wb")
    proc = subprocess.Popen(cmd, cwd=tmp, env=env, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=2).read()
            break
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                pytest.fail("Jupyter server did not start:\n"
                            + (tmp / "server.log").read_text()[-3000:])
            time.sleep(0.3)
    yield base, token, tmp
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
    log.close()


def _get(base: str, token: str, path: str, auth: bool = True):
    req = urllib.request.Request(base + path)
    if auth:
        req.add_header("Authorization", f"token {token}")
    return urllib.request.urlopen(req, timeout=30)


@pytest.mark.ci  # make test-ci: a JupyterLab server
def test_lab_and_start_page_are_served(lab):
    base, token, _ = lab
    assert _get(base, token, "/lab").status == 200
    # "/" goes to the start page, which exists
    r = _get(base, token, "/")
    assert r.url.endswith("/lab/tree/notebooks/README.md"), r.url
    readme = json.load(_get(base, token, "/api/contents/notebooks/README.md"))
    assert readme["type"] == "file" and "lob notebooks: start here" in readme["content"]
    # the start page opens rendered, with full file names and no news prompt
    over = json.loads((ROOT / "notebooks" / ".lab" / "overrides.json").read_text())
    assert over["@jupyterlab/docmanager-extension:plugin"]["defaultViewers"]["markdown"] \
        == "Markdown Preview"
    # and the token is required
    with pytest.raises(urllib.error.HTTPError) as e:
        _get(base, token, "/api/contents/notebooks", auth=False)
    assert e.value.code == 403


@pytest.mark.ci  # make test-ci: a JupyterLab server
def test_contents_api_lists_every_notebook(lab):
    base, token, _ = lab
    listing = json.load(_get(base, token, "/api/contents/notebooks"))
    served = {c["name"] for c in listing["content"]}
    on_disk = {p.name for p in (ROOT / "notebooks").glob("*.ipynb")}
    assert on_disk and on_disk <= served and "README.md" in served
    nb = json.load(_get(base, token, f"/api/contents/notebooks/{NOTEBOOK}.ipynb"))
    assert nb["type"] == "notebook" and nb["content"]["cells"]
    # the start page links every notebook, and only notebooks that exist
    readme = (ROOT / "notebooks" / "README.md").read_text()
    linked = set(re.findall(r"\]\(([\w-]+\.ipynb)\)", readme))
    assert linked == on_disk, ("notebooks/README.md's table and notebooks/*.ipynb differ: "
                               f"{sorted(linked ^ on_disk)}")


def _execute(ws, session: str, code: str, timeout: float = 120) -> list[dict]:
    """Send one execute_request on the shell channel; return the iopub messages until idle."""
    msg_id = uuid.uuid4().hex
    ws.send(json.dumps({
        "header": {"msg_id": msg_id, "msg_type": "execute_request", "session": session,
                   "username": "test", "version": "5.3", "date": ""},
        "parent_header": {}, "metadata": {}, "channel": "shell", "buffers": [],
        "content": {"code": code, "silent": False, "store_history": True,
                    "user_expressions": {}, "allow_stdin": False, "stop_on_error": True}}))
    out, replied, idle = [], None, False
    deadline = time.monotonic() + timeout
    while not (replied and idle):
        ws.settimeout(max(1.0, deadline - time.monotonic()))
        msg = json.loads(ws.recv())
        if msg.get("parent_header", {}).get("msg_id") != msg_id:
            continue
        if msg["channel"] == "shell" and msg["msg_type"] == "execute_reply":
            replied = msg["content"]
        elif msg["channel"] == "iopub":
            if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
                idle = True
            elif msg["msg_type"] in ("stream", "error", "execute_result", "display_data"):
                out.append(msg)
    if replied["status"] != "ok":
        raise AssertionError(f"{replied.get('ename')}: {replied.get('evalue')}\n"
                             + "\n".join(replied.get("traceback", []))[-2000:])
    return out


@pytest.mark.ci  # make test-ci: a JupyterLab server and kernel
def test_a_notebook_runs_through_the_servers_kernel(lab):
    base, token, tmp = lab
    req = urllib.request.Request(
        f"{base}/api/sessions", method="POST",
        data=json.dumps({"path": f"notebooks/{NOTEBOOK}.ipynb", "type": "notebook",
                         "name": f"{NOTEBOOK}.ipynb", "kernel": {"name": "python3"}}).encode(),
        headers={"Authorization": f"token {token}", "Content-Type": "application/json"})
    sess = json.load(urllib.request.urlopen(req, timeout=60))
    kid = sess["kernel"]["id"]
    ws = websocket.create_connection(
        f"ws{base[4:]}/api/kernels/{kid}/channels?session_id={uuid.uuid4().hex}",
        header=[f"Authorization: token {token}"], timeout=60)
    try:
        session = uuid.uuid4().hex
        nb = nbformat.read(ROOT / "notebooks" / f"{NOTEBOOK}.ipynb", as_version=4)
        code = [c.source for c in nb.cells if c.cell_type == "code"]
        ran = 0
        for i, src in enumerate(code):
            _execute(ws, session, src)
            ran += 1
            if i == 0:  # after the parameters cell, as papermill would: fewer engines
                _execute(ws, session, 'engines = ["v0", "v3"]')
        assert ran == len(code)
        # it ran interactively: a fresh interactive-<time> folder, never a recorded run
        (run,) = (tmp / "art" / NOTEBOOK).iterdir()
        assert run.name.startswith("interactive-")
        summary = json.loads((run / "summary.json").read_text())
        assert summary["tables"] and summary["conclusion"]
        assert not (run / "COMPLETE").exists()
    finally:
        ws.close()
        urllib.request.urlopen(urllib.request.Request(
            f"{base}/api/sessions/{sess['id']}", method="DELETE",
            headers={"Authorization": f"token {token}"}), timeout=30)


@pytest.mark.parametrize("path", sorted((ROOT / "notebooks").glob("*.ipynb")),
                         ids=lambda p: p.stem)
def test_notebook_is_not_modified_by_opening(path):
    """JupyterLab rewrites a kernelspec whose display_name differs from the installed one,
    which marks the notebook modified as soon as it opens (seen in Chromium: a "Python 3"
    notebook shows the unsaved dot, a "Python 3 (ipykernel)" one does not)."""
    from jupyter_client.kernelspec import get_kernel_spec

    spec = get_kernel_spec("python3")
    ks = nbformat.read(path, as_version=4).metadata.get("kernelspec", {})
    assert ks == {"name": "python3", "display_name": spec.display_name,
                  "language": spec.language}, f"{path.name}: kernelspec {ks}"
