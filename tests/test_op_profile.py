#!/usr/bin/python3
"""test_op_profile.py - `trainbench train --op-profile N` end to end on the
CPU backend: the run exits 0; the `#` tables are printed with every op kind
the graph implies; the results file's /op_profile has every graph node once
per phase it has (the nodes computed from the run's own --save checkpoint:
convs, BatchNorms and fc from the parameter names, torchvision's maxpool and
avgpool, and with --no-fuse the residual adds and ReLUs), each called once
per profiled step; calls per step by kind match the graph; all times >= 0;
the ops cover 50-105 % of the profiled steps' measured time; the timed
steps' time is printed and stored beside it (/ranks' rank 0, data wait left
out); and the run's own reporting
(the training line, /steps, the root attribute steps) has the same form as
a run without --op-profile, which has no /op_profile at all.

  test_op_profile.py --trainbench BIN [--mpiexec MPIRUN --ranks 2] [--extra "FLAGS"]
Exit 0 when every check holds, 1 otherwise, 77 without h5py."""
import argparse
import atexit
import math
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile

try:
    import h5py
except ImportError as e:
    print(f"SKIP: {e} (install python3-h5py)")
    sys.exit(77)

TRAINING = re.compile(r"^# training: (\d+) steps, loss \S+ -> \S+, ([0-9.]+) img/s \([0-9.]+ GFLOP/s\) over (\d+) "
                      r"timed steps$", re.M)
KIND_ROW = re.compile(r"^  ([a-z_]+)\s+([0-9.]+)\s+([0-9.]+|-)\s+([0-9.]+)(\s+[0-9.]+)?$")
COVERED = re.compile(r"^# covered: ([0-9.]+) ms of ([0-9.]+) ms step \(([0-9.]+) %\)", re.M)
BOTH = re.compile(r"^# profiled steps \(eager, an event pair per op\): ([0-9.]+) ms per step; the timed steps before "
                  r"them: ([0-9.]+) ms per step \((\d+) of (\d+) replayed from a CUDA graph\)$", re.M)
STAGES = {"labels", "images", "flips", "input", "step_scalars", "loss", "sgd", "gradients", "loss_scale", "weights",
          "weight_grads"}


def s(v):
    return v.decode() if isinstance(v, bytes) else str(v)


def run(cmd, env=None):
    print("$ " + " ".join(shlex.quote(c) for c in cmd))
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    return p.returncode, p.stdout + p.stderr


def expected_nodes(ckpt, fused):
    """{node name: [(phase, kind), ...]} from the checkpoint's parameter names."""
    with h5py.File(ckpt, "r") as f:
        params = {k: f["params"][k].shape for k in f["params"]}
    nodes = {}
    convs = sorted(k[:-len(".weight")] for k, shp in params.items() if k.endswith(".weight") and len(shp) == 4)
    bns = sorted(k[:-len(".running_mean")] for k in params if k.endswith(".running_mean"))
    for c in convs:
        nodes[c] = [("forward", "conv_fwd"), ("backward-filter", "conv_wgrad")]
        if c != "conv1":  # the stem reads the image: no input gradient
            nodes[c].append(("backward-data", "conv_dgrad"))
    for b in bns:
        nodes[b] = [("forward", "bn_fwd"), ("backward", "bn_bwd")]
    nodes["maxpool"] = [("forward", "maxpool_fwd"), ("backward", "maxpool_bwd")]
    nodes["avgpool"] = [("forward", "avgpool_fwd"), ("backward", "avgpool_bwd")]
    nodes["fc"] = [("forward", "linear_fwd"), ("backward", "linear_bwd")]
    if not fused:
        # each block's last BN takes the residual (torchvision: bn2 of a basic
        # block, bn3 of a bottleneck), then a ReLU; every other BN but the
        # downsample's is followed by a ReLU
        bottleneck = any(b.endswith(".bn3") for b in bns)
        last = ".bn3" if bottleneck else ".bn2"
        for b in bns:
            if b.startswith("layer") and b.endswith(last):
                nodes[b + ".residual"] = [("forward", "add_fwd"), ("backward", "add_bwd")]
            if not b.endswith("downsample.1"):
                nodes[b + ".relu"] = [("forward", "relu_fwd"), ("backward", "relu_bwd")]
    return nodes


def check(a, out, h5, ckpt, bad):
    steps_flag = a.steps
    m = TRAINING.search(out)
    if not m:
        bad.append("no '# training: ... img/s ... over K timed steps' line")
    elif int(m.group(1)) != steps_flag or int(m.group(3)) != steps_flag - a.warmup:
        bad.append(f"training line counts {m.group(1)} steps / {m.group(3)} timed, expected {steps_flag} / "
                   f"{steps_flag - a.warmup}: the profiled steps leaked into the run's timing")
    # the printed by-kind table
    printed = {}
    lines = out.splitlines()
    try:
        start = next(i for i, ln in enumerate(lines) if ln.startswith("# op profile:") and "eager step" in ln)
    except StopIteration:
        bad.append("no op profile table printed")
        start = len(lines)
    for ln in lines[start + 1:]:
        if ln.startswith("#") and "op profile: the" in ln:
            break
        km = KIND_ROW.match(ln)
        if km:
            printed[km.group(1)] = (float(km.group(2)), float(km.group(4)))
    cov = COVERED.search(out)
    if not cov:
        bad.append("no 'covered: X ms of Y ms step' line")
    with h5py.File(h5, "r") as f:
        if "op_profile" not in f or "op_profile_kinds" not in f:
            bad.append(f"results file lacks /op_profile or /op_profile_kinds: {list(f)}")
            return
        g, k = f["op_profile"], f["op_profile_kinds"]
        at = {key: g.attrs[key] for key in g.attrs}
        for key in ("steps", "batch", "precision", "layout", "backend", "ranks", "step_ms", "ops_ms", "span_ms",
                    "covered_pct"):
            if key not in at:
                bad.append(f"/op_profile lacks attribute {key}")
        if int(at.get("steps", -1)) != a.profile or int(at.get("batch", -1)) != a.batch:
            bad.append(f"/op_profile steps {at.get('steps')} batch {at.get('batch')}, expected {a.profile} {a.batch}")
        if int(at.get("ranks", -1)) != a.ranks:
            bad.append(f"/op_profile ranks {at.get('ranks')}, expected {a.ranks}")
        if s(at.get("precision")) != "fp32" or s(at.get("layout")) != "NCHW":
            bad.append(f"/op_profile precision/layout {at.get('precision')}/{at.get('layout')}")
        lens = {c: g[c].shape for c in g}
        if len({v for v in lens.values()}) != 1:
            bad.append(f"/op_profile columns differ in length: {lens}")
        names = [s(x) for x in g["name"][()]]
        phases = [s(x) for x in g["phase"][()]]
        kinds = [s(x) for x in g["kind"][()]]
        mean, mn, mx, calls = g["mean_ms"][()], g["min_ms"][()], g["max_rank_mean_ms"][()], g["calls"][()]
        rows = {}
        for i, key in enumerate(zip(names, phases, kinds)):
            if key in rows:
                bad.append(f"/op_profile row {key} appears twice")
            rows[key] = i
        for i in range(len(names)):
            if not (mean[i] >= 0 and mn[i] >= 0 and mn[i] <= mean[i] * (1 + 1e-9) + 1e-12):
                bad.append(f"{names[i]} {phases[i]}: mean {mean[i]} min {mn[i]}")
            if a.ranks > 1 and not (mx[i] >= mean[i] * (1 - 1e-12)):
                bad.append(f"{names[i]} {phases[i]}: max over ranks {mx[i]} < rank 0's {mean[i]}")
        nodes = expected_nodes(ckpt, fused="--no-fuse" not in a.extra)
        per_kind = {}
        for node, want in nodes.items():
            got = sorted((p, kd) for (n, p, kd) in rows if n == node)
            if got != sorted(want):
                bad.append(f"node {node}: rows {got}, expected {sorted(want)}")
            for p, kd in want:
                i = rows.get((node, p, kd))
                if i is not None and calls[i] != a.profile:
                    bad.append(f"node {node} {p}: {calls[i]} calls in {a.profile} steps")
                per_kind[kd] = per_kind.get(kd, 0) + 1
        params = set()
        with h5py.File(ckpt, "r") as c:
            params = set(c["params"])
        for (n, p, kd) in rows:
            if n not in nodes and n not in STAGES and n not in params:
                bad.append(f"row {n} {p} {kd}: neither a graph node, a parameter nor a stage of the step")
        # calls per step by kind: the graph's count (the results file and the printed table)
        kk = {s(x): i for i, x in enumerate(k["kind"][()])}
        for kd, want in per_kind.items():
            if kd not in kk:
                bad.append(f"kind {kd} missing from /op_profile_kinds")
                continue
            got = k["calls_per_step"][kk[kd]]
            if abs(got - want) > 1e-9:
                bad.append(f"{kd}: {got} calls per step, the graph has {want}")
            if kd not in printed:
                bad.append(f"kind {kd} not in the printed table")
            elif abs(printed[kd][1] - want) > 1e-9:
                bad.append(f"{kd}: printed {printed[kd][1]} calls per step, the graph has {want}")
        for kd in ("loss", "sgd", "upload"):
            if kd not in kk or kd not in printed:
                bad.append(f"kind {kd} missing")
        if set(printed) != set(kk):
            bad.append(f"printed kinds {sorted(printed)} != stored {sorted(kk)}")
        ksum = float(sum(k["mean_ms"][()]))
        if abs(ksum - at.get("ops_ms", math.nan)) > 1e-6 * (1 + ksum):
            bad.append(f"kinds sum {ksum} ms != ops_ms {at.get('ops_ms')}")
        if abs(float(sum(mean)) - ksum) > 1e-6 * (1 + ksum):
            bad.append(f"rows sum {sum(mean)} ms != kinds sum {ksum}")
        share = at.get("ops_ms", 0) / at.get("step_ms", 1)
        if not 0.5 <= share <= 1.05:
            bad.append(f"ops cover {100 * share:.1f} % of the step (expected 50-105 %)")
        if cov and abs(float(cov.group(3)) - 100 * share) > 0.1:
            bad.append(f"printed covered {cov.group(3)} %, file {100 * share:.2f} %")
        # both steps printed and stored: the profiled steps' own (what "covered"
        # divides by) and the timed steps' (rank 0's /ranks row, data wait left out)
        for key in ("timed_step_ms", "timed_steps", "timed_graph_steps"):
            if key not in at:
                bad.append(f"/op_profile lacks attribute {key}")
        rk = f["ranks"]
        want_timed = float(rk["step_ms"][0] - rk["data_ms"][0])
        if abs(at.get("timed_step_ms", math.nan) - want_timed) > 1e-9 * (1 + want_timed):
            bad.append(f"/op_profile timed_step_ms {at.get('timed_step_ms')}, /ranks rank 0 says {want_timed}")
        if int(at.get("timed_steps", -1)) != steps_flag - a.warmup or int(at.get("timed_graph_steps", -1)) != 0:
            bad.append(f"/op_profile timed_steps {at.get('timed_steps')} graph {at.get('timed_graph_steps')}, want "
                       f"{steps_flag - a.warmup} and 0 (no CUDA graph on the CPU)")
        both = BOTH.search(out)
        if not both:
            bad.append("no '# profiled steps (eager ...): X ms per step; the timed steps before them: Y ms' line")
        elif (abs(float(both.group(1)) - at.get("step_ms", math.nan)) > 1e-3 or
              abs(float(both.group(2)) - at.get("timed_step_ms", math.nan)) > 1e-3 or
              int(both.group(4)) != steps_flag - a.warmup or int(both.group(3)) != 0):
            bad.append(f"printed '{both.group(0)}' differs from the file's step_ms {at.get('step_ms')}, "
                       f"timed_step_ms {at.get('timed_step_ms')}")
        print(f"# {len(names)} rows, {len(kk)} kinds, {len(nodes)} graph nodes; ops {at.get('ops_ms'):.3f} ms of "
              f"{at.get('step_ms'):.3f} ms ({100 * share:.1f} %)")
        st = f["steps"]
        if st["step"].shape[0] != steps_flag or int(f.attrs["steps"]) != steps_flag:
            bad.append(f"/steps has {st['step'].shape[0]} rows, attribute steps {f.attrs['steps']}, expected "
                       f"{steps_flag}: the profiled steps leaked into the run's records")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--trainbench", required=True)
    ap.add_argument("--mpiexec")
    ap.add_argument("--ranks", type=int, default=1)
    ap.add_argument("--extra", default="", help="more train flags")
    ap.add_argument("--profile", type=int, default=2)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--batch", type=int, default=4)
    a = ap.parse_args()
    a.extra = shlex.split(a.extra)
    tmp = tempfile.mkdtemp(prefix="tb_opprof_")
    atexit.register(shutil.rmtree, tmp, True)  # removed at exit, passed or failed
    base = [a.trainbench, "--backend", "cpu", "--model", "resnet18", "--image-size", "32", "--batch-size",
            str(a.batch), "--steps", str(a.steps), "--warmup-steps", str(a.warmup), "--scaling-steps", "0",
            "--threads", "1", "--print-every", "100"] + a.extra
    launch = [a.mpiexec, "-n", str(a.ranks)] if a.ranks > 1 else []
    env = dict(os.environ)
    bad = []
    h5, ckpt = os.path.join(tmp, "prof.h5"), os.path.join(tmp, "prof.ckpt.h5")
    rc, out = run(launch + base + ["--op-profile", str(a.profile), "--results", h5, "--save", ckpt], env)
    print("\n".join(ln for ln in out.splitlines() if ln.startswith("# ") or "error" in ln)[-6000:])
    if rc != 0:
        print(f"FAIL: exit status {rc}")
        sys.exit(1)
    check(a, out, h5, ckpt, bad)
    # trainbench report prints the same tables from the file (exit 0: the
    # run asked for no scaling table, --scaling-steps 0)
    rr, rep = run([a.trainbench, "report", h5])
    if rr != 0:
        bad.append(f"trainbench report of a complete run: exit {rr}")
    for pat in (r"^# op profile: the \d+ slowest of \d+ ops", r"^  conv_fwd +[0-9.]+ +[0-9.]+ +\d+"):
        if not re.search(pat, rep, re.M):
            bad.append(f"trainbench report lacks /{pat}/")
    cr, cv = COVERED.search(rep), COVERED.search(out)
    if not cr or not cv or cr.groups() != cv.groups():
        bad.append(f"report's covered line {cr.group(0) if cr else None} != the run's {cv.group(0) if cv else None}")
    br, bv = BOTH.search(rep), BOTH.search(out)
    if not br or not bv or br.groups() != bv.groups():
        bad.append(f"report's steps line {br.group(0) if br else None} != the run's {bv.group(0) if bv else None}")
    # the same run without --op-profile: the same reporting, no profile anywhere
    h5b = os.path.join(tmp, "plain.h5")
    rc, outb = run(launch + base + ["--results", h5b], env)
    if rc != 0:
        bad.append(f"run without --op-profile: exit {rc}")
    else:
        if "op profile" in outb:
            bad.append("a run without --op-profile printed an op profile")
        mb, ma = TRAINING.search(outb), TRAINING.search(out)
        if not mb or not ma or (mb.group(1), mb.group(3)) != (ma.group(1), ma.group(3)):
            bad.append("the training line differs in form with and without --op-profile")
        with h5py.File(h5b, "r") as f, h5py.File(h5, "r") as g:
            if "op_profile" in f or "op_profile_kinds" in f:
                bad.append("a run without --op-profile wrote /op_profile")
            for grp in ("steps", "ranks"):
                if sorted(f[grp]) != sorted(g[grp]) or f[grp]["step" if grp == "steps" else "rank"].shape != \
                        g[grp]["step" if grp == "steps" else "rank"].shape:
                    bad.append(f"/{grp} differs in form with and without --op-profile")
    for b in bad:
        print("FAIL: " + b)
    print("ok" if not bad else f"{len(bad)} failures")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
