#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Calibration of strixpeerctl bench against perftest.

    bench-calibrate.py DIR

DIR holds bench-N.json (strixpeerctl -j bench runs, malloc, RDMA WRITE),
ib_write_bw-SIZE-N.txt and ib_write_lat-SIZE-N.txt (perftest's client
output), N = 1, 2, ... interleaved repetitions. For every size both
measured, prints the median over our runs of the malloc figure next to the
median of perftest's (BW average for bandwidth, t_typical for latency: the
figures perftest prints, in its units, MB = 2^20 bytes) and their ratio,
writes the same as JSON to DIR/../calibration.json, and exits 3 when a pair
at >= 64 KiB differs by more than 10%.
"""
import glob
import json
import os
import re
import statistics
import sys

TOLERANCE = 0.10


def perftest_value(path, kind):
    """BW average (MB/s) of ib_write_bw, t_typical (us) of ib_write_lat."""
    lines = open(path, errors="replace").read().splitlines()
    for i, line in enumerate(lines):
        if line.strip().startswith("#bytes"):
            head = line.split()
            for row in lines[i + 1:]:
                vals = row.split()
                if len(vals) >= 4 and vals[0].isdigit():
                    if kind == "bw":
                        return float(vals[3])
                    col = [j for j, h in enumerate(head) if h.startswith("t_typical")]
                    # header words: "#bytes #iterations t_min[usec] t_max[usec] t_typical[usec] ..."
                    return float(vals[col[0]]) if col else float(vals[4])
    return None


def main():
    pdir = sys.argv[1]
    runs = {}
    for path in sorted(glob.glob(os.path.join(pdir, "bench-*.json"))):
        try:
            bench = json.load(open(path))
        except ValueError:
            continue
        for s in bench["rdma"]:
            m = s["kinds"].get("malloc")
            if s["figure"] in ("write_bw", "write_lat") and m:
                runs.setdefault((s["figure"], s["msg_size"]), ([], s["iters"]))[0].append(
                    m["median"])
    ours = {k: (statistics.median(v), it) for k, (v, it) in runs.items()}
    rows, bad = [], 0
    files = {}
    for path in glob.glob(os.path.join(pdir, "ib_write_*-*-*.txt")):
        m = re.match(r"ib_write_(bw|lat)-(\d+)-\d+\.txt$", os.path.basename(path))
        if m:
            v = perftest_value(path, m.group(1))
            if v is not None:
                files.setdefault((m.group(1), int(m.group(2))), []).append(v)
    for (kind, size), vals in sorted(files.items()):
        fig = "write_" + kind
        if (fig, size) not in ours:
            continue
        mine, iters = ours[(fig, size)]
        ref = statistics.median(vals)
        ratio = mine / ref if ref else float("nan")
        ok = abs(ratio - 1) <= TOLERANCE
        if size >= 65536 and not ok:
            bad += 1
        rows.append({"figure": fig, "msg_size": size, "iters": iters,
                     "unit": "MiB/s" if kind == "bw" else "us",
                     "strixpeerctl_malloc": mine,
                     "strixpeerctl_runs": sorted(runs[(fig, size)][0]), "perftest": ref,
                     "perftest_runs": sorted(vals), "ratio": ratio, "within_10pct": ok})
    print("calibration: strixpeerctl bench (malloc, polled) vs perftest, medians of %d "
          "interleaved runs each" % max((len(v) for v in files.values()), default=0))
    print("%-10s %9s %7s %14s %12s %7s" % ("figure", "size", "iters", "strixpeerctl", "perftest",
                                          "ratio"))
    for r in rows:
        print("%-10s %9d %7d %14.2f %12.2f %7.3f %s" % (
            r["figure"], r["msg_size"], r["iters"], r["strixpeerctl_malloc"], r["perftest"],
            r["ratio"], "" if r["within_10pct"] else "DIFFERS by more than 10%"))
    if not rows:
        print("calibration: nothing to compare (no perftest output or no malloc figures)")
        bad = 1
    json.dump({"tolerance": TOLERANCE, "pairs": rows},
              open(os.path.join(os.path.dirname(os.path.abspath(pdir)), "calibration.json"), "w"),
              indent=1)
    return 3 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
