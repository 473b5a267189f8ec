#!/usr/bin/python3
"""Writes the comparison pages: for each paper, every table and figure with the paper's printed values
beside filkit's committed results (issue 52, "Generated comparison pages").

Inputs, both in this folder:
  paper_values.json  the papers' printed values, each with the quote it was read from;
  comparison.json    per paper and artefact: which committed results (experiments/results/) stand
                     for each printed value, the status of each row and the explanations (notes);
                     for a redrawn figure, its PNG beside the page (at most 100 kB) and the commands
                     that rerun and redraw it.
Outputs: the page of each paper named in comparison.json (experiments/<paper>/COMPARISON.md).
No number on a page is typed by hand: filkit's are computed here from the committed files, the
papers' are paper_values.json's.

Standard library and numpy; run with /usr/bin/python3 from anywhere:
  experiments/compare.py                     rewrite the pages
  experiments/compare.py --check             regenerate into a temporary folder; fail (exit 1) on any
                                             difference from the committed pages or on a broken rule
                                             (the ctest experiments_comparison)
  experiments/compare.py --check-quotes DIR  check every quote against the papers' texts in DIR
"""

import argparse
import csv
import glob
import json
import math
import os
import re
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from reproduction import write_atomically  # noqa: E402  (the one definition of an atomic write)
REPO = os.path.dirname(HERE)
STATUSES = ("reproduced", "differs, explained", "differs, unexplained", "not reproduced")
MAX_REPRODUCED_GAP = 2.0  # a row may say "reproduced" only within 2 sd, the paper's and filkit's
MAX_FIGURE_BYTES = 100 * 1024  # a redrawn figure committed beside its page


class ComparisonError(Exception):
    pass


def load_json(path):
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        raise ComparisonError(f"{os.path.relpath(path, REPO)}: cannot be read: {e}")


# ---- filkit's committed results ------------------------------------------------------------------

def source_runs(source):
    """The values a source names, one per run (or per target of a learned attack), and the files."""
    if "json" in source:
        files = sorted(f for pattern in source["json"] for f in glob.glob(os.path.join(REPO, pattern)))
        if not files:
            raise ComparisonError(f"comparison.json: no committed file matches {source['json']}")
        values = []
        for path in files:
            summary = load_json(path)
            if "path" in source:  # any summary: the value at a path of keys and list indices
                values += json_path_values(summary, source["path"], os.path.relpath(path, REPO))
                continue
            if source.get("stage") == "pretrain":
                entry = summary["pretrain"]
            else:
                entries = [m for m in summary["methods"] if m["method"] == source["method"]]
                if len(entries) != 1:
                    raise ComparisonError(f"{os.path.relpath(path, REPO)}: no method '{source['method']}'")
                entry = entries[0]
            value = entry[source["key"]]
            if source.get("first_step"):  # a per-step list per run: its first step
                values += [run[0] for run in value]
            elif isinstance(value, dict):
                values += value["runs"]
            else:
                values.append(value)
        return np.array(values, dtype=float), [os.path.relpath(f, REPO) for f in files], "runs"
    if "csv_runs" in source:  # one run a CSV (a learned attack's seed): the mean of its rows' column
        files = sorted(f for pattern in source["csv_runs"] for f in glob.glob(os.path.join(REPO, pattern)))
        if not files:
            raise ComparisonError(f"comparison.json: no committed file matches {source['csv_runs']}")
        values = [float(np.mean(source_runs({"csv": os.path.relpath(f, REPO), "where": source["where"],
                                              "column": source["column"]})[0])) for f in files]
        return np.array(values), [os.path.relpath(f, REPO) for f in files], "runs"
    path = os.path.join(REPO, source["csv"])
    try:
        with open(path, newline="", encoding="utf-8") as f:
            rows = [r for r in csv.DictReader(f) if all(r[k] == v for k, v in source["where"].items())]
    except OSError as e:
        raise ComparisonError(f"{source['csv']}: cannot be read: {e}")
    if not rows:
        raise ComparisonError(f"{source['csv']}: no row with {source['where']}")
    return np.array([float(r[source["column"]]) for r in rows]), [source["csv"]], source.get("counts", "rows")


def json_path_values(doc, path, where):
    """The number (or list of numbers) at `path` (keys and list indices, e.g. ["iterations", -1, "eta", "mean"])."""
    value = doc
    for step in path:
        try:
            value = value[step]
        except (KeyError, IndexError, TypeError):
            raise ComparisonError(f"{where}: no {step!r} on the path {path} (comparison.json)")
    values = value if isinstance(value, list) else [value]
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
        raise ComparisonError(f"{where}: the value at {path} is not a number or a list of numbers")
    return values


def statistics(source):
    runs, files, unit = source_runs(source)
    scale = source.get("scale", 1.0)
    sd = float(np.std(runs, ddof=1)) * scale if len(runs) > 1 else None  # sample sd, as the tables print
    if sd is not None and sd <= 1e-12 * max(1.0, abs(float(np.mean(runs)))):
        sd = 0.0  # equal runs (an epsilon) up to rounding: no spread to measure a gap in
    return {"mean": float(np.mean(runs)) * scale, "sd": sd, "n": len(runs), "unit": unit, "files": files}


# ---- numbers as printed ---------------------------------------------------------------------------

INTEGER_PART = r"(?:\d{1,3}(?:,\d{3})+|\d+)"  # digits, or thousands separated by commas ("12,665")


def decimals(printed):
    """Decimal places of a printed number ("0.0608" -> 4, "12,665" -> 0); None if not a plain decimal."""
    m = re.fullmatch(INTEGER_PART + r"(?:\.(\d+))?", printed)
    return None if m is None else len(m.group(1) or "")


def printed_number(printed):
    """A printed number and the unit of its last digit: a plain decimal ("0.0608" -> 0.0608, 1e-4;
    "12,665" -> 12665, 1) or a power of ten as the papers' texts flatten it, the exponent's superscript
    after "×10" ("2.5×106" -> 2.5e6, 1e5); None if neither."""
    m = re.fullmatch("(" + INTEGER_PART + r"(?:\.(\d+))?)(?:×10(-?\d+))?", printed)
    if m is None:
        return None
    exponent = int(m.group(3) or 0)
    return float(m.group(1).replace(",", "")) * 10.0 ** exponent, 10.0 ** (exponent - len(m.group(2) or ""))


def fmt(x, places):
    return "-" if x is None else f"{x:.{places}f}"


def fmt_sig(x, digits=4):
    if x is None:
        return "-"
    return f"{x:.{digits}g}" if abs(x) < 1e5 else f"{x:.3e}"


def gap(diff, sd):
    return None if sd is None or sd == 0 else diff / sd


def fmt_gap(g):
    return "-" if g is None else f"{g:+.1f}"


# ---- rows -----------------------------------------------------------------------------------------

def row_specs(artefact, values):
    """Every printed value of the artefact in paper order, each with its rows' specs (a list: one row
    per filkit variant), then the artefact's rows without a printed value (figures, claims)."""
    specs = artefact.get("rows", {})
    known = {f"{v['row']} / {v['quantity']}" for v in values}
    for key in specs:
        if key not in known:
            raise ComparisonError(f"comparison.json: {artefact['artefact']}: '{key}' is no printed value of it "
                                  f"in paper_values.json (known: {sorted(known)})")
    out = []
    for v in values:
        spec = specs.get(f"{v['row']} / {v['quantity']}", {})
        for s in (spec if isinstance(spec, list) else [spec]):
            out.append((v, s))
    for s in artefact.get("unprinted", []):
        out.append((None, s))
    return out


def evaluate_claim(claim):
    """A statement of the paper checked on filkit's means: 'less' (a < b) or an ordered sequence."""
    stats = [statistics(item["source"]) for item in claim["sequence"]]
    means = [s["mean"] for s in stats]
    if claim["claim"] == "increasing":
        ok = [a < b for a, b in zip(means, means[1:])]
    elif claim["claim"] == "decreasing":
        ok = [a > b for a, b in zip(means, means[1:])]
    elif claim["claim"] == "positive":
        ok = [m > 0 for m in means]
    else:
        raise ComparisonError(f"comparison.json: unknown claim '{claim['claim']}' (increasing, decreasing or positive)")
    parts = [f"{item['label']} {fmt_sig(s['mean'])} ({s['n']} {s['unit'] if s['n'] > 1 else s['unit'].rstrip('s')})"
             for item, s in zip(claim["sequence"], stats)]
    if claim["claim"] == "positive":
        text = "; ".join(part + (" > 0" if holds else " <= 0") for holds, part in zip(ok, parts))
        return all(ok), text, [f for s in stats for f in s["files"]]
    text = parts[0]
    for holds, part in zip(ok, parts[1:]):
        text += (" < " if (claim["claim"] == "increasing") == holds else " > ") + part
    return all(ok), text, [f for s in stats for f in s["files"]]


def build_row(value, spec, artefact_name):
    status = spec.get("status")
    if status not in STATUSES:
        raise ComparisonError(f"comparison.json: {artefact_name}: status '{status}' of "
                              f"{value and value['row']} / {value and value['quantity']}: one of {STATUSES}")
    row = {"status": status, "note": spec.get("note"), "variant": spec.get("variant"), "problems": [],
           "files": []}
    where = f"{artefact_name}, {value['row']} / {value['quantity']}" if value else f"{artefact_name}, {spec.get('label')}"
    if status != "reproduced" and not row["note"]:
        row["problems"].append(f"{where}: status '{status}' without a note saying why")
    if "claim" in spec:
        holds, text, files = evaluate_claim(spec)
        row.update(kind="claim", label=spec["label"], claim_text=spec["quote"], filkit_text=text, holds=holds,
                   files=files)
        if status == "reproduced" and not holds:
            row["problems"].append(f"{where}: 'reproduced' but the claim does not hold on the committed runs: {text}")
        return row
    stats = statistics(spec["source"]) if "source" in spec else None
    row.update(kind="value", value=value, stats=stats, label=spec.get("label"))
    if stats is None:
        if status != "not reproduced":
            row["problems"].append(f"{where}: status '{status}' without committed results (a source)")
        return row
    row["files"] = stats["files"]
    if value is None:
        if status == "reproduced":
            row["problems"].append(f"{where}: 'reproduced' with no printed value to compare")
        return row
    diff = stats["mean"] - value["value"]
    row["gap_paper"] = gap(diff, value["sd"])
    row["gap_filkit"] = gap(diff, stats["sd"])
    if status == "reproduced":
        gaps = [g for g in (row["gap_paper"], row["gap_filkit"]) if g is not None]
        number = printed_number(value["printed"])
        if any(abs(g) > MAX_REPRODUCED_GAP for g in gaps):
            row["problems"].append(f"{where}: 'reproduced' with a gap of {', '.join(fmt_gap(g) for g in gaps)} sd "
                                   f"(at most {MAX_REPRODUCED_GAP})")
        elif not gaps and (number is None or abs(diff) > 0.5 * number[1]):
            row["problems"].append(f"{where}: 'reproduced' with no sd on either side, and filkit's "
                                   f"{stats['mean']!r} does not round to the printed {value['printed']}")
    return row


# ---- pages ----------------------------------------------------------------------------------------

def md(text):
    return str(text).replace("|", "\\|").replace("\n", " ")


def quote_md(quote):
    return "`" + quote.replace("\t", " ⇥ ").replace("`", "'") + "`"


def value_cells(row):
    v, s = row["value"], row["stats"]
    places = decimals(v["printed"]) if v else None
    paper = "-" if v is None else v["printed"] + (f" ({v['printed_sd']})" if v["printed_sd"] else "")
    if s is None:
        return [paper, "none", "-", "-", "-"]
    shown = (lambda x: fmt(x, places + 1)) if places is not None else fmt_sig
    filkit = shown(s["mean"]) + (f" ({shown(s['sd'])})" if s["sd"] is not None else "")
    runs = f"{s['n']}" + ("" if s["unit"] == "runs" else f" {s['unit']}")
    return [paper, filkit, runs, fmt_gap(row.get("gap_paper")), fmt_gap(row.get("gap_filkit"))]


def status_cell(row, note_numbers):
    text = row["status"]
    if row["note"]:
        text += f" [{note_numbers[row['note']]}]"
    return text


def figure_lines(artefact, page_folder):
    """The artefact's redrawn figures (PNGs beside the page), each checked to exist and to be small."""
    lines, problems = [], []
    for figure in artefact.get("figures", []):
        path = os.path.join(REPO, page_folder, figure["file"])
        if not os.path.isfile(path):
            problems.append(f"{artefact['artefact']}: figure {figure['file']} is not beside the page ({page_folder})")
        elif os.path.getsize(path) > MAX_FIGURE_BYTES:
            problems.append(f"{artefact['artefact']}: figure {figure['file']} is {os.path.getsize(path)} bytes "
                            f"(at most {MAX_FIGURE_BYTES})")
        lines += [f"![{artefact['artefact']}, redrawn]({figure['file']})", "", f"*{md(figure['caption'])}*", ""]
    commands = artefact.get("commands", {})
    if commands:
        lines += [f"- {md(what)}: `{command}`" for what, command in commands.items()] + [""]
    return lines, problems


def artefact_section(artefact, rows, paper_values_path, page_folder):
    name = artefact["artefact"]
    lines = [f"## {name}: {artefact['what']}", ""]
    figures, problems = figure_lines(artefact, page_folder)
    lines += figures
    notes = artefact.get("notes", {})
    note_numbers = {}
    for row in rows:
        key = row["note"]
        if key and key not in note_numbers:
            if key not in notes:
                raise ComparisonError(f"comparison.json: {name}: note '{key}' is not in its notes")
            note_numbers[key] = len(note_numbers) + 1
    value_rows = [r for r in rows if r["kind"] == "value"]
    claim_rows = [r for r in rows if r["kind"] == "claim"]
    if value_rows:
        lines += ["| row | quantity | paper (sd) | filkit (sd) | runs | gap, paper sd | gap, filkit sd | status |",
                  "| --- | --- | --- | --- | --- | --- | --- | --- |"]
        for r in value_rows:
            v = r["value"]
            label = v["row"] if v else r["label"]
            if r["variant"]:
                label += f" ({r['variant']})"
            quantity = v["quantity"] if v else "-"
            lines.append("| " + " | ".join([md(label), md(quantity)] + [md(c) for c in value_cells(r)]
                                             + [md(status_cell(r, note_numbers))]) + " |")
        lines.append("")
    if claim_rows:
        lines += ["| claim | the paper's words | filkit (mean of the committed runs, and their number) | holds | status |",
                  "| --- | --- | --- | --- | --- |"]
        for r in claim_rows:
            lines.append(f"| {md(r['label'])} | \"{md(r['claim_text'])}\" | {md(r['filkit_text'])} | "
                         f"{'yes' if r['holds'] else 'no'} | {md(status_cell(r, note_numbers))} |")
        lines.append("")
    if note_numbers:
        lines += ["Notes:", ""]
        lines += [f"{n}. {notes[key]}" for key, n in note_numbers.items()]
        lines.append("")
    files = sorted({f for r in rows for f in r["files"]})
    if files:
        lines += ["Committed results: " + ", ".join(f"`{f}`" for f in files) + ".", ""]
    quotes = []
    for r in value_rows:
        v = r["value"]
        if v and (v["quote"], v["location"]) not in quotes:
            quotes.append((v["quote"], v["location"]))
    if quotes:
        lines += ["Printed as (the paper's text, `⇥` a tab; `" + paper_values_path + "`):", ""]
        lines += [f"- {loc}: {quote_md(q)}" for q, loc in quotes]
        lines.append("")
    return lines, problems


def summary_status(rows):
    counts = {s: sum(r["status"] == s for r in rows) for s in STATUSES}
    return ", ".join(f"{n} {s}" for s, n in counts.items() if n)


def build_pages(values_doc, comparison):
    pages, problems = {}, []
    for paper, page in comparison["pages"].items():
        values = [v for v in values_doc["values"] if v["paper"] == paper]
        artefacts = [a for a in comparison["artefacts"] if a["paper"] == paper]
        named = {a["artefact"] for a in artefacts}
        for v in values:
            if v["artefact"] not in named:
                problems.append(f"{paper}: printed value of {v['artefact']} ({v['row']} / {v['quantity']}) "
                                "has no artefact in comparison.json")
        title = values_doc["papers"][paper]["title"]
        lines = [f"# filkit against {title}", "",
                 "<!-- Generated by experiments/compare.py: do not edit. -->",
                 f"Generated by `experiments/compare.py` from `experiments/paper_values.json` (the paper's printed "
                 f"values, each with the line of `{values_doc['papers'][paper]['text']}` it was read from) and "
                 "`experiments/comparison.json` (which committed results of `experiments/results/` stand for each "
                 "value, each row's status and the notes); to change a row, edit those and run "
                 "`/usr/bin/python3 experiments/compare.py`. The ctest `experiments_comparison` fails when this "
                 "page differs from what they give.", "",
                 "filkit's value is the mean over the committed runs (or targets), with the sample standard "
                 "deviation (n - 1) when there are two or more. A gap is filkit's mean minus the paper's value, "
                 "in the paper's standard deviation and in filkit's. A row says **reproduced** only if the gap is "
                 f"within {MAX_REPRODUCED_GAP:g} of both (where either side has none, within the other; where "
                 "neither has one, filkit's value rounds to the printed one); **differs, explained** and **differs, "
                 "unexplained** have a note with the evidence or what was ruled out; **not reproduced** has a note "
                 "saying why. A claim row checks a statement of the paper on filkit's means. The investigations "
                 "behind the notes are in [experiments/README.md](../README.md).", "",
                 "## Summary", "", "| artefact | what | rows | status |", "| --- | --- | --- | --- |"]
        body = []
        for artefact in artefacts:
            own = [v for v in values if v["artefact"] == artefact["artefact"]]
            rows = []
            for value, spec in row_specs(artefact, own):
                spec = dict({"status": artefact.get("status"), "note": artefact.get("note")}, **spec)
                row = build_row(value, spec, artefact["artefact"])
                problems += [f"{paper}: {p}" for p in row["problems"]]
                rows.append(row)
            if not rows:
                problems.append(f"{paper}: {artefact['artefact']} has no row (no printed value and no 'unprinted')")
                continue
            anchor = re.sub(r"[^a-z0-9 -]", "", f"{artefact['artefact']}: {artefact['what']}".lower()).replace(" ", "-")
            lines.append(f"| [{artefact['artefact']}](#{anchor}) | {md(artefact['what'])} | {len(rows)} | "
                         f"{summary_status(rows)} |")
            section, section_problems = artefact_section(artefact, rows, "experiments/paper_values.json",
                                                         os.path.dirname(page))
            body += section
            problems += [f"{paper}: {p}" for p in section_problems]
        pages[page] = "\n".join(lines + [""] + body).rstrip("\n") + "\n"
    for v in values_doc["values"]:
        if v["paper"] not in comparison["pages"]:
            problems.append(f"paper_values.json: paper '{v['paper']}' has no page in comparison.json")
        if v["printed"] not in v["quote"] or (v["printed_sd"] and v["printed_sd"] not in v["quote"]):
            problems.append(f"paper_values.json: {v['artefact']} {v['row']} / {v['quantity']}: "
                            f"'{v['printed']}' not in its quote")
        number = printed_number(v["printed"])
        if number is not None and not math.isclose(number[0], v["value"]):
            problems.append(f"paper_values.json: {v['artefact']} {v['row']} / {v['quantity']}: value {v['value']} "
                            f"is not the printed {v['printed']}")
    return pages, problems


def check_quotes(values_doc, folder):
    """Every quote verbatim in its paper's text (whitespace as in the text)."""
    missing = []
    for paper, info in values_doc["papers"].items():
        path = os.path.join(folder, info["text"])
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        except OSError as e:
            raise ComparisonError(f"--check-quotes: {path}: cannot be read: {e}")
        for v in values_doc["values"]:
            if v["paper"] == paper and v["quote"] not in text:
                missing.append(f"{paper} {v['artefact']} {v['row']} / {v['quantity']}: quote not in {path}")
    return missing


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true",
                        help="regenerate into a temporary folder and fail on any difference or broken rule")
    parser.add_argument("--check-quotes", metavar="DIR", help="check every quote against the papers' texts in DIR")
    args = parser.parse_args()
    try:
        values_doc = load_json(os.path.join(HERE, "paper_values.json"))
        comparison = load_json(os.path.join(HERE, "comparison.json"))
        if args.check_quotes:
            missing = check_quotes(values_doc, args.check_quotes)
            print("\n".join(missing) or f"all {len(values_doc['values'])} quotes found", file=sys.stderr)
            return 1 if missing else 0
        pages, problems = build_pages(values_doc, comparison)
    except ComparisonError as e:
        print(f"compare.py: {e}", file=sys.stderr)
        return 1
    if args.check:
        with tempfile.TemporaryDirectory() as folder:
            for page, text in pages.items():
                fresh = os.path.join(folder, page)
                write_atomically(fresh, text)
                try:
                    with open(os.path.join(REPO, page), encoding="utf-8") as f:
                        committed = f.read()
                except OSError:
                    committed = None
                with open(fresh, encoding="utf-8") as f:
                    if f.read() != committed:
                        problems.append(f"{page} differs from what compare.py writes "
                                        "(run /usr/bin/python3 experiments/compare.py and commit the page)")
        for p in problems:
            print(f"compare.py: {p}", file=sys.stderr)
        return 1 if problems else 0
    for page, text in pages.items():
        write_atomically(os.path.join(REPO, page), text)
    for p in problems:
        print(f"compare.py: {p}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
