#!/usr/bin/python3
"""The Markdown tables of bench/README.md ("make_private in the user's loop") from the JSON that
bench/torch_loop_bench.py writes (--json), so that no number in them is typed:

  python3 bench/torch_loop_table.py bench/results/torch_loop_bench_cpu.json \
      [--previous bench/results/torch_loop_bench_cpu_previous.json]
"""
import argparse
import json

COLUMNS = ("plain", "dp-sgd by hand", "make_private", "trace by hand", "accounted by hand", "make_private+FIL")


def key(row):
    return row["model"], row["dtype"], row["batch"], row["threads"], row["device"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("results")
    parser.add_argument("--previous", help="the same grid run with the previous make_private")
    args = parser.parse_args()
    with open(args.results) as f:
        rows = json.load(f)
    previous = {}
    if args.previous:
        with open(args.previous) as f:
            previous = {key(r): r for r in json.load(f)}
    memory = any("peak_gib" in r.get("plain", {}) for r in rows)
    present = [c for c in COLUMNS if any(c in r for r in rows)]
    head = ["model", "dtype", "B", "threads"] + present + ["make_private / dp-sgd by hand",
                                                           "make_private+FIL / (dp-sgd + trace by hand)"]
    if previous:
        head += ["previous make_private", "previous make_private+FIL"]
    print("| " + " | ".join(head) + " |")
    print("| " + " | ".join("---" for _ in head) + " |")
    for r in rows:
        cells = [r["model"], r["dtype"], str(r["batch"]), str(r["threads"])]
        for c in present:
            cell = f"{r[c]['ms']:.1f}" if c in r else ""
            if memory and c in r:
                cell += f" ({r[c]['peak_gib']:.2f} GiB)"
            cells.append(cell)
        cells += [f"{r[ratio]:.2f}" for ratio in ("make_private / dp-sgd by hand",
                                                  "make_private+FIL / (dp-sgd + trace by hand)")]
        if previous:
            old = previous.get(key(r), {})
            cells += [f"{old[c]['ms']:.1f}" if c in old else "" for c in ("make_private", "make_private+FIL")]
        print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
