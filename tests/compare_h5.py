#!/usr/bin/env python3
"""compare_h5.py: compare a `trainbench step` output file against a reference.

  compare_h5.py OUT.h5 REF.h5 [--rtol 1e-4] [--atol-scale 1e-5] [--only-failures]
               [--floor FLOOR.h5 [--floor-factor 4]]

Compares every dataset in the two files (/loss, /logits, /grads/*, /params/*
with the BN running statistics, /momentum/*) and the root attributes `step`,
`model` and `classes`. The SET of dataset names must be identical: a name in
only one file is a failure. Dtype and shape must match exactly.

Rule, elementwise for one tensor:  |out - ref| <= atol + rtol*|ref|
  with atol = atol_scale * max|ref| over that tensor;
  integer datasets (num_batches_tracked) must be exactly equal; NaN fails.

With --floor FLOOR.h5 (a file with REF's layout holding another
implementation's result for the same step, e.g. PyTorch float32 when REF is
the float64 truth: gen_golden.py --floor), a floating tensor also passes when
  max_abs_err <= floor_factor * floor_err,  floor_err = max|floor - ref|
i.e. OUT is no worse than floor_factor times that implementation's own
error, even where the elementwise rule fails (a ReLU input within rounding of
zero flips sign between float32 implementations). Integers stay exact. FLOOR
must hold every dataset of REF, and the same step/model/classes attributes.

Prints a fixed-width table (header and summary lines start with `#`):
  name, shape, max|ref|, max_abs_err, max_rel_err (= max_abs_err / max|ref|),
  #wrong (elements outside the rule), [with --floor: floor_err,
  max_abs_err/floor_err, the floor's own #wrong under the rule], result
  ("ok", "ok (floor)" when only the floor rule let it pass, or "FAIL").
Exit status: 0 when everything passes, 1 otherwise (2 for usage errors).

Other scripts use it as a module:
  compare_files(out, ref, rtol, atol_scale, floor_path=None, floor_factor=4);
  compare_tensor(...) for one array; and the per-tensor bound rule of the
  float32 golden tests (golden_step.py --floor), on arrays:
    bound_row(name, out, ref, floor_err, factor=10, rel=1e-4, cap=0.5): passes
      when max|out - ref| <= min(factor * floor_err + rel * max|ref|,
      cap * max|ref|) (integers exact)
    l2_row(name, out, ref, floor_rel, factor, rel, cap): the same on the
      relative L2 error ||out - ref|| / ||ref|| (the 16-bit rule)
    print_bound_table(rows, title): the tensors nearest their bound, worst
      first, with err/floor and err/bound, and the worst per tensor class.
  The cap is what keeps every bound able to fail: a tensor that is all zero
  (err = max|ref|, or relative L2 error 1) is outside it whatever the floor.
"""
import argparse
import sys

import h5py
import numpy as np

DEFAULT_RTOL = 1e-4
DEFAULT_ATOL_SCALE = 1e-5
DEFAULT_FLOOR_FACTOR = 4.0
CHECKED_ATTRS = ("step", "model", "classes")


def dataset_names(f):
    names = []
    f.visititems(lambda name, obj: names.append(name) if isinstance(obj, h5py.Dataset) else None)
    return set(names)


def attr_value(f, key):
    v = f.attrs.get(key)
    if isinstance(v, bytes):             # fixed-length strings come back as bytes
        v = v.decode("utf-8")
    if isinstance(v, np.ndarray) and v.size == 1:
        v = v.reshape(()).item()
    if isinstance(v, np.generic):
        v = v.item()
    if isinstance(v, bytes):
        v = v.decode("utf-8")
    return v


def group_of(name):
    """Tensor class used in the per-class summary: loss, logits, grads, params, momentum, ..."""
    top = name.split("/", 1)[0]
    if top == "params" and name.rsplit(".", 1)[-1] in ("running_mean", "running_var", "num_batches_tracked"):
        return "bn_stats"
    return top


class Row:
    def __init__(self, name, shape="", ref_max=float("nan"), abs_err=float("nan"),
                 rel_err=float("nan"), wrong=0, ok=False, note=""):
        self.name, self.shape, self.ref_max = name, shape, ref_max
        self.abs_err, self.rel_err, self.wrong, self.ok, self.note = abs_err, rel_err, wrong, ok, note
        self.floor_err = float("nan")   # max|floor - ref| (with --floor, floating tensors)
        self.floor_wrong = None         # the floor's own #wrong under the elementwise rule
        self.by_floor = False           # passed only because of the floor rule


def elementwise(out, r, rtol, atol_scale):
    """(#wrong, max_abs_err, max|ref|) of float64 arrays under the elementwise rule."""
    diff = np.abs(out - r)
    ref_max = float(np.max(np.abs(r)))
    atol = atol_scale * ref_max
    wrong = int(np.count_nonzero(~(diff <= atol + rtol * np.abs(r))))   # NaN counts as wrong
    abs_err = float(np.max(diff)) if np.all(np.isfinite(out)) else float("nan")
    return wrong, abs_err, ref_max


def compare_tensor(name, out, ref, rtol, atol_scale, floor=None, floor_factor=DEFAULT_FLOOR_FACTOR):
    """One dataset. floor: the floor file's array for it (None: no floor rule)."""
    shape = "x".join(str(d) for d in ref.shape) or "scalar"
    if out.dtype != ref.dtype:
        return Row(name, shape, note="dtype %s, expected %s" % (out.dtype, ref.dtype))
    if out.shape != ref.shape:
        return Row(name, shape, note="shape %s, expected %s" % (out.shape, ref.shape))
    if ref.dtype.kind in "iub":
        wrong = int(np.count_nonzero(out != ref))
        err = float(np.max(np.abs(out.astype(np.float64) - ref.astype(np.float64)))) if ref.size else 0.0
        ref_max = float(np.max(np.abs(ref.astype(np.float64)))) if ref.size else 0.0
        rel = err / ref_max if ref_max > 0 else (0.0 if err == 0 else float("inf"))
        return Row(name, shape, ref_max, err, rel, wrong, wrong == 0, "" if wrong == 0 else "must be exact")
    o = out.astype(np.float64)
    r = ref.astype(np.float64)
    if not np.all(np.isfinite(r)):
        return Row(name, shape, note="reference has NaN/Inf")
    if r.size == 0:
        return Row(name, shape, 0.0, 0.0, 0.0, 0, True)
    wrong, abs_err, ref_max = elementwise(o, r, rtol, atol_scale)
    if ref_max > 0:
        rel_err = abs_err / ref_max
    else:
        rel_err = 0.0 if abs_err == 0 else float("inf")
    note = "" if wrong == 0 else ("NaN/Inf in output" if not np.all(np.isfinite(o)) else "")
    row = Row(name, shape, ref_max, abs_err, rel_err, wrong, wrong == 0, note)
    if floor is not None:
        if floor.dtype != ref.dtype or floor.shape != ref.shape:
            row.ok, row.note = False, "floor file has %s %s, expected %s %s" % (
                floor.dtype, floor.shape, ref.dtype, ref.shape)
            return row
        fl = floor.astype(np.float64)
        row.floor_wrong, row.floor_err, _ = elementwise(fl, r, rtol, atol_scale)
        if not row.ok and abs_err == abs_err and row.floor_err == row.floor_err \
                and abs_err <= floor_factor * row.floor_err:
            row.ok, row.by_floor = True, True
    return row


def compare_files(out_path, ref_path, rtol=DEFAULT_RTOL, atol_scale=DEFAULT_ATOL_SCALE,
                  only_failures=False, stream=sys.stdout, floor_path=None,
                  floor_factor=DEFAULT_FLOOR_FACTOR, stats=None):
    """Compare OUT against REF (with the floor rule when floor_path is given), print
    the table to stream; True when everything passes. When stats is a dict it gets
    the summary numbers: datasets, failed, by_rule, by_floor, floor_outside (the
    floor's own datasets outside the elementwise rule), worst and worst_floor
    ({class: worst max_rel_err})."""
    def p(s=""):
        print(s, file=stream)

    rows = []
    attr_fail = []
    ff = h5py.File(floor_path, "r") if floor_path else None
    try:
        with h5py.File(out_path, "r") as fo, h5py.File(ref_path, "r") as fr:
            no, nr = dataset_names(fo), dataset_names(fr)
            nf = dataset_names(ff) if ff is not None else set()
            for name in sorted(no | nr):
                if name not in no:
                    rows.append(Row(name, note="missing in OUT"))
                elif name not in nr:
                    rows.append(Row(name, note="extra in OUT (not in REF)"))
                elif ff is not None and name not in nf:
                    rows.append(Row(name, note="missing in the floor file"))
                else:
                    floor = ff[name][()] if ff is not None else None
                    rows.append(compare_tensor(name, fo[name][()], fr[name][()], rtol, atol_scale,
                                               floor, floor_factor))
            for key in CHECKED_ATTRS:
                vo, vr = attr_value(fo, key), attr_value(fr, key)
                if vo != vr:
                    attr_fail.append("attribute %s: OUT %r, REF %r" % (key, vo, vr))
                if ff is not None and attr_value(ff, key) != vr:
                    attr_fail.append("attribute %s: floor file %r, REF %r (floor is for another step?)"
                                     % (key, attr_value(ff, key), vr))
    finally:
        if ff is not None:
            ff.close()

    w = max([len("name")] + [len(r.name) for r in rows])
    p("# compare_h5: OUT %s" % out_path)
    p("#             REF %s" % ref_path)
    if floor_path:
        p("#           FLOOR %s" % floor_path)
    p("# rule: |out-ref| <= atol + rtol*|ref| elementwise; rtol=%g, atol=atol_scale*max|ref| "
      "per tensor, atol_scale=%g; integers exact" % (rtol, atol_scale))
    p("# max_rel_err = max_abs_err / max|ref| of the tensor")
    head = "# %-*s %16s %12s %12s %12s %9s" % (w, "name", "shape", "max|ref|", "max_abs_err",
                                              "max_rel_err", "#wrong")
    if floor_path:
        p("# floor rule: a floating tensor outside the rule still passes when max_abs_err <= %g x "
          "floor_err, floor_err = max|floor-ref| (the floor's own error); result 'ok (floor)'" % floor_factor)
        p("# err/floor = max_abs_err / floor_err; floor_#wrong = the floor's elements outside the rule")
        head += " %12s %10s %12s" % ("floor_err", "err/floor", "floor_#wrong")
    p(head + "  result")
    for r in rows:
        if only_failures and r.ok and not r.by_floor:
            continue
        res = ("ok (floor)" if r.by_floor else "ok") if r.ok else "FAIL" + (" (%s)" % r.note if r.note else "")
        if r.shape and r.ref_max == r.ref_max:       # compared: print the numbers
            line = "  %-*s %16s %12.4e %12.4e %12.4e %9d" % (w, r.name, r.shape, r.ref_max, r.abs_err,
                                                           r.rel_err, r.wrong)
            if floor_path:
                if r.floor_wrong is None:             # integer: exact, no floor
                    line += " %12s %10s %12s" % ("-", "-", "-")
                else:
                    ratio = r.abs_err / r.floor_err if r.floor_err > 0 else \
                        (0.0 if r.abs_err == 0 else float("inf"))
                    line += " %12.4e %10.3g %12d" % (r.floor_err, ratio, r.floor_wrong)
            p(line + "  " + res)
        else:                                          # missing/extra/dtype/shape: nothing to measure
            line = "  %-*s %16s %12s %12s %12s %9s" % (w, r.name, r.shape or "-", "-", "-", "-", "-")
            if floor_path:
                line += " %12s %10s %12s" % ("-", "-", "-")
            p(line + "  " + res)
    # worst relative error per tensor class, to read tolerances off
    worst, worst_floor = {}, {}
    for r in rows:
        if r.shape and r.ref_max == r.ref_max:        # present in both files and measured
            g = group_of(r.name)
            rel = r.rel_err if r.rel_err == r.rel_err else float("inf")   # NaN -> inf
            worst[g] = max(worst.get(g, 0.0), rel)
            if r.floor_wrong is not None:
                frel = r.floor_err / r.ref_max if r.ref_max > 0 else 0.0
                worst_floor[g] = max(worst_floor.get(g, 0.0), frel)
    p("# worst max_rel_err by class: " + ", ".join("%s %.3e" % (g, worst[g]) for g in sorted(worst)))
    if floor_path:
        p("# worst floor max_rel_err (floor_err/max|ref|) by class: "
          + ", ".join("%s %.3e" % (g, worst_floor[g]) for g in sorted(worst_floor)))
    for msg in attr_fail:
        p("# FAIL %s" % msg)
    failed = [r for r in rows if not r.ok]
    missing = sum(1 for r in rows if r.note == "missing in OUT")
    extra = sum(1 for r in rows if r.note.startswith("extra"))
    ok = not failed and not attr_fail
    by_rule = sum(1 for r in rows if r.ok and not r.by_floor)
    by_floor = [r.name for r in rows if r.by_floor]
    floor_out = sum(1 for r in rows if r.floor_wrong)
    if floor_path:
        listed = (": " + " ".join(by_floor)) if 0 < len(by_floor) <= 12 else ""
        p("# floor: %d datasets passed by the elementwise rule, %d only by the floor rule (x%g)%s, %d failed; "
          "the floor itself is outside the elementwise rule on %d datasets"
          % (by_rule, len(by_floor), floor_factor, listed, len(failed), floor_out))
    p("# compare_h5: %s: %d datasets, %d failed (%d missing, %d extra), %d attribute mismatches"
      % ("PASS" if ok else "FAIL", len(rows), len(failed), missing, extra, len(attr_fail)))
    if stats is not None:
        stats.update(datasets=len(rows), failed=len(failed) + len(attr_fail), by_rule=by_rule,
                     by_floor=len(by_floor), floor_outside=floor_out, worst=worst, worst_floor=worst_floor)
    return ok


# ---- per-tensor bounds (golden_step.py's float32 rule) -----------------------------
# A tensor passes when  max|out - ref| <= min(factor * floor_err + rel * max|ref|,
# cap * max|ref|),  floor_err = PyTorch's own max error on that tensor against
# the same float64 truth (golden_step.py measures it in the test, on this
# machine). The cap (< 1) keeps the bound below the tensor's own scale, so a
# zeroed tensor always fails: where PyTorch's own error is a large share of a
# tensor (TF32's ReLU flips in small BatchNorm populations, 17 % of
# grads/layer2.0.conv2.weight on the H200) factor x floor_err alone exceeded
# the tensor's largest value.
DEFAULT_BOUND_FACTOR = 10.0
DEFAULT_BOUND_REL = 1e-4
DEFAULT_BOUND_CAP = 0.5


class BoundRow:
    def __init__(self, name, shape, ref_max, err, floor_err, bound, ok, note=""):
        self.name, self.shape, self.ref_max, self.err = name, shape, ref_max, err
        self.floor_err, self.bound, self.ok, self.note = floor_err, bound, ok, note

    def ratio(self, num, den):
        return num / den if den > 0 else (0.0 if num == 0 else float("inf"))

    @property
    def over_floor(self):
        return self.ratio(self.err, self.floor_err)

    @property
    def over_bound(self):
        return self.ratio(self.err, self.bound)


def max_abs_err(out, ref):
    """max|out - ref| in float64 (inf when out has NaN/Inf; 0 for empty)."""
    if np.size(ref) == 0:
        return 0.0
    d = np.abs(np.asarray(out, np.float64) - np.asarray(ref, np.float64))
    m = float(np.max(d))
    return m if m == m else float("inf")


def rel_l2_err(out, ref):
    """||out - ref|| / ||ref|| in float64 (inf for NaN/Inf; ||out - ref|| when ref is 0)."""
    if np.size(ref) == 0:
        return 0.0
    r = np.asarray(ref, np.float64).ravel()
    d = float(np.linalg.norm(np.asarray(out, np.float64).ravel() - r))
    if d != d or d == float("inf"):
        return float("inf")
    n = float(np.linalg.norm(r))
    return d / n if n > 0 else d


def _check_shape(name, out, ref):
    shape = "x".join(str(d) for d in np.shape(ref)) or "scalar"
    if np.shape(out) != np.shape(ref) or np.asarray(out).dtype != np.asarray(ref).dtype:
        return shape, BoundRow(name, shape, float("nan"), float("inf"), 0.0, 0.0, False,
                               "%s %s, expected %s %s" % (np.asarray(out).dtype, np.shape(out),
                                                          np.asarray(ref).dtype, np.shape(ref)))
    return shape, None


def bound_row(name, out, ref, floor_err, factor=DEFAULT_BOUND_FACTOR, rel=DEFAULT_BOUND_REL,
              cap=DEFAULT_BOUND_CAP):
    """One tensor under the bound rule (integers: exact). cap None: no cap."""
    ref = np.asarray(ref)
    out = np.asarray(out)
    shape, bad = _check_shape(name, out, ref)
    if bad:
        return bad
    ref_max = float(np.max(np.abs(ref.astype(np.float64)))) if ref.size else 0.0
    err = max_abs_err(out, ref)
    if ref.dtype.kind in "iub":
        return BoundRow(name, shape, ref_max, err, 0.0, 0.0, err == 0, "" if err == 0 else "must be exact")
    bound = factor * floor_err + rel * ref_max
    note = ""
    if cap is not None and bound > cap * ref_max:
        bound, note = cap * ref_max, "capped"
    return BoundRow(name, shape, ref_max, err, floor_err, bound, err <= bound, note)


def l2_row(name, out, ref, floor_rel, factor, rel, cap=DEFAULT_BOUND_CAP):
    """One tensor under the relative-L2 rule: ||out - ref|| / ||ref|| <= min(factor *
    floor_rel + rel, cap), floor_rel = PyTorch's own relative L2 error (integers:
    exact). ref_max holds ||ref||."""
    ref = np.asarray(ref)
    out = np.asarray(out)
    shape, bad = _check_shape(name, out, ref)
    if bad:
        return bad
    if ref.dtype.kind in "iub":
        err = max_abs_err(out, ref)
        return BoundRow(name, shape, float(np.max(np.abs(ref))) if ref.size else 0.0, err, 0.0, 0.0, err == 0,
                        "" if err == 0 else "must be exact")
    norm = float(np.linalg.norm(ref.astype(np.float64).ravel()))
    err = rel_l2_err(out, ref)
    bound, note = factor * floor_rel + rel, ""
    if cap is not None and bound > cap:
        bound, note = cap, "capped"
    return BoundRow(name, shape, norm, err, floor_rel, bound, err <= bound, note)


def print_bound_table(rows, title, top=12, stream=sys.stdout, cols=("max|ref|", "max_err", "floor_err")):
    """The `top` tensors nearest their bound (and every failing one), worst
    first, then the worst err/bound and err/floor per tensor class, and how
    many bounds the cap set. cols: the headers of the scale, error and
    floor columns (the L2 rule: ||ref||, rel_err, floor_rel)."""
    def p(s=""):
        print(s, file=stream)
    order = sorted(rows, key=lambda r: -r.over_bound)
    shown = [r for i, r in enumerate(order) if i < top or not r.ok]
    w = max([len("name")] + [len(r.name) for r in shown])
    p("# %s" % title)
    p("# %-*s %14s %11s %11s %11s %11s %9s %9s  result" % (
        (w, "name", "shape") + tuple(cols) + ("bound", "err/floor", "err/bnd")))
    for r in shown:
        p("  %-*s %14s %11.4e %11.4e %11.4e %11.4e %9.3g %9.3g  %s" % (
            w, r.name, r.shape, r.ref_max, r.err, r.floor_err, r.bound, r.over_floor, r.over_bound,
            ("ok" if r.ok else "FAIL") + (" (%s)" % r.note if r.note else "")))
    worst_b, worst_f = {}, {}
    for r in rows:
        g = group_of(r.name)
        worst_b[g] = max(worst_b.get(g, 0.0), r.over_bound)
        if r.floor_err == r.floor_err and r.bound > 0:
            worst_f[g] = max(worst_f.get(g, 0.0), r.over_floor)
    p("# worst err/bound by class: " + ", ".join("%s %.3g" % (g, worst_b[g]) for g in sorted(worst_b)))
    p("# worst err/floor by class: " + ", ".join("%s %.3g" % (g, worst_f[g]) for g in sorted(worst_f)))
    failed = [r for r in rows if not r.ok]
    capped = sum(1 for r in rows if r.note == "capped")
    p("# %d tensors, %d outside their bound%s" % (len(rows), len(failed),
      "; %d bound(s) set by the cap (PyTorch's own error alone reaches it)" % capped if capped else ""))
    return not failed


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", help="file to check (trainbench step --out)")
    ap.add_argument("ref", help="reference file (gen_golden.py ref{k}.h5)")
    ap.add_argument("--rtol", type=float, default=DEFAULT_RTOL,
                    help="relative tolerance per element (default %g)" % DEFAULT_RTOL)
    ap.add_argument("--atol-scale", type=float, default=DEFAULT_ATOL_SCALE,
                    help="atol = atol_scale * max|ref| of each tensor (default %g)" % DEFAULT_ATOL_SCALE)
    ap.add_argument("--only-failures", action="store_true",
                    help="print only the failing rows (and those passed by the floor rule)")
    ap.add_argument("--floor", metavar="FLOOR.h5",
                    help="file with REF's layout (e.g. gen_golden.py floor{k}.h5): a tensor also passes "
                         "when max_abs_err <= floor_factor * max|floor-ref|")
    ap.add_argument("--floor-factor", type=float, default=DEFAULT_FLOOR_FACTOR,
                    help="factor of the floor rule (default %g)" % DEFAULT_FLOOR_FACTOR)
    a = ap.parse_args(argv)
    if a.floor_factor <= 0 and a.floor:
        ap.error("--floor-factor must be > 0")
    try:
        ok = compare_files(a.out, a.ref, a.rtol, a.atol_scale, a.only_failures,
                           floor_path=a.floor, floor_factor=a.floor_factor)
    except OSError as e:
        print("compare_h5: error: %s" % e, file=sys.stderr)
        return 1
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
