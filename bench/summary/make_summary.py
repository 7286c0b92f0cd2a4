#!/usr/bin/env python3
"""make_summary.py: one summary per GPU run, from its logs.

  make_summary.py RUN_DIR [--out FILE] [--check]

Imports every extractor module of bench/summary (each <stage>.py whose name
does not start with '_' and is not this file or check_pages.py) and calls
its extract(run_dir) -> list of (key, value, unit, source log); writes
RUN_DIR/summary.tsv (or --out): a header line, then one line per figure,

  key<TAB>value<TAB>unit<TAB>source log

sorted by key, the source relative to RUN_DIR. Keys are unique: a key two
extractors both produce is an error, as is an extractor that fails.
--check: write nothing; exit 1 when RUN_DIR/summary.tsv differs from what
the logs give now (the stored summary was edited by hand or went stale).

The GPU suite (tests/gpu/run_suite.sh) runs it on its keep/ (gpu-keep/keep) after the last stage
of every call; results pages quote figures from it (bench/summary/
check_pages.py checks them). Extractors: resnet50 (bench rows), train
(training logs: img/s, loss at start and end, scaling rows), tests (ctest
verdicts, golden ratios), probe, allreduce, tables (the stage scripts'
markdown tables); more may be added beside them under the same contract.
"""
import argparse
import importlib
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
NOT_EXTRACTORS = {"make_summary", "check_pages"}
HEADER = "key\tvalue\tunit\tsource log"


def extractors():
    sys.path.insert(0, HERE)
    names = sorted(f[:-3] for f in os.listdir(HERE)
                   if f.endswith(".py") and not f.startswith("_") and f[:-3] not in NOT_EXTRACTORS)
    return [(n, importlib.import_module(n)) for n in names]


def fmt(v):
    """A value as text: a float as repr gives it (the digits its log printed), others as str."""
    return repr(v) if isinstance(v, float) else str(v)


def summarize(run_dir):
    """[(key, value text, unit, source)] sorted by key; raises on a clash."""
    rows, owner = {}, {}
    for name, mod in extractors():
        for key, value, unit, source in mod.extract(run_dir):
            if "\t" in key or "\n" in key or not key:
                raise ValueError("%s: bad key %r" % (name, key))
            if key in rows:
                raise ValueError("key %s from both %s and %s" % (key, owner[key], name))
            rows[key] = (fmt(value), unit, source)
            owner[key] = name
    return [(k,) + rows[k] for k in sorted(rows)]


def render(rows):
    return "\n".join([HEADER] + ["\t".join(r) for r in rows]) + "\n"


def read_summary(path):
    """{key: (value text, unit, source)} of a summary.tsv."""
    out = {}
    with open(path) as f:
        for n, line in enumerate(f):
            if n == 0 and line.rstrip("\n") == HEADER:
                continue
            parts = line.rstrip("\n").split("\t")
            if len(parts) != 4:
                raise ValueError("%s:%d: not key<TAB>value<TAB>unit<TAB>source log" % (path, n + 1))
            out[parts[0]] = tuple(parts[1:])
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("run_dir")
    ap.add_argument("--out", help="summary file (default RUN_DIR/summary.tsv)")
    ap.add_argument("--check", action="store_true", help="compare with the stored summary, write nothing")
    a = ap.parse_args(argv)
    if not os.path.isdir(a.run_dir):
        print("make_summary: error: %s is not a directory" % a.run_dir)
        return 2
    text = render(summarize(a.run_dir))
    out = a.out or os.path.join(a.run_dir, "summary.tsv")
    if a.check:
        old = open(out).read() if os.path.isfile(out) else ""
        if old != text:
            print("make_summary: %s differs from what the logs give (regenerate: bench/summary/make_summary.py %s)"
                  % (out, a.run_dir))
            return 1
        print("make_summary: %s matches its logs (%d figures)" % (out, text.count("\n") - 1))
        return 0
    with open(out, "w") as f:
        f.write(text)
    print("make_summary: %d figures -> %s" % (text.count("\n") - 1, out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
