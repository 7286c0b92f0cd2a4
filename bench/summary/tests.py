"""tests.py: the GPU suite's ctest logs (ctest's console log: ctest_gpu.log,
keep/ctest.log): each test's verdict and time, and the counts; and the
golden tests' per-step worst ratios (`# step k: ok: ...` lines of ctest's
whole log).

Keys: tests/<log>/<test name> (Passed, Failed, ...), tests/<log>/<test
name>/seconds, tests/<log>/passed|failed|skipped|total;
golden/<test>/step<k>/err_over_bound|err_over_floor|flips (the fp32/tf32
rules), golden/<test>/step<k>/err_over_bound|median_err_over_floor (the
16-bit amp rule). A ratio may read inf or nan (a tensor PyTorch computed
exactly): it is kept as such."""
import os
import re

from _util import NUM, files, read, rel, row

PROGRESS = re.compile(r"^\s*\d+/(\d+) Test\s+#\d+: (\S+) \.*\s*(\*+)?(Passed|Failed|Skipped|Timeout|Not Run|Exception)"
                      r"[^\d]*(%s)? ?s?e?c?" % NUM, re.M)
TEST_START = re.compile(r"^\d+/\d+ Test: (\S+)$", re.M)
RATIO = r"%s|inf|nan" % NUM
GOLDEN_STEP = re.compile(r"^# step (\d+): (ok|FAIL): trainbench (\d+) flip\(s\); \w+ rule: worst err/bound (%s) "
                         r"\([^)]*\), worst err/floor (%s)" % (RATIO, RATIO), re.M)
AMP_STEP = re.compile(r"^# step (\d+): (ok|FAIL): amp rule: worst err/bound (%s) \([^)]*\), median err/floor over "
                      r"gradients (%s)" % (RATIO, RATIO), re.M)


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
        for g in AMP_STEP.finditer(text, at, end):
            k = "golden/%s/step%s/" % (name, g.group(1))
            src = rel(run_dir, path)
            out += [row(k + "err_over_bound", float(g.group(3)), "x", src),
                    row(k + "median_err_over_floor", float(g.group(4)), "x", src)]
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
    return _numbered(out)


def _numbered(rows):
    """A golden test run twice in one call (two whole logs in keep/) gives
    its keys again: the second gets #2 (as resnet50.py numbers a repeated
    configuration), so neither is lost and the summary is still written."""
    seen, out = {}, []
    for key, value, unit, src in rows:
        n = seen.get(key, 0) + 1
        seen[key] = n
        out.append(("%s#%d" % (key, n) if n > 1 else key, value, unit, src))
    return out
