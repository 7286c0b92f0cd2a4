#!/usr/bin/env python3
"""startup_pool_table.py OUT_DIR: the table of bench/startup_pool.sh's runs
(OUT_DIR/runs.tsv): per build and thread count, the median, min and max of
the start-up's "source" part (the synthetic pool) over its runs, and the
new build's speed-up against the old one's median."""
import csv
import statistics
import sys


def main():
    out = sys.argv[1]
    rows = list(csv.DictReader(open(out + "/runs.tsv"), delimiter="\t"))
    groups = {}
    for r in rows:
        if r["source_s"] != "-":
            groups.setdefault((r["binary"], int(r["threads"])), []).append(float(r["source_s"]))
    print("| build | threads | pool (source part) median s | min | max | runs | old / new |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for (b, t), v in sorted(groups.items(), key=lambda kv: (kv[0][0] != "old", kv[0][1])):
        med = statistics.median(v)
        old = groups.get(("old", t))
        ratio = "%.2fx" % (statistics.median(old) / med) if b == "new" and old else "-"
        print("| %s | %d | %.1f | %.1f | %.1f | %d | %s |" % (b, t, med, min(v), max(v), len(v), ratio))


if __name__ == "__main__":
    main()
