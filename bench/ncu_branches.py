#!/usr/bin/env python3
"""Where a layer's kernels jump after their PDL wait, from ncu's per-SASS-line
counts (the CSV of `ncu --import REP --page source --csv --print-source sass`
on a report collected with `--section SourceCounters`; bench/ncu_branches.sh
makes one). For each kernel launch: its code size, the offset of its wait
(ACQBULK), the branches after it that jump DIST bytes or more with the warps
that took them (the predicated-on share of the branch's thread executions),
and the "no instruction" stall samples, in all and at the lines they fall on
most. A far jump taken after the wait is an instruction fetch on the
kernel's chain (bench/notes/quant.md, seventeenth session).

    python3 bench/ncu_branches.py SRC.csv [DIST]    # DIST: 2048 bytes
"""
import csv
import re
import sys


def launches(path):
    """[(kernel name, header, rows)], one per launch (ncu prints some twice)."""
    found, header = [], None
    with open(path, newline="") as f:
        for row in csv.reader(f):
            if not row:
                continue
            if row[0] == "Kernel Name":
                found.append((row[1], []))
            elif row[0] == "Address":
                header = row
            elif row[0].startswith("0x") and found:
                found[-1][1].append(row)
    if not found or header is None:
        sys.exit("ncu_branches.py: %s: no kernel's per-line table (want the CSV of `ncu --import "
                 "REP --page source --csv --print-source sass`)" % path)
    out = []
    for name, rows in found:
        if out and out[-1][0] == name and out[-1][2] == rows:
            continue  # the same launch printed twice
        out.append((name, header, rows))
    return out


def report(name, hdr, rows, dist):
    want = ("Instructions Executed", "Thread Instructions Executed",
            "Predicated-On Thread Instructions Executed", "Warp Stall Sampling (All Samples)")
    missing = [k for k in want if k not in hdr]
    if missing:
        sys.exit("ncu_branches.py: no column %r (collect with --section SourceCounters)" % missing[0])
    col = {k: hdr.index(k) for k in want}
    no_inst = hdr.index("stall_no_inst") if "stall_no_inst" in hdr else None
    base = int(rows[0][0], 16)
    wait = next((int(r[0], 16) - base for r in rows if "ACQBULK" in r[1]), None)
    print("== %s\n   %d bytes, wait at %s" % (name, 16 * len(rows), hex(wait) if wait is not None else "none"))
    for r in rows:
        m = re.search(r"BRA(?:\s+\S+,)?\s+(0x[0-9a-f]+)", r[1])
        execs = int(r[col["Instructions Executed"]])
        if not m or execs == 0:
            continue
        at, to = int(r[0], 16) - base, int(m.group(1), 16) - base
        if abs(to - at) < dist or (wait is not None and at < wait):
            continue
        threads = int(r[col["Thread Instructions Executed"]])
        taken = 1.0 if not r[1].strip().startswith("@") else (
            int(r[col["Predicated-On Thread Instructions Executed"]]) / threads if threads else 0.0)
        print("   %6x -> %6x  %+7d B  warps %7d  taken %.2f  %s" % (at, to, to - at, execs, taken,
                                                                     r[1].strip()[:36]))
    if no_inst is not None:
        samples = sum(int(r[col["Warp Stall Sampling (All Samples)"]]) for r in rows)
        ni = [(int(r[no_inst]), int(r[0], 16) - base, r[1].strip()[:36]) for r in rows]
        print("   stall samples %d, no instruction %d; most at:" % (samples, sum(n for n, _, _ in ni)))
        for n, at, text in sorted(ni, reverse=True)[:4]:
            if n:
                print("     %6x  %3d  %s" % (at, n, text))


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    dist = int(sys.argv[2]) if len(sys.argv) > 2 else 2048
    for name, hdr, rows in launches(sys.argv[1]):
        report(name, hdr, rows, dist)


if __name__ == "__main__":
    main()
