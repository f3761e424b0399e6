"""README's layout section names every module of the package, and names no module that is
gone; its two set-up commands stay at the top."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()


def layout_section() -> str:
    m = re.search(r"^## Layout\n(.*?)^## ", README, re.S | re.M)
    assert m, "README has no Layout section"
    return m.group(1)


def test_layout_names_every_module():
    text = layout_section()
    files = [p for p in (ROOT / "lob").rglob("*") if p.suffix in (".py", ".c", ".h", ".cpp")
             and "__pycache__" not in p.parts and p.name not in ("__init__.py", "__main__.py")]
    missing = sorted(str(p.relative_to(ROOT)) for p in files if p.name not in text)
    assert not missing, f"README's layout does not name: {missing}"


def test_layout_names_no_missing_module():
    names = set(re.findall(r"\b([a-z_0-9]+\.(?:py|c|h|cpp))\b", layout_section()))
    present = {p.name for p in (ROOT / "lob").rglob("*") if p.is_file()}
    present |= {p.name for p in ROOT.glob("*/*.py")} | {p.name for p in ROOT.glob("tests/*/*.py")}
    assert sorted(names - present) == []


def test_the_two_setup_commands_open_the_readme():
    block = README.split("```")[1]
    cmds = [ln.split("#")[0].strip() for ln in block.splitlines()[1:] if ln.strip()]
    assert cmds == ["make run", "make test"]


def test_the_command_table_is_one_short_row_per_command_and_names_them_all():
    from lob.cli import build_parser

    m = re.search(r"^\| command \|.*?\n\|---\|---\|\n(.*?)\n\n", README, re.S | re.M)
    assert m, "README has no command table"
    rows = m.group(1).splitlines()
    assert all(r.startswith("| `lob ") and len(r) <= 160 for r in rows), \
        [r[:60] for r in rows if len(r) > 160]
    named = {re.match(r"\| `lob (\w+)", r).group(1) for r in rows}
    sub = next(a for a in build_parser()._actions if a.dest == "cmd")
    assert named == set(sub.choices)
