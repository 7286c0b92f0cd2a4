#!/usr/bin/python3
"""ci_time_compare.py - two `.ci/run` logs side by side: the whole run's
time, each phase's (the Release suite, the sanitizer suite, fuzzing), and
the tests both runs have, test by test, so that a suite that grew between
the two does not hide what the same tests cost.

    bench/ci_time_compare.py --before before.log --after after.log \
        --label-before "1ccd612" --label-after "c510561" > results/ci_time/compare.md

A log is `.ci/run`'s standard output and error, with a last line
`rc=N elapsed=S` appended by the caller (the wall time of the whole run).
"""
import argparse
import re
import sys

PHASES = [("test", "Release suite"), ("test (address,undefined)", "ASan + UBSan suite"), ("fuzz", "fuzzing")]
TEST_RE = re.compile(r"^\s*\d+/\d+ Test\s+#\d+: (\S+) \.*\s*(\*\*\*)?(\w+)[^\d]*([\d.]+) sec")


def parse(path):
    """-> {"elapsed": s, "rc": n, "phases": {phase: {"real": s, "tests": {name: (status, s)}}}}"""
    out = {"elapsed": None, "rc": None, "phases": {}}
    phase = None
    for line in open(path, errors="replace"):
        line = line.rstrip("\n")
        if line.startswith("== "):
            name = line[3:]
            # "test (address,undefined) without A|B: N s have gone by": a slow
            # machine's sanitizer suite (.ci/run's TB_ASAN_SLOW_MACHINE)
            if name.startswith("test (address,undefined) without "):
                name = "test (address,undefined)"
            phase = name if name in dict(PHASES) else None
            if phase:
                out["phases"][phase] = {"real": None, "tests": {}}
            continue
        m = re.match(r"^rc=(\d+) elapsed=(\d+)$", line)
        if m:
            out["rc"], out["elapsed"] = int(m.group(1)), int(m.group(2))
            continue
        if phase is None:
            continue
        m = re.match(r"^Total Test time \(real\) =\s*([\d.]+) sec", line)
        if m:
            out["phases"][phase]["real"] = float(m.group(1))
            continue
        m = TEST_RE.match(line)
        if m:
            out["phases"][phase]["tests"][m.group(1)] = (m.group(3), float(m.group(4)))
    if out["elapsed"] is None:
        sys.exit(f"ci_time_compare.py: {path} has no 'rc=N elapsed=S' line: append one after .ci/run")
    return out


def fmt(v):
    return "-" if v is None else f"{v:.0f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--before", required=True)
    ap.add_argument("--after", required=True)
    ap.add_argument("--label-before", default="before")
    ap.add_argument("--label-after", default="after")
    ap.add_argument("--top", type=int, default=12, help="common tests listed, largest change first")
    a = ap.parse_args()
    b, c = parse(a.before), parse(a.after)
    lb, la = a.label_before, a.label_after
    print(f"| | {lb} | {la} |")
    print("|---|---|---|")
    print(f"| `.ci/run`, wall s (exit code) | {b['elapsed']} ({b['rc']}) | {c['elapsed']} ({c['rc']}) |")
    common_rows = []
    for key, title in PHASES:
        pb, pc = b["phases"].get(key), c["phases"].get(key)
        if not pb and not pc:
            continue
        tb, tc = (pb or {}).get("tests", {}), (pc or {}).get("tests", {})
        npass = lambda t: sum(1 for s, _ in t.values() if s == "Passed")
        print(f"| {title}: wall s | {fmt((pb or {}).get('real'))} | {fmt((pc or {}).get('real'))} |")
        print(f"| {title}: tests (passed) | {len(tb)} ({npass(tb)}) | {len(tc)} ({npass(tc)}) |")
        both = sorted(set(tb) & set(tc))
        sb, sc = sum(tb[n][1] for n in both), sum(tc[n][1] for n in both)
        print(f"| {title}: the {len(both)} tests in both, summed test s | {sb:.0f} | {sc:.0f} |")
        only = sum(tc[n][1] for n in set(tc) - set(tb))
        print(f"| {title}: the {len(set(tc) - set(tb))} tests only {la} has, summed test s | - | {only:.0f} |")
        if key == "test":
            common_rows = sorted(((tb[n][1], tc[n][1], n) for n in both), key=lambda r: -abs(r[1] - r[0]))
    if common_rows:
        print(f"\nRelease suite, the tests in both runs with the largest changes (s; summed test seconds "
              f"overlap, 2 at a time, so they add up to more than the wall time):\n")
        print(f"| test | {lb} | {la} | {la} / {lb} |")
        print("|---|---|---|---|")
        for tb_, tc_, n in common_rows[:a.top]:
            print(f"| {n} | {tb_:.1f} | {tc_:.1f} | {tc_ / tb_ if tb_ > 0 else float('nan'):.2f}x |")


if __name__ == "__main__":
    main()
