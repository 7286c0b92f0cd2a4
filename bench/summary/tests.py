"""tests.py: the GPU suite's ctest logs (ctest's console log: ctest_gpu.log,
keep/ctest.log): each test's verdict and time, and the counts; and the
golden tests' per-step worst ratios (`# step k: ok: ...` lines of ctest's
whole log).

Keys: tests/<log>/<test name> (Passed, Failed, ...), tests/<log>/<test
name>/seconds, tests/<log>/passed|failed|skipped|total;
golden/<test>/step<k>/err_over_bound|err_over_floor|flips."""
import os
import re

from _util import NUM, files, read, rel, row

PROGRESS = re.compile(r"^\s*\d+/(\d+) Test\s+#\d+: (\S+) \.*\s*(\*+)?(Passed|Failed|Skipped|Timeout|Not Run|Exception)"
                      r"[^\d]*(%s)? ?s?e?c?" % NUM, re.M)
TEST_START = re.compile(r"^\d+/\d+ Test: (\S+)$", re.M)
GOLDEN_STEP = re.compile(r"^# step (\d+): (ok|FAIL): trainbench (\d+) flip\(s\); \w+ rule: worst err/bound (%s) "
                         r"\([^)]*\), worst err/floor (%s)" % (NUM, NUM), re.M)


def _golden(run_dir, path, text):
    out = []
    starts = [(m.start(), m.group(1)) for m in TEST_START.finditer(text)]
    for i, (at, name) in enumerate(starts):
        end = starts[i + 1][0] if i + 1 < len(starts) else len(text)
        for g in GOLDEN_STEP.finditer(text, at, end):
            k = "golden/%s/step%s/" % (name, g.group(1))
            src = rel(run_dir, path)
            out += [row(k + "flips", int(g.group(3)), "flips", src),
                    row(k + "err_over_bound", float(g.group(4)), "x", src),
                    row(k + "err_over_floor", float(g.group(5)), "x", src)]
    return out


def extract(run_dir):
    out = []
    for path in files(run_dir, r"ctest.*\.log"):
        text = read(path)
        src = rel(run_dir, path)
        log = os.path.splitext(os.path.basename(path))[0]
        verdicts = {}
        for m in PROGRESS.finditer(text):
            verdicts[m.group(2)] = (m.group(4), m.group(5))
        if verdicts:
            for name, (v, secs) in sorted(verdicts.items()):
                out.append(row("tests/%s/%s" % (log, name), v, "-", src))
                if secs:
                    out.append(row("tests/%s/%s/seconds" % (log, name), float(secs), "s", src))
            count = {k: sum(1 for v, _ in verdicts.values() if v == k) for k in ("Passed", "Failed", "Skipped")}
            out += [row("tests/%s/passed" % log, count["Passed"], "tests", src),
                    row("tests/%s/failed" % log, len(verdicts) - count["Passed"] - count["Skipped"], "tests", src),
                    row("tests/%s/skipped" % log, count["Skipped"], "tests", src),
                    row("tests/%s/total" % log, len(verdicts), "tests", src)]
        out += _golden(run_dir, path, text)
    return out
