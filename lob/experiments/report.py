"""``lob report``: ``artifacts/index.md``, the latest complete run of each experiment.

Reads only what runs left behind (``summary.json`` beside each ``COMPLETE`` marker): the
key table as Markdown, the computed conclusion, the plots, and links to the executed
notebook and the run's files; under each experiment, every complete run, latest first.
A run whose summary cannot be read is named (file and reason) and skipped; the rest of
the index is still written. Analysis never re-runs anything.
"""

from __future__ import annotations

import json
import re
import sys
from datetime import UTC, datetime
from pathlib import Path

from lob.experiments.job import MARKER, SUMMARY, default_artifacts, write_atomic

RERUNS = "reruns"  # `lob report --reruns K` (lob.experiments.reruns) writes here
TALLY = "reruns.json"


def latest_runs(artifacts: Path) -> dict[str, Path]:
    """Label -> run dir: for each experiment, every complete run of the preset it last ran.

    A grid expands into several runs of one preset (run ids ``<preset>-<hash>``); all of
    them are listed, labelled ``experiment (run_id)``.
    """
    by_exp: dict[str, list[tuple[float, Path]]] = {}
    for marker in Path(artifacts).glob(f"*/*/{MARKER}"):
        by_exp.setdefault(marker.parent.parent.name, []).append(
            (marker.stat().st_mtime, marker.parent))
    out: dict[str, Path] = {}
    for name in sorted(by_exp):
        runs = sorted(by_exp[name])
        preset = runs[-1][1].name.split("-")[0]
        same = [r for _, r in runs if r.name.split("-")[0] == preset]
        for r in same:
            out[name if len(same) == 1 else f"{name} ({r.name})"] = r
    return out


def all_runs(artifacts: Path) -> dict[str, list[Path]]:
    """Experiment -> its complete run dirs, latest first (by marker time)."""
    by_exp: dict[str, list[tuple[float, Path]]] = {}
    for marker in Path(artifacts).glob(f"*/*/{MARKER}"):
        by_exp.setdefault(marker.parent.parent.name, []).append(
            (marker.stat().st_mtime, marker.parent))
    return {name: [r for _, r in sorted(by_exp[name], key=lambda t: (-t[0], t[1].name))]
            for name in sorted(by_exp)}


def slug(heading: str) -> str:
    """The anchor GitHub (and most Markdown viewers) give a heading: lower case, spaces to
    ``-``, punctuation other than ``-`` and ``_`` dropped."""
    s = heading.strip().lower()
    s = re.sub(r"[^\w\- ]", "", s)
    return s.replace(" ", "-")


def _anchors(headings: list[str]) -> list[str]:
    seen: dict[str, int] = {}
    out = []
    for h in headings:
        base = slug(h)
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.append(base if n == 0 else f"{base}-{n}")
    return out


def _cell(v) -> str:
    if isinstance(v, float):
        return f"{v:,.4g}" if abs(v) < 1e4 else f"{v:,.0f}"
    return str(v).replace("|", "\\|").replace("\n", " ")


def markdown_table(records: list[dict], max_rows: int = 40) -> str:
    """A list of records as a Markdown table (first ``max_rows`` rows)."""
    if not records:
        return "_(empty table)_"
    cols = list(dict.fromkeys(k for r in records for k in r))
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for r in records[:max_rows]:
        lines.append("| " + " | ".join(_cell(r.get(c, "")) for c in cols) + " |")
    if len(records) > max_rows:
        lines.append(f"\n_({len(records) - max_rows} more rows in summary.json)_")
    return "\n".join(lines)


_TAG = re.compile(r"<(?=[A-Za-z/!?])")


def safe(text: str) -> str:
    """``text`` from a run's summary.json made inert in Markdown: every ``<`` that could open
    an HTML tag or comment becomes ``&lt;`` (shown as ``<``; ``n<1000`` stays as it is)."""
    return _TAG.sub("&lt;", text)


def _section(name: str, run: Path, root: Path) -> list[str]:
    """The index section of one run: every line from its summary.json made inert."""
    return [safe(line) for line in _section_lines(name, run, root)]


def _section_lines(name: str, run: Path, root: Path) -> list[str]:
    summary = _read_summary(run)
    meta = summary.get("run", {})
    rel = run.relative_to(root)
    out = [f"## {name}", "",
           f"Run `{rel}` · preset `{meta.get('preset', '?')}` · "
           f"git `{meta.get('git_sha', '?')[:12]}` · {meta.get('wall_s', 0):.0f} s · "
           f"[notebook]({rel}/{meta.get('notebook', name + '.ipynb')}) · "
           f"[summary]({rel}/summary.json)", ""]
    params = meta.get("params") or {}
    if params:
        out += ["Parameters: " + ", ".join(f"`{k}={v}`" for k, v in params.items()), ""]
    cond = summary.get("conditions") or {}
    if isinstance(cond, dict) and cond.get("cpu_model"):
        la = cond.get("load_avg_before"), cond.get("load_avg_after") or cond.get("load_avg")
        out += [f"Ran on {cond.get('cpu_model')}, {cond.get('cpu_count', '?')} CPUs; load "
                + (f"{la[0][0]:.1f} before, " if la[0] else "")
                + (f"{la[1][0]:.1f} after" if la[1] else "?") + ".", ""]
    recs = summary.get("conclusions")
    if recs:  # each conclusion under the table its numbers come from
        from lob.studies.conclude import markdown

        for r in recs:
            out += [f"**{r['table']}** ({r.get('machine', 'this machine')})", "",
                    markdown(r["rows"], r["columns"]), ""]
            if r.get("note"):
                out += [r["note"], ""]
            if r.get("text"):
                out += ["> " + r["text"], ""]
        for png in summary.get("plots") or sorted(p.name for p in run.glob("*.png")):
            out += [f"![{png}]({rel}/{png})", ""]
        return out
    key = summary.get("key_table")
    tables = summary.get("tables") or {}
    if key in tables:
        out += [f"**{key}**", "", markdown_table(tables[key]), ""]
    if summary.get("conclusion"):
        out += ["> " + summary["conclusion"].strip().replace("\n", "\n> "), ""]
    for png in summary.get("plots") or sorted(p.name for p in run.glob("*.png")):
        out += [f"![{png}]({rel}/{png})", ""]
    return out


def _read_summary(run: Path) -> dict:
    path = run / SUMMARY
    try:
        summary = json.loads(path.read_text())
    except FileNotFoundError:
        raise ValueError(f"{path}: missing") from None
    except (OSError, UnicodeDecodeError) as e:
        raise ValueError(f"{path}: unreadable ({e})") from None
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}: not valid JSON ({e})") from None
    if not isinstance(summary, dict):
        raise ValueError(f"{path}: not a JSON object")
    return summary


def _run_line(run: Path, root: Path) -> str:
    rel = run.relative_to(root)
    when = datetime.fromtimestamp((run / MARKER).stat().st_mtime, UTC)
    try:
        meta = _read_summary(run).get("run") or {}
    except ValueError:
        return f"`{rel}` · {when:%Y-%m-%d %H:%M} UTC · summary unreadable"
    params = meta.get("params") or {}
    ps = ", ".join(f"`{k}={v}`" for k, v in params.items())
    return safe(f"[`{rel}`]({rel}/{meta.get('notebook', run.parent.name + '.ipynb')}) · "
                f"{when:%Y-%m-%d %H:%M} UTC · git `{str(meta.get('git_sha', '?'))[:12]}` · "
                f"[summary]({rel}/{SUMMARY})" + (f" · {ps}" if ps else ""))


def write_index(artifacts: Path | str | None = None) -> Path:
    """Write ``index.md`` in ``artifacts`` and return its path.

    One section per run of the preset each experiment last ran (a grid gives several), then
    every complete run of the experiment, latest first. A run whose ``summary.json`` cannot
    be read is reported (on stderr and in the index) and skipped.
    """
    if artifacts is None:
        artifacts = default_artifacts()
    root = Path(artifacts)
    if not root.is_dir():
        raise FileNotFoundError(f"no artifacts directory {root}: run `lob main` first")
    runs = all_runs(root)
    latest = latest_runs(root)
    body: list[str] = []
    heads: list[str] = []
    problems: list[str] = []
    for exp, exp_runs in runs.items():
        for label in (lab for lab, r in latest.items() if r.parent.name == exp):
            try:
                body += _section(label, latest[label], root)
                heads.append(label)
            except (ValueError, KeyError, TypeError, AttributeError) as e:
                msg = str(e) if str(root) in str(e) else f"{latest[label] / SUMMARY}: {e}"
                problems.append(msg)
                print(f"lob report: skipped a run: {msg}", file=sys.stderr)
        body += [f"Every complete run of {exp}, latest first:", ""]
        body += [f"- {_run_line(r, root)}" for r in exp_runs] + [""]
    if problems:
        heads.append("Runs skipped")
        body += ["## Runs skipped", ""] + [f"- {p}" for p in problems] + [""]
    from lob.studies.claims import claims_path, reproduction_markdown, verdicts

    table = (reproduction_markdown(verdicts(root)) if claims_path().exists() else
             "_No claims defined (experiments/claims.yaml)._")
    lines = ["# lob experiments: latest complete runs", "",
             "## Reproduction of the seeds' claims", "",
             "Each claim of `experiments/claims.yaml`, judged from the latest runs: ratios "
             "measured on this machine against the seed's ratios on its machine (named in "
             "brackets); absolute figures of two machines are never compared. A verdict is "
             "computed: `reproduced` (same direction, within the tolerance), `direction "
             "only`, `inconclusive` (lob's noise interval straddles a tolerance edge), `not "
             "reproduced`, `not comparable` (a regime check failed: the diagnostic is named), "
             "`not comparable: different mechanism` (the seed credits a mechanism lob's "
             "measured step lacks), `not comparable: at the clock floor` (a percentile in "
             "the figure is under 10 ticks of its clock), `inconclusive: single point` (no "
             "noise interval: one measurement neither reproduces nor refutes) or `not "
             "measured`. A lob figure measured over repeats is judged on its whole interval "
             "(shown in brackets); one without reads `[no interval available]`.", "",
             table, "",
             "Generated by `lob report` from each run's summary.json. "
             "Timings are from the machine and conditions recorded in that file. "
             "Percentiles in summary.json and in these tables are computed from the recorded "
             "values; a run's `.hgrm` files are HDR histograms kept to 3 significant digits, "
             "so a percentile read from an `.hgrm` can differ from the summary's by up to "
             "0.1% (the histogram's bucket width), never more.", ""]
    reruns = read(root)
    if reruns:
        heads.insert(0, "Reruns of the claims")
        lines += ["## Reruns of the claims", ""] + markdown_section(reruns)
    if not runs:
        lines.append("_No complete runs yet._")
    lines += [f"- [{h}](#{a})" for h, a in zip(heads, _anchors(heads), strict=True)] + [""]
    lines += body
    return write_atomic(root / "index.md", "\n".join(lines) + "\n")  # a tmp file per writer


# --- the tally of `lob report --reruns K` (written by lob.experiments.reruns) ---------

def read(artifacts: Path | str) -> dict | None:
    """The tally of the latest ``--reruns`` in ``artifacts``, or None (none there, or one
    that cannot be read: said in a warning on stderr, and the rest goes on without it)."""
    path = Path(artifacts) / RERUNS / TALLY
    if not path.exists():
        return None
    try:
        record = json.loads(path.read_text())
        if not isinstance(record, dict):
            raise ValueError("not a JSON object")
        missing = [k for k in ("k", "claims", "experiments", "preset", "started", "ended")
                   if k not in record]
        if missing:
            raise ValueError(f"no {', '.join(missing)}")
        if not isinstance(record["claims"], dict) or not all(
                isinstance(c, dict) and {"verdicts", "figures", "tally", "agree"} <= set(c)
                for c in record["claims"].values()):
            raise ValueError("its claims are not a tally")
    except (OSError, UnicodeDecodeError, ValueError) as e:  # JSONDecodeError is a ValueError
        print(f"lob report: ignored the reruns' tally {path}: unreadable ({e})",
              file=sys.stderr)
        return None
    return record


def markdown_section(record: dict) -> list[str]:
    """The index's section on the reruns: a sentence computed from the tally, and one row per
    claim (its verdicts counted, whether they agree, lob's figure in each rerun)."""
    from lob.studies.conclude import markdown

    claims = record["claims"]
    k = record["k"]
    agree = [c for c, r in claims.items() if r["agree"]]
    split = [c for c, r in claims.items() if not r["agree"]]
    unsettled = [c for c in agree if claims[c]["verdicts"][0].startswith("inconclusive")]
    cond = record.get("conditions_before") or {}
    load = cond.get("load_avg")
    where = (f" on {cond.get('cpu_model')}, {cond.get('cpu_count')} CPUs"
             + (f", load {load[0]:.1f} before" if load else "") if cond.get("cpu_model")
             else "")
    exps = ", ".join(record["experiments"])
    lines = [f"`lob report --reruns {k}`: the claims' experiments ({exps}, "
             f"preset `{record['preset']}`) run {k} times from scratch, each notebook in a fresh "
             f"process, git `{str(record.get('git_sha', '?'))[:12]}`, {record['started']} to "
             f"{record['ended']}{where}.", ""]
    codes = record.get("exit_codes") or []
    failed = record.get("failed") or []
    done = k - len(failed)
    if failed:  # a failed rerun is no verdict: named with its exit code, never tallied
        lines += ["> **" + "; ".join(f"rerun {i} failed (exit code {codes[i - 1]})"
                                      if i - 1 < len(codes) else f"rerun {i} failed"
                                      for i in failed)
                  + f"**: not a verdict; the tally below counts the {done} that completed.",
                  ""]
    if done < 2:
        lines += [f"> Only {done} of {k} reruns completed: no verdict can be checked "
                  "against another.", ""]
    else:
        say = (f"{len(agree)} of {len(claims)} claims gave the same verdict in all {done} "
               "reruns" + (f" that completed (of {k})" if failed else "")
               + (f" ({len(unsettled)} of them the same inconclusive one)" if unsettled
                  else ""))
        say += (f"; {len(split)} did not: {', '.join(split)}." if split else ".")
        lines += ["> " + say, ""]
    rows = [{"claim": c, "verdicts": r["tally"], "agree": "yes" if r["agree"] else "NO",
             "lob figure per rerun": " | ".join(_short(f) for f in r["figures"])}
            for c, r in claims.items()]
    if rows:
        lines += [markdown(rows), ""]
    return lines


def _short(figure: str, width: int = 60) -> str:
    """A lob figure cell cut to its number and interval (the reason is in each rerun)."""
    f = str(figure)
    return f if len(f) <= width else f[: width - 1] + "…"
