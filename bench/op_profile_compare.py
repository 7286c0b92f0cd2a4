#!/usr/bin/env python3
"""op_profile_compare.py: trainbench's --op-profile beside PyTorch's profile
of the same step, by op category (bench/op_kinds.py), as a markdown table
for the GPU bench's resnet50.md.

  op_profile_compare.py --tb-log tb_profile.log --torch-json torch_profile.jsonl

--tb-log: a trainbench train log holding the `# op profile: ...` table by
op kind and its `# covered:` line (no h5py needed: the GPU machine has
none). --torch-json: bench/torch_resnet50.py --profile-json's file (its last
line is used). Either may be missing or lack a profile: that side is
printed as '-'. Exit 0 when at least one side had a profile, 1 (one line) otherwise.
"""
import argparse
import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import op_kinds  # noqa: E402

TITLE = re.compile(r"^# op profile: (\d+) eager steps? after training, batch (\d+) per rank, (\S+) (\S+) on (\S+);")
KIND_ROW = re.compile(r"^  ([a-z_]+)\s+([0-9.]+)\s+([0-9.]+|-)\s+([0-9.]+)(\s+[0-9.]+)?\s*$")
COVERED = re.compile(r"^# covered: ([0-9.]+) ms of ([0-9.]+) ms step")


def read_tb(path):
    """{"kinds": {kind: (ms, calls)}, "ops_ms", "step_ms", "title"} or None."""
    if not path or not os.path.exists(path):
        return None
    out, inside = None, False
    with open(path, errors="replace") as f:
        for ln in f:
            ln = ln.rstrip("\n")
            m = TITLE.match(ln)
            if m:
                out = {"kinds": {}, "ops_ms": None, "step_ms": None,
                       "title": f"{m.group(1)} eager steps after the timed ones, {m.group(3)} {m.group(4)} batch "
                                f"{m.group(2)} on {m.group(5)} (events around each op)"}
                inside = True
                continue
            if out is None:
                continue
            if inside and ln.startswith("# op profile: the"):
                inside = False
            k = KIND_ROW.match(ln)
            if inside and k:
                out["kinds"][k.group(1)] = (float(k.group(2)), float(k.group(4)))
            c = COVERED.match(ln)
            if c:
                out["ops_ms"], out["step_ms"] = float(c.group(1)), float(c.group(2))
    return out if out and out["kinds"] else None


def read_torch(path):
    if not path or not os.path.exists(path):
        return None
    lines = [ln for ln in open(path).read().splitlines() if ln.strip()]
    for ln in reversed(lines):
        try:
            d = json.loads(ln)
        except ValueError:
            continue
        if "by_category" in d:
            return d
    return None


def fmt(v, d=3):
    return "-" if v is None else f"{v:.{d}f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tb-log")
    ap.add_argument("--torch-json")
    a = ap.parse_args()
    tb, pt = read_tb(a.tb_log), read_torch(a.torch_json)
    if not tb and not pt:
        print(f"No op profile from either side: neither {a.tb_log} nor {a.torch_json} holds one (see the logs).")
        sys.exit(1)
    print("**Where the step's time goes: trainbench --op-profile beside torch.profiler, ms per step**")
    print()
    print(f"trainbench: {tb['title'] if tb else 'no op profile (see its log)'}. "
          f"PyTorch: {pt['profile_steps']} steps under torch.profiler, {pt['source']}, {pt['mode']} "
          f"{pt['precision']} {pt['layout']} batch {pt['batch']}." if pt else
          f"trainbench: {tb['title']}. PyTorch: no profile (see its log).")
    print("Categories: bench/op_kinds.py (PyTorch kernels mapped by name; its `other` holds what no pattern "
          "matched, listed below).")
    print()
    print("| category | trainbench ms | PyTorch ms | trainbench / PyTorch | trainbench kinds | PyTorch top kernel |")
    print("|---|---:|---:|---:|---|---|")
    tb_cat, tb_kinds = {}, {}
    if tb:
        for kind, (ms, _calls) in tb["kinds"].items():
            cat = op_kinds.TB_KIND_TO_CATEGORY.get(kind, "other")
            tb_cat[cat] = tb_cat.get(cat, 0.0) + ms
            tb_kinds.setdefault(cat, []).append(kind)
    pt_cat = {c: v["ms_per_step"] for c, v in (pt["by_category"].items() if pt else [])}
    for cat in op_kinds.CATEGORIES:
        if cat not in tb_cat and cat not in pt_cat:
            continue
        x, y = tb_cat.get(cat), pt_cat.get(cat)
        ratio = f"{x / y:.2f}" if x is not None and y else "-"
        top = pt["by_category"][cat]["top"][0][0][:70].replace("|", "/") if pt and cat in pt_cat and \
            pt["by_category"][cat]["top"] else ""
        print(f"| {cat} | {fmt(x)} | {fmt(y)} | {ratio} | {', '.join(tb_kinds.get(cat, []))} | `{top}` |"
              if top else f"| {cat} | {fmt(x)} | {fmt(y)} | {ratio} | {', '.join(tb_kinds.get(cat, []))} | |")
    xs = tb["ops_ms"] if tb and tb["ops_ms"] is not None else (sum(tb_cat.values()) if tb else None)
    ys = pt["ms_per_step_ops"] if pt else None
    # the two shares issue 30 reads: every convolution, and BatchNorm with the
    # element-wise work (trainbench folds ReLU and the residual add into its
    # BatchNorm kinds where it fuses them; PyTorch runs them as element-wise
    # kernels): ms and % of each side's sum of ops
    for label, cats in (("all convolutions", ["conv_fwd", "conv_dgrad", "conv_wgrad", "conv_bwd", "conv_gemm"]),
                        ("BatchNorm + element-wise", ["bn_fwd", "bn_bwd", "elementwise"])):
        gx = sum(tb_cat.get(c, 0.0) for c in cats) if tb else None
        gy = sum(pt_cat.get(c, 0.0) for c in cats) if pt else None
        sx = f" ({100 * gx / xs:.1f} %)" if gx is not None and xs else ""
        sy = f" ({100 * gy / ys:.1f} %)" if gy is not None and ys else ""
        print(f"| *{label}* (% of ops) | {fmt(gx)}{sx} | {fmt(gy)}{sy} | "
              f"{f'{gx / gy:.2f}' if gx and gy else '-'} | {', '.join(cats)} | |")
    print(f"| **sum of ops** | {fmt(xs)} | {fmt(ys)} | {f'{xs / ys:.2f}' if xs and ys else '-'} | | |")
    xstep = tb["step_ms"] if tb else None
    ystep = pt["ms_per_step_timed"] if pt else None
    print(f"| **step** | {fmt(xstep)} | {fmt(ystep)} | {f'{xstep / ystep:.2f}' if xstep and ystep else '-'} | "
          f"profiled step, eager | timed steps, no profiler |")
    # each side against a step measured the same way as its ops: trainbench's
    # profiled step; PyTorch's wall time under the profiler (its timed step
    # without the profiler can be shorter than the ops' sum under it)
    gap_x = xstep - xs if xstep is not None and xs is not None else None
    ywall = pt["ms_per_step_profiled_wall"] if pt else None
    gap_y = ywall - ys if ywall is not None and ys is not None else None
    print(f"| not in an op | {fmt(gap_x)} | {fmt(gap_y)} | | waits, idle device, event records | "
          f"against the wall time under the profiler ({fmt(ywall)} ms): launch gaps, host-bound stretches |")
    print()
    if pt and pt.get("unmatched"):
        print("PyTorch kernels no pattern matched (in `other`; fix bench/op_kinds.py), largest first:")
        print()
        for name, ms, calls in pt["unmatched"]:
            print(f"- {ms:.3f} ms/step, {calls:.0f} calls/step: `{name[:200]}`")
        print()
    if pt:
        print("PyTorch's top kernels per category (to check the mapping):")
        print()
        for cat in op_kinds.CATEGORIES:
            v = pt["by_category"].get(cat)
            if v:
                tops = "; ".join(f"`{n[:90]}` {ms:.3f}" for n, ms in v["top"])
                print(f"- {cat}: {tops}")
        print()
    sys.exit(0 if tb or pt else 1)


if __name__ == "__main__":
    main()
