"""One self-contained HTML page of a run's sampled trajectories, turn by turn, with the credit each turn got.

    python scripts/view_credit.py outputs/runs/<run>                 # writes <run>/credit_view.html
    python scripts/view_credit.py outputs/runs/<run> --out view.html --last 3
    python scripts/view_credit.py outputs/fidelity/<run>/view/trace   # a fidelity run's samples, with A*

Reads the run's credit_samples.jsonl (written at every validation: the step's trajectories whose credit
differs most within their group, with the group's rewards). Each turn shows its action, the start of
its observation, and what the method recorded: TRACE's δ and turn reward r, ProVer's verified segment
(highlighted, with Δ), SPO-chain's segment advantages, GiGPO's step advantage and anchor-group size,
and for every method the mean token advantage of the turn. Samples written by scripts/credit_fidelity.py
(`<fidelity run>/view/<method>/`) carry each turn's Monte Carlo advantage too, shown as an A* column beside
the credit: a turn credited that did not help, or the reverse, stands out. Cells are coloured green
(positive) to red (negative), scaled per column over the page. No script, no external file: open it anywhere.
"""

from __future__ import annotations

import argparse
import html
import os
import sys
from pathlib import Path

import yaml

from agentcredit.records import atomic_write_bytes, check_output_path

CSS = """
body { font: 13px/1.4 system-ui, sans-serif; margin: 16px; color: #222; }
h1 { font-size: 18px; overflow-wrap: anywhere; } h2 { font-size: 15px; margin: 22px 0 4px; }
.card { border: 1px solid #ccc; border-radius: 6px; padding: 8px 10px; margin: 10px 0; }
.q { margin: 2px 0 6px; } .muted { color: #666; }
.chip { display: inline-block; padding: 1px 6px; margin: 1px; border-radius: 8px; background: #eee; font-size: 12px; }
.chip.ok { background: #b9e4c0; } .chip.me { outline: 2px solid #333; }
table { border-collapse: collapse; width: 100%; margin-top: 6px; }
th, td { border: 1px solid #ddd; padding: 3px 5px; vertical-align: top; text-align: left; }
th { background: #f4f4f4; font-weight: 600; }
td.num { text-align: right; white-space: nowrap; font-variant-numeric: tabular-nums; }
td.code { font-family: ui-monospace, monospace; font-size: 12px; white-space: pre-wrap; word-break: break-word; max-width: 420px; }
tr.seg td { border-top: 2px solid #c79a00; border-bottom: 2px solid #c79a00; }
tr.seg td:first-child { background: #ffe9a8; }
.legend span { display: inline-block; width: 60px; text-align: center; margin-right: 4px; }
"""

# column key -> header; per-turn values come from the record's lists of that name
TURN_COLUMNS = (("deltas", "TRACE δ"), ("turn_rewards", "TRACE r"), ("step_advantages", "GiGPO A^S"),
                ("turn_advantages", "token adv"), ("a_star", "A* (Monte Carlo)"))
# A column's value on the answer row, where the record keeps it apart from the per-tool-turn list.
ANSWER_KEYS = {"turn_advantages": "answer_advantage", "a_star": "answer_a_star"}


def colour(value: float | None, scale: float) -> str:
    if value is None or scale <= 0:
        return ""
    x = max(-1.0, min(1.0, value / scale))
    if x >= 0:
        r, g, b = int(255 - 120 * x), 255, int(255 - 120 * x)
    else:
        r, g, b = 255, int(255 + 130 * x), int(255 + 130 * x)
    return f' style="background: rgb({r},{g},{b})"'


def short(text: str | None, limit: int) -> str:
    text = (text or "").strip()
    return text if len(text) <= limit else text[: limit - 1] + "…"


def load_records(run: Path) -> tuple[list[dict], list[str]]:
    """The run's showable records, and one note per line left out (line number and why). Each line is
    read against `CreditSample` (records.fidelity): samples may come from someone else's run or a run
    killed mid-line, and a line that breaks the schema is left out and named on the page."""
    from agentcredit.records import RecordError, read_jsonl_records
    from agentcredit.records.fidelity import CreditSample

    path = run / "credit_samples.jsonl"
    if not path.exists():
        raise SystemExit(f"{path} does not exist: the run wrote no credit samples yet (they are written at each validation)")
    if not path.is_file():
        raise SystemExit(f"view_credit: cannot read {path}: not a file")
    skipped: list[str] = []
    prefix = f"{path}:"

    def note(message: str) -> None:  # "<path>:<line>: why" -> "line <line>: why" (the page names the file)
        skipped.append("line " + message[len(prefix):] if message.startswith(prefix) else message)

    try:
        records = [sample.shown() for _, sample in read_jsonl_records(path, CreditSample, warn=note)]
    except RecordError as error:
        raise SystemExit(f"view_credit: {error}") from None
    return records, skipped


def turn_value(record: dict, key: str, k: int) -> float | None:
    values = record.get(key)
    if not isinstance(values, list) or k >= len(values) or values[k] is None:
        return None
    return float(values[k])


def segment_of(record: dict, k: int) -> tuple[int, float] | None:
    """(segment index, its advantage) of action k for SPO-chain records."""
    cuts, advs = record.get("chain_boundaries"), record.get("segment_advantages")
    if cuts is None or advs is None:
        return None
    j = sum(k >= c for c in cuts)
    return j, float(advs[j])


def scales(records: list[dict]) -> dict[str, float]:
    """Largest |value| of each coloured column over the page (the answer's advantage counts as token adv)."""
    out = {}
    for key, _ in TURN_COLUMNS + (("segment_advantages", ""),):
        values = [abs(float(v)) for r in records for v in (r.get(key) or []) if v is not None]
        if key in ANSWER_KEYS:
            values += [abs(float(r[ANSWER_KEYS[key]])) for r in records if r.get(ANSWER_KEYS[key]) is not None]
        out[key] = max(values, default=0.0)
    return out


def render_record(record: dict, scale: dict[str, float], columns: list[tuple[str, str]]) -> str:
    rewards = record.get("group_rewards") or []
    me = record.get("rollout")
    chips = "".join(f'<span class="chip{" ok" if r >= 1.0 else ""}{" me" if i == me else ""}">#{i}: {r:.2f}</span>'
                    for i, r in enumerate(rewards))
    esc = lambda v: html.escape(str(v))  # noqa: E731  (every field: samples may come from someone else's run)
    segment = record.get("segment")
    spo = record.get("segment_advantages") is not None
    head = [f'<div class="card"><div><b>step {esc(record.get("step"))}</b> · question {esc(record.get("question_id"))}'
            f' · rollout #{esc(me)} · reward <b>{record.get("reward", 0):.2f}</b> · {esc(record.get("finish_reason"))}</div>']
    if record.get("question"):
        head.append(f'<div class="q">{esc(record["question"])} <span class="muted">gold: '
                    f'{esc(record.get("gold_answer"))}</span></div>')
    head.append(f'<div>group outcomes: {chips}</div>')
    if segment:
        head.append(f'<div>ProVer verified segment: turns {segment[0]}–{segment[1]}, Δ = {segment[2]:+.3f} '
                    f'({"accepted: +λΔ on its tokens" if segment[2] > 0 else "not accepted"})</div>')
    if spo:
        values = ", ".join(f"{v:.2f}" for v in record.get("chain_values") or [])
        head.append(f'<div>SPO-chain: boundaries {esc(record["chain_boundaries"])}, V = [{values}], segment advantages '
                    f'{", ".join(f"{a:+.3f}" for a in record["segment_advantages"])}</div>')
    cols = "".join(f"<th>{html.escape(h)}</th>" for _, h in columns)
    extra_head = "<th>SPO seg (A_j)</th>" if spo else ""
    extra_head += "<th>anchor size</th>" if record.get("anchor_sizes") is not None else ""
    rows = [f"<table><tr><th>turn</th><th>action</th><th>observation</th>{cols}{extra_head}</tr>"]
    turns = record.get("turns") or []
    observations = record.get("observations") or []
    tool_turns = int(record.get("num_tool_turns", len(observations)))
    for k, text in enumerate(turns):
        final = k >= tool_turns
        in_seg = bool(segment) and segment[0] <= k <= segment[1]
        cells = []
        for key, _ in columns:
            if final:
                value = record.get(ANSWER_KEYS[key]) if key in ANSWER_KEYS else (
                    turn_value(record, key, k) if key == "step_advantages" else None)
            else:
                value = turn_value(record, key, k)
            cells.append(f'<td class="num"{colour(value, scale.get(key, 0))}>{"" if value is None else f"{value:+.3f}"}</td>')
        if spo:
            seg = segment_of(record, k)
            cells.append(f'<td class="num"{colour(seg[1], scale["segment_advantages"])}>{seg[0] + 1}: {seg[1]:+.3f}</td>'
                         if seg else "<td></td>")
        if record.get("anchor_sizes") is not None:
            size = turn_value(record, "anchor_sizes", k)
            cells.append(f'<td class="num">{"" if size is None else int(size)}</td>')
        label = (("answer" if record.get("finish_reason") == "answer" else "final (cut)") if final else str(k))
        obs = "" if final else short(observations[k] if k < len(observations) else "", 220)
        rows.append(f'<tr{" class=seg" if in_seg else ""}><td>{label}{" ★" if in_seg else ""}</td>'
                    f'<td class="code">{html.escape(short(text, 300))}</td><td class="code">{html.escape(obs)}</td>'
                    f'{"".join(cells)}</tr>')
    rows.append("</table></div>")
    return "\n".join(head + rows)


def render_notes(notes: list[str]) -> str:
    items = "".join(f"<li>{html.escape(n)}</li>" for n in notes[:20])
    more = f"<li>… and {len(notes) - 20} more</li>" if len(notes) > 20 else ""
    return f'<div class="card"><b>Left out of this page:</b><ul>{items}{more}</ul></div>'


def render_page(records: list[dict], title: str, notes: list[str] = ()) -> str:
    scale = scales(records)
    present = [(k, h) for k, h in TURN_COLUMNS if any(r.get(k) is not None for r in records)]
    legend = "".join(f"<span{colour(v, 1.0)}>{v:+.1f}</span>" for v in (-1, -0.5, 0, 0.5, 1))
    body = [f"<h1>{html.escape(title)}</h1>",
            f'<div class="legend">colour, relative to the largest |value| of each column on this page: {legend}</div>',
            '<div class="muted">token adv: mean advantage over the turn\'s policy tokens; A*: the turn\'s Monte Carlo '
            "advantage V̂(S_k+1) − V̂(S_k) (R − V̂(S_T) for the answer), when the samples come from "
            "scripts/credit_fidelity.py; ★ rows: ProVer's verified "
            "segment; chips: rewards of the rollout's group (green: correct; outlined: this rollout).</div>"]
    if notes:
        body.append(render_notes(list(notes)))
    if not records:
        body.append('<div class="card">No trajectories to show: credit_samples.jsonl holds no readable record '
                    "(samples are written at each validation).</div>")
    for step in sorted({r.get("step") for r in records}):
        body.append(f"<h2>step {html.escape(str(step))}</h2>")
        body += [render_record(r, scale, present) for r in records if r.get("step") == step]
    return (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
            f"<style>{CSS}</style></head><body>{''.join(body)}</body></html>\n")


def _scalar(value) -> str:
    """A title part from the config: a plain value, shortened; anything else (a list, a mapping) is '?'."""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        return "?"
    return short(str(value), 60)


def run_title(run: Path) -> tuple[str, str | None]:
    """The page title from the run's resolved_config.yaml, and a note when that file cannot be read."""
    plain = f"credit samples of {run.name}"
    config_path = run / "resolved_config.yaml"
    if not config_path.exists():
        return plain, None
    try:
        config = yaml.safe_load(config_path.read_bytes().decode("utf-8-sig"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError, ValueError, RecursionError) as error:
        # ValueError: an integer of thousands of digits; RecursionError: nesting deeper than the parser goes
        return plain, f"resolved_config.yaml unreadable ({type(error).__name__}); the title leaves out the method"
    credit = config.get("credit") if isinstance(config, dict) else None
    if not isinstance(credit, dict):
        return plain, "resolved_config.yaml has no credit section; the title leaves out the method"
    judge = config.get("judge")
    judge = f", judge {_scalar(judge.get('kind'))}" if credit.get("name") == "prover" and isinstance(judge, dict) else ""
    return f"credit={_scalar(credit.get('name', '?'))}{judge} · seed {_scalar(config.get('seed'))} · {run.name}", None


INPUTS = ("credit_samples.jsonl", "resolved_config.yaml")  # what the page is made from: never its output


def _same_file(a: Path, b: Path) -> bool:
    """Whether two paths name one file (through links, `..` or another spelling of the path)."""
    try:
        return os.path.samefile(a, b)
    except OSError:  # one of them does not exist (yet): compare where they would be
        return a.resolve() == b.resolve()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run", type=Path, help="a run folder holding credit_samples.jsonl")
    parser.add_argument("--out", type=Path, default=None, help="HTML file (default: <run>/credit_view.html)")
    parser.add_argument("--last", type=int, default=None, help="only the last N recorded steps")
    args = parser.parse_args(argv)
    if args.last is not None and args.last < 1:
        parser.error(f"--last must be at least 1, got {args.last}")
    run = args.run.parent if args.run.is_file() else args.run  # credit_samples.jsonl itself also works
    if not run.exists():
        raise SystemExit(f"view_credit: the run folder {run} does not exist")
    out = args.out or run / "credit_view.html"
    try:
        check_output_path(out)  # before anything is read: a folder named as the page is one line
    except ValueError as error:
        raise SystemExit(f"view_credit: {error}") from None
    for name in INPUTS:
        if _same_file(out, run / name):
            raise SystemExit(f"view_credit: --out {out} is the run's own {name}, which the page is made from; "
                             "give another file")
    records, notes = load_records(run)
    if args.last:
        keep = sorted({r["step"] for r in records})[-args.last :]
        records = [r for r in records if r["step"] in keep]
    title, title_note = run_title(run)
    notes = notes + ([title_note] if title_note else [])
    try:
        # replaced whole (a kill leaves the earlier page); a name the file system gave undecodable keeps a '?'
        atomic_write_bytes(out, render_page(records, title, notes).encode("utf-8", "replace"))
    except OSError as error:
        raise SystemExit(f"view_credit: cannot write {out}: {error.strerror or error}") from None
    if notes:
        print(f"[view_credit] left out: {notes[0]}" + (f" (+{len(notes) - 1} more, listed on the page)" if len(notes) > 1 else ""),
              file=sys.stderr)
    print(f"[view_credit] {len(records)} trajectories -> {out}")
    return 0

