#!/usr/bin/env python3
"""compare_results.py — compare two run folders of a moelab experiment, file by file, cell by cell.

    scripts/compare_results.py RECORDED RERUN [--atol X] [--require-bitwise]

Every .csv file of RECORDED (a docs/results folder or any run folder) is read next to the file of
the same name in RERUN, row by row. Columns that measure time or name paths (seconds, *_ms,
*per_second, checkpoint, started) differ from run to run by nature and are left out; every other
cell is compared as text first and, where it differs, as a number. Equal text is equal bits: the
engine prints every float in the shortest form that reads back to the same double (up to 17
significant digits; a float32 widened to double reads back to its float32 bits too). Records
written before that (6 significant digits) compare bitwise only to 6 digits: equal text there
does not prove equal bits. metrics.csv (the per-step logs) is
compared too when both folders have it.

Prints one line per file: "bitwise", or the largest absolute difference per column, and then the
verdict sections of both summary.md files for a reader to set side by side.

Exit status: 0 when every compared cell is bitwise equal, or (without --require-bitwise) when every
numeric difference is at most --atol (default 0: any difference fails); 1 otherwise (a difference
above the tolerance, a text cell that differs, a missing file or row); 2 for bad arguments.
Standard library only.
"""
import argparse
import csv
import math
import os
import re
import sys

TIMING = re.compile(r"(^seconds$|_seconds$|_ms$|per_second$|^checkpoint$|^started$|^wall)")


def read_csv(path):
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    return (rows[0], rows[1:]) if rows else ([], [])


def as_number(text):
    try:
        return float(text)
    except ValueError:
        return None


def compare_file(name, a_path, b_path, atol):
    """Returns (ok_within_tol, bitwise, message)."""
    ha, ra = read_csv(a_path)
    hb, rb = read_csv(b_path)
    if ha != hb:
        return False, False, f"{name}: the columns differ ({ha} against {hb})"
    if len(ra) != len(rb):
        return False, False, f"{name}: {len(ra)} rows recorded, {len(rb)} in the rerun"
    compared = [i for i, c in enumerate(ha) if not TIMING.search(c)]
    worst = {}
    text_diffs = []
    for r, (row_a, row_b) in enumerate(zip(ra, rb)):
        for i in compared:
            x, y = row_a[i], row_b[i]
            if x == y:
                continue
            fx, fy = as_number(x), as_number(y)
            if fx is None or fy is None:
                text_diffs.append(f"row {r + 1} {ha[i]}: {x!r} against {y!r}")
                continue
            d = abs(fx - fy) if not (math.isnan(fx) and math.isnan(fy)) else 0.0
            worst[ha[i]] = max(worst.get(ha[i], 0.0), d)
    if not worst and not text_diffs:
        return True, True, f"{name}: bitwise ({len(ra)} rows, {len(compared)} of {len(ha)} columns compared)"
    parts = [f"{c} {v:.3g}" for c, v in sorted(worst.items(), key=lambda kv: -kv[1])]
    msg = f"{name}: differs; largest absolute difference per column: " + (", ".join(parts) or "none")
    if text_diffs:
        msg += "; text cells differ: " + "; ".join(text_diffs[:5]) + (" ..." if len(text_diffs) > 5 else "")
    ok = not text_diffs and all(v <= atol for v in worst.values())
    return ok, False, msg


def verdict(folder):
    path = os.path.join(folder, "summary.md")
    if not os.path.exists(path):
        return "(no summary.md)"
    text = open(path).read()
    m = re.search(r"^## Verdict\s*\n(.*?)(?=^## |\Z)", text, re.S | re.M)
    return (m.group(1) if m else text[-1500:]).strip()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("recorded")
    p.add_argument("rerun")
    p.add_argument("--atol", type=float, default=0.0, help="largest absolute difference accepted (default 0)")
    p.add_argument("--require-bitwise", action="store_true", help="fail on any difference, whatever --atol says")
    p.add_argument("--quiet", action="store_true", help="leave out the verdict sections")
    a = p.parse_args()
    for d in (a.recorded, a.rerun):
        if not os.path.isdir(d):
            print(f"compare_results: {d} is not a folder", file=sys.stderr)
            return 2
    names = sorted(n for n in os.listdir(a.recorded) if n.endswith(".csv"))
    if not names:
        print(f"compare_results: {a.recorded} has no .csv files", file=sys.stderr)
        return 2
    all_ok, all_bitwise = True, True
    for n in names:
        other = os.path.join(a.rerun, n)
        if not os.path.exists(other):
            print(f"{n}: missing in the rerun")
            all_ok = all_bitwise = False
            continue
        ok, bitwise, msg = compare_file(n, os.path.join(a.recorded, n), other, a.atol)
        print(msg)
        all_ok &= ok
        all_bitwise &= bitwise
    if not a.quiet:
        print("\nrecorded verdict:\n" + verdict(a.recorded) + "\n\nrerun verdict:\n" + verdict(a.rerun))
    print("\nresult: " + ("bitwise equal" if all_bitwise else
                          ("within --atol %g" % a.atol if all_ok else "differs beyond --atol %g" % a.atol)))
    if a.require_bitwise:
        return 0 if all_bitwise else 1
    return 0 if all_ok else 1


if __name__ == "__main__":
    sys.exit(main())
