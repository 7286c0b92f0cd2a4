#!/usr/bin/env python3
"""check_pages.py: the figures a results page quotes, checked against the
runs' summaries (summary.tsv, bench/summary/make_summary.py).

  check_pages.py PAGE.md [PAGE.md ...] --runs RUN_DIR [RUN_DIR ...] [--h5 RESULTS.h5 ...] [-v]

What is checked, in the page's prose and tables:
  rates    every number followed by img/s, GB/s or TFLOP/s (in prose and in
           any table cell), and every cell
           of a table column whose header names one of them (or `peak MiB`),
           must equal a figure of that unit in one of the runs' summaries,
           rounded to the digits the page prints (7,182 matches 7182.10);
  percents every percentage in a clause that says "efficiency" (`96.7 %
           weak-scaling efficiency`, `efficiency 73 % / 65 % at 2 / 3
           ranks, 51 % / 32 % at 1 Gbit/s`; not a share `0.6 % of the
           step`, a difference `+5 %`, `1.4 % above`, or a spread), every
           one called a share of the on-device (resident) rate (`99.8 % of
           the on-device rate`), and every cell of a table column headed
           `efficiency` (or `measured` right after one) must equal a figure
           of that kind, to the digits printed: an efficiency (measured,
           predicted or projected: the summary keys `eff`, `meas_eff`,
           `efficiency...`, or the /scaling efficiency of a results file
           given with --h5), or a `..._of_resident_pct`. Any run's figure of
           the kind counts, so a 1-rank 100 % matches any run's. Where the
           clause or the column header says "projected"/"predicted" and not
           "measured" (or the other way round), the efficiency must be one
           of that kind: projected are the keys naming a projection, and
           `eff` beside a `meas_eff` (`trainbench project`'s prediction);
           measured are `meas_eff`, a scaling table's `eff` and the
           results files' rows;
  ratios   a ratio written with its operands -- `1.44x ... (6606 against
           4279 img/s)`, `6,606 / 4,279 is 1.54x` -- must be their quotient
           to the digits printed; in a table with an img/s column and an
           `x ...` column, each row's ratio must be its img/s over the img/s
           of the row whose ratio is 1.00; in a cell `A, Rx, M` (img/s,
           ratio, MiB) R must be A over some PyTorch eager bf16 NHWC 256
           figure of the runs.
A figure no summary holds is NOT FOUND; a ratio that does not divide out
is WRONG. Both fail (exit 1). Figures that are not measurements of these
runs (a datasheet, another project's published number) are named in the
page in an HTML comment, `<!-- not from the logs: 64 GB/s (datasheet), ...
-->`: the numbers listed there are skipped wherever they appear.

The GPU run pages are checked by the ctest test results_pages_figures.
"""
import argparse
import math
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from make_summary import read_summary  # noqa: E402

NUM = r"\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?"
RATE_UNITS = ("img/s", "GB/s", "TFLOP/s")
RATE = re.compile(r"(?<![\w.])(%s)\s*(img/s|GB/s|TFLOP/s)" % NUM)
RATIO = re.compile(r"(?<![\w.])(\d+(?:\.\d+)?)\s?x(?![\w])")
# the operands of a ratio: "R x ... (A against B", or "A / B is R x"
PAIR_AFTER = re.compile(r"[^();]*?\((?:[^()]*?\s)?(%s)\s*(?:img/s\s*)?against\s*(%s)" % (NUM, NUM))
PAIR_BEFORE = re.compile(r"(%s)\s*/\s*(%s)\s*(?:img/s\s*)?(?:is|=|gives)\s*$" % (NUM, NUM))
EXEMPT = re.compile(r"<!--\s*not from the logs:(.*?)-->", re.S)
# Percentages named as an efficiency: every one in a clause (split at ';',
# '. ', a blank line; a table cell is one) that says "efficien", except a
# share ("0.6 % of the step"), a difference ("+5 %", "1.4 % above", "within
# 2 %") or a spread; and every one called a share of the on-device
# (resident) rate. Each matches only summary keys of its kind (the key, not
# the run's name): an efficiency (measured, predicted or projected) or the
# JPEG feed over the resident rate.
EFF_KEY, RESIDENT_KEY = r"(^|/|_)(meas_)?eff(iciency)?(_|$)", r"of_resident"
CLAUSE = re.compile(r";|\.\s|\n\s*\n")
EFF_WORD = re.compile(r"efficien", re.I)
NOT_EFF_AFTER = re.compile(r"\s*(?:of\s+(?:the|its|a|an|each|every)\b|above|below|more|less|faster|slower|"
                           r"points?\b|difference|spread|higher|lower)", re.I)
NOT_EFF_BEFORE = re.compile(r"(?:[+\u00b1-]|within|by|spread|about)\s*$", re.I)
RESIDENT = re.compile(r"(?<![\w.])(%s)\s?%%\s+of\s+(?:the\s+)?(?:same call's\s+)?(?:on-device|resident)" % NUM,
                      re.I)
PCT = re.compile(r"(?<![\w.])(%s)\s?%%" % NUM)


def value(text):
    return float(text.replace(",", ""))


def decimals(text):
    return len(text.split(".")[1]) if "." in text else 0


def rounds_to(v, text):
    """text is v rounded to text's digits (half up or half even alike)."""
    return abs(v - value(text)) <= 0.5 * 10 ** -decimals(text) * (1 + 1e-9) + 1e-12


def ratio_ok(r_text, a, b):
    """r_text is a/b to its digits, a and b themselves rounded as printed."""
    if b == 0:
        return False
    q = a / b
    slack = q * (0.5 / max(a, 1e-9) + 0.5 / max(b, 1e-9))   # the operands' own rounding (integers)
    return abs(q - value(r_text)) <= 0.5 * 10 ** -decimals(r_text) + slack + 1e-12


class Figures:
    """The runs' figures by unit."""

    def __init__(self, runs, h5files=()):
        self.by_unit = {}   # unit -> [(value, run, key)]
        for run in runs:
            path = os.path.join(run, "summary.tsv")
            for key, (v, unit, _src) in read_summary(path).items():
                try:
                    x = float(v)
                except ValueError:
                    continue
                self.by_unit.setdefault(unit, []).append((x, os.path.basename(run.rstrip("/")), key))
        for path in h5files:   # a results file's scaling table: its efficiencies
            for key, x in scaling_efficiencies(path):
                self.by_unit.setdefault("%", []).append((x, os.path.basename(path), key))
        self.kinds = efficiency_kinds(self.by_unit.get("%", []))
        self.eager_base = [float(v) for run in runs for k, (v, u, s) in read_summary(
            os.path.join(run, "summary.tsv")).items()
            if re.match(r"resnet50/pytorch_eager/bf16/nhwc/256/-(#\d+)?/img_per_s$", k)]

    def find(self, text, unit, key=None, kind=None):
        """'run:key' of the first figure of unit that text rounds from (and whose key matches the regex key,
        and, for an efficiency, whose kind is kind: 'measured' or 'projected'; None takes either)."""
        for x, run, k in self.by_unit.get(unit, []):
            if (rounds_to(x, text) and (key is None or re.search(key, k)) and
                    (kind is None or self.kinds.get((run, k)) == kind)):
                return "%s:%s" % (run, k)
        return None


def efficiency_kinds(figures):
    """{(run, key): 'measured' | 'projected'} of the efficiencies among figures [(value, run, key)]:
    measured are a results file's /scaling rows, `meas_eff` and a scaling table's `eff`; projected are
    keys naming a projection or prediction, and `eff` in a table that puts a `meas_eff` beside it
    (`trainbench project`'s rows: its prediction, then the run)."""
    keys = {(run, k) for _x, run, k in figures}
    out = {}
    for run, k in keys:
        if not re.search(EFF_KEY, k):
            continue
        if re.search(r"project|predict", k) or (k.endswith("/eff") and (run, k[:-3] + "meas_eff") in keys):
            out[(run, k)] = "projected"
        else:
            out[(run, k)] = "measured"
    return out


def efficiency_kind(text):
    """The kind of efficiency a clause or a column header names: 'projected' (projected, predicted),
    'measured' (measured, as run by the run itself), or None where it names neither or both."""
    proj = bool(re.search(r"\b(project|predict)", text, re.I))
    meas = bool(re.search(r"\bmeasured\b", text, re.I))
    return "projected" if proj and not meas else "measured" if meas and not proj else None


def scaling_efficiencies(path):
    """[(key, percent)] of a results file's /scaling rows: their efficiency x 100."""
    import h5py   # only with --h5
    out = []
    with h5py.File(path, "r") as f:
        if "scaling" not in f or "efficiency" not in f["scaling"]:
            return out
        t = f["scaling"]
        for n, e in zip(t["ranks"][:], t["efficiency"][:]):
            if math.isfinite(float(e)):
                out.append(("scaling/%d ranks/efficiency" % n, 100.0 * float(e)))
    return out


def check_percents(text, figs, exempt, report, where):
    """The percentages text names as an efficiency or a share of the on-device rate."""
    seen = set()
    for m in RESIDENT.finditer(text):
        seen.add(m.start(1))
        if m.group(1) not in exempt:
            report.figure(m.group(1), "%", figs.find(m.group(1), "%", RESIDENT_KEY), where)
    start = 0
    for cut in list(CLAUSE.finditer(text)) + [None]:   # each clause: text[start:end]
        end = cut.start() if cut else len(text)
        if EFF_WORD.search(text, start, end):
            for m in PCT.finditer(text, start, end):
                if (m.start(1) in seen or m.group(1) in exempt or NOT_EFF_AFTER.match(text, m.end(), end)
                        or NOT_EFF_BEFORE.search(text, start, m.start(1))):
                    continue
                kind = efficiency_kind(text[start:end])
                report.figure(m.group(1), "%", figs.find(m.group(1), "%", EFF_KEY, kind),
                              where + (" (%s)" % kind if kind else ""))
        start = cut.end() if cut else end


def sentences(text):
    """Prose pieces a ratio and its operands share: split at '. ', ';', list items and blank lines."""
    return [s for s in re.split(r"(?<=[.;:])\s+(?=[A-Z*(`-])|\n\s*\n|\n\s*[-|]", text) if s.strip()]


def table_blocks(lines):
    """[(header cells, [row cells])] of the page's markdown tables."""
    out, i = [], 0
    while i + 1 < len(lines):
        if lines[i].lstrip().startswith("|") and re.match(r"^\s*\|[\s:|-]+\|\s*$", lines[i + 1]):
            head = [c.strip() for c in lines[i].strip().strip("|").split("|")]
            rows, i = [], i + 2
            while i < len(lines) and lines[i].lstrip().startswith("|"):
                rows.append([c.strip() for c in lines[i].strip().strip("|").split("|")])
                i += 1
            out.append((head, rows))
        else:
            i += 1
    return out


def clean(cell):
    return re.sub(r"[*`]", "", cell)


def check_tables(lines, figs, exempt, report):
    for head, rows in table_blocks(lines):
        unit_cols = {}
        for j, h in enumerate(head):
            for u in RATE_UNITS:
                if u in h:
                    unit_cols[j] = u
            if re.search(r"peak MiB", h):
                unit_cols[j] = "MiB"
        eff_cols = [j for j, h in enumerate(head) if re.search(r"efficienc", h, re.I)]
        eff_cols += [j for j, h in enumerate(head) if j - 1 in eff_cols and re.match(r"(measured|as run)$", h, re.I)]
        ratio_col = next((j for j, h in enumerate(head) if re.match(r"x\b|x ", h.strip())), None)
        ips_col = next((j for j, u in unit_cols.items() if u == "img/s"), None)
        base = None
        if ratio_col is not None and ips_col is not None:
            for r in rows:
                # the first 1.00 row: the one the table's ratios were computed against
                # (a later row near it prints 1.00 too, but is not the base)
                if base is None and len(r) > max(ratio_col, ips_col) and clean(r[ratio_col]).strip() == "1.00":
                    base = clean(r[ips_col]).split()[0]
        for r in rows:
            where = " | ".join(r[:3])
            for j, u in unit_cols.items():
                if j < len(r):   # "86.2 % / 514": the figure is the number that is not a percentage
                    cell = clean(r[j])
                    nums = [m.group(0) for m in re.finditer(NUM, cell) if not re.match(r"\s*%", cell[m.end():])]
                    if nums and nums[0] not in exempt:
                        report.figure(nums[0], u, figs.find(nums[0], u), "table row '%s'" % where)
            if base and ratio_col < len(r) and ips_col < len(r):
                rm = re.match(r"\s*(\d+\.\d+)", clean(r[ratio_col]))
                im = re.match(r"\s*(%s)" % NUM, clean(r[ips_col]))
                if rm and im:
                    report.ratio(rm.group(1), im.group(1), base, ratio_ok(rm.group(1), value(im.group(1)), value(base)),
                                 "table row '%s'" % where)
            for j in eff_cols:   # "37.6 %", "91.3 % of its own 1-rank step"
                m = PCT.match(clean(r[j]).strip()) if j < len(r) else None
                if m and m.group(1) not in exempt:
                    kind = efficiency_kind(head[j])
                    report.figure(m.group(1), "%", figs.find(m.group(1), "%", EFF_KEY, kind),
                                  "%s efficiency in table row '%s'" % (kind or "an", where))
            for j, cell in enumerate(r):   # prose in a cell of another column: "bf16 7112.24 img/s, ..."
                if j not in eff_cols:
                    check_percents(clean(cell), figs, exempt, report, "text in table row '%s'" % where)
                if j in unit_cols:
                    continue
                for m in RATE.finditer(clean(cell)):
                    if m.group(1) not in exempt:
                        report.figure(m.group(1), m.group(2), figs.find(m.group(1), m.group(2)),
                                      "text in table row '%s'" % where)
            for cell in r:   # the matrix form: "7182, 1.53x, 14139"
                m = re.match(r"\s*(%s)\*?, (\d+\.\d+)x, (\d+)" % NUM, clean(cell))
                if m and m.group(1) not in exempt:
                    report.figure(m.group(1), "img/s", figs.find(m.group(1), "img/s"), "matrix cell '%s'" % cell)
                    report.figure(m.group(3), "MiB", figs.find(m.group(3), "MiB"), "matrix cell '%s'" % cell)
                    ok = any(ratio_ok(m.group(2), value(m.group(1)), b) for b in figs.eager_base)
                    report.ratio(m.group(2), m.group(1), "PyTorch eager bf16 NHWC 256", ok, "matrix cell '%s'" % cell)


def check_prose(text, figs, exempt, report):
    prose = "\n".join(ln for ln in text.splitlines() if not ln.lstrip().startswith("|"))
    for m in RATE.finditer(prose):
        if m.group(1) not in exempt:
            report.figure(m.group(1), m.group(2), figs.find(m.group(1), m.group(2)), "prose")
    check_percents(prose, figs, exempt, report, "prose")
    for s in sentences(prose):
        ratios = list(RATIO.finditer(s))
        for i, r in enumerate(ratios):
            # the operands belong to this ratio: after it and before the next one, or right before it
            end = ratios[i + 1].start() if i + 1 < len(ratios) else len(s)
            pair = PAIR_AFTER.match(s, r.end(), end) or PAIR_BEFORE.search(s[:r.start()])
            if pair:
                a, b = pair.group(1), pair.group(2)
                report.ratio(r.group(1), a, b, ratio_ok(r.group(1), value(a), value(b)),
                             "'%s'" % " ".join(s.split())[:140])


class Report:
    def __init__(self, page, verbose):
        self.page, self.verbose, self.bad, self.n = page, verbose, 0, 0

    def figure(self, text, unit, key, where):
        self.n += 1
        if key is None:
            self.bad += 1
            print("%s: NOT FOUND %s %s (%s): no summary figure of the runs rounds to it" % (self.page, text, unit, where))
        elif self.verbose:
            print("%s: ok %s %s = %s" % (self.page, text, unit, key))

    def ratio(self, r, a, b, ok, where):
        self.n += 1
        if not ok:
            self.bad += 1
            q = value(a) / value(b) if not isinstance(b, str) or re.match(NUM, b) else float("nan")
            print("%s: WRONG ratio %sx for %s / %s%s (%s)" % (
                self.page, r, a, b, (" = %.4g" % q) if q == q else "", where))
        elif self.verbose:
            print("%s: ok ratio %sx = %s / %s" % (self.page, r, a, b))


def check_page(path, runs, verbose=False, h5files=()):
    text = open(path).read()
    exempt = set()
    for block in EXEMPT.findall(text):
        exempt |= set(re.findall(NUM, block))
    text_wo = EXEMPT.sub("", text)
    figs = Figures(runs, h5files)
    rep = Report(os.path.basename(path), verbose)
    check_tables(text_wo.splitlines(), figs, exempt, rep)
    check_prose(text_wo, figs, exempt, rep)
    print("%s: %d figures checked against %d run(s), %d NOT FOUND or WRONG" % (rep.page, rep.n, len(runs), rep.bad))
    return rep.bad == 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("pages", nargs="+")
    ap.add_argument("--runs", nargs="+", required=True, help="run directories holding summary.tsv")
    ap.add_argument("--h5", nargs="*", default=[], help="results files whose scaling tables' percentages count too")
    ap.add_argument("-v", "--verbose", action="store_true", help="list every figure and what it matched")
    a = ap.parse_args(argv)
    for r in a.runs:
        if not os.path.isfile(os.path.join(r, "summary.tsv")):
            print("check_pages: error: %s has no summary.tsv (bench/summary/make_summary.py %s)" % (r, r))
            return 2
    ok = all([check_page(p, a.runs, a.verbose, a.h5) for p in a.pages])
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
