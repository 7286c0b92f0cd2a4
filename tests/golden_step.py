#!/usr/bin/env python3
"""golden_step.py: ctest driver that checks `trainbench step` against PyTorch.

  golden_step.py --trainbench BIN --model resnet18 --classes 10 --batch 4 \\
      --height 64 --width 64 --steps 3 --lr 0.01 --momentum 0.9 \\
      --weight-decay 5e-4 --seed 72 --workdir DIR \\
      [--compute-dtype float64] [--chain own|ref] [--floor] [--threads N]

1. runs gen_golden.py into DIR (ckpt0.h5, batch{k}.h5, ref{k}.h5, args.json,
   and floor{k}.h5 with --floor);
2. runs `BIN step` K times with the step flags of args.json and --backend cpu:
     --chain own  (default) from trainbench's OWN outputs:
                  ckpt0.h5 -> out1.h5 -> out2.h5 -> ...; a step that fails
                  to run ends the chain
     --chain ref  teacher forcing: step k starts from the REFERENCE state
                  before it (ckpt0.h5 for step 1, ref{k-1}.h5 after), so each
                  step is checked on its own and errors do not accumulate;
                  every step runs
3. compares out{k}.h5 with ref{k}.h5 after each step (compare_h5.py), with
   --floor also under the floor rule: a tensor outside the elementwise rule
   passes when its max abs error is at most --floor-factor times PyTorch
   float32's own (floor{k}.h5; needs --compute-dtype float64 --chain ref).

The two uses (tests/golden.cmake):
  exact semantics:  trainbench_fp64 (double inside, float32 files), float64
                    references, --chain own, rtol 1e-6 / atol_scale 1e-7
  float32 path:     trainbench, float64 references, --chain ref --floor,
                    rtol 1e-4 / atol_scale 1e-4, floor factor 4

Every command is printed before it runs. Exit 0 only if all K comparisons
pass, 1 otherwise, 77 (ctest: skipped) when torch/torchvision/h5py/numpy are
missing from this interpreter or --trainbench is empty (binary target not
defined in this build). The .h5 files (about 0.45 GB for resnet18 and 0.95 GB
for resnet50 at 3 steps; about twice that with --floor, plus trainbench's
outputs) are deleted when everything passes, unless --keep; on failure they
stay in DIR (a passed step's trainbench output and floor file are removed
as soon as they are no longer needed).
"""
import argparse
import glob
import json
import os
import shlex
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SKIP = 77


def run(cmd):
    print("+ " + shlex.join(cmd), flush=True)
    t0 = time.time()
    rc = subprocess.run(cmd).returncode
    print("# exit %d after %.1f s" % (rc, time.time() - t0), flush=True)
    return rc


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trainbench", required=True,
                    help="path of the trainbench binary (empty: skip, the target is not in this build)")
    ap.add_argument("--workdir", required=True, help="directory for fixtures and outputs (created)")
    ap.add_argument("--threads", type=int, default=0, help="pass --threads N to trainbench (0: don't)")
    ap.add_argument("--chain", choices=("own", "ref"), default="own",
                    help="step k starts from trainbench's out{k-1}.h5 (own, default) or from the "
                         "reference ref{k-1}.h5 (ref: teacher forcing)")
    ap.add_argument("--floor", action="store_true",
                    help="gen_golden.py --floor, and compare with the floor rule "
                         "(needs --compute-dtype float64 and --chain ref)")
    ap.add_argument("--floor-factor", type=float, default=None,
                    help="compare_h5 floor factor (default: compare_h5's)")
    ap.add_argument("--rtol", type=float, default=None, help="compare_h5 rtol (default: compare_h5's)")
    ap.add_argument("--atol-scale", type=float, default=None,
                    help="compare_h5 atol_scale (default: compare_h5's)")
    ap.add_argument("--only-failures", action="store_true", help="print only failing rows of each table")
    ap.add_argument("--keep", action="store_true", help="keep the .h5 files even when everything passes")
    ap.add_argument("--step-arg", action="append", default=[], metavar="ARG",
                    help="extra argument appended to every `trainbench step` command (repeatable; "
                         "e.g. --step-arg=--momentum --step-arg=0.8 to see the test fail)")
    gen = ap.add_argument_group("generator (passed to gen_golden.py)")
    gen.add_argument("--model", required=True)
    for name in ("--classes", "--batch", "--height", "--width", "--steps", "--seed"):
        gen.add_argument(name, type=int, required=True)
    for name in ("--lr", "--momentum", "--weight-decay"):
        gen.add_argument(name, type=float, required=True)
    gen.add_argument("--nesterov", action="store_true")
    gen.add_argument("--label-smoothing", type=float, default=0.0)
    gen.add_argument("--compute-dtype", choices=("float32", "float64"), default="float32")
    gen.add_argument("--torch-threads", type=int, default=0,
                     help="gen_golden.py --torch-threads (0: torch's default)")
    gen.add_argument("--floor-variants", default=None, help="gen_golden.py --floor-variants")
    a = ap.parse_args(argv)
    if a.floor and (a.compute_dtype != "float64" or a.chain != "ref"):
        ap.error("--floor needs --compute-dtype float64 and --chain ref (the floor is PyTorch float32 "
                 "started from the reference state)")

    try:
        import numpy, h5py, torch, torchvision   # noqa: F401  (presence check only)
    except ImportError as e:
        print("SKIP: golden_step needs torch, torchvision, h5py and numpy in %s (%s)" % (sys.executable, e))
        return SKIP
    if not a.trainbench:
        print("SKIP: golden_step: no binary given (--trainbench is empty: its target is not defined in "
              "this build)")
        return SKIP
    sys.dont_write_bytecode = True
    sys.path.insert(0, HERE)
    import compare_h5

    if not (os.path.isfile(a.trainbench) and os.access(a.trainbench, os.X_OK)):
        print("golden_step: error: trainbench binary not found or not executable: %r" % a.trainbench)
        return 1
    os.makedirs(a.workdir, exist_ok=True)
    for stale in glob.glob(os.path.join(a.workdir, "*.h5")):
        os.remove(stale)

    gen_cmd = [sys.executable, os.path.join(HERE, "gen_golden.py"), "--model", a.model]
    for flag in ("classes", "batch", "height", "width", "steps", "lr", "momentum", "weight_decay",
                 "label_smoothing", "seed", "torch_threads"):
        gen_cmd += ["--" + flag.replace("_", "-"), repr(getattr(a, flag))]
    if a.nesterov:
        gen_cmd.append("--nesterov")
    gen_cmd += ["--compute-dtype", a.compute_dtype]
    if a.floor:
        gen_cmd.append("--floor")
        if a.floor_variants:
            gen_cmd += ["--floor-variants", a.floor_variants]
    gen_cmd += ["--out", a.workdir]
    if run(gen_cmd) != 0:
        print("golden_step: error: gen_golden.py failed")
        return 1
    with open(os.path.join(a.workdir, "args.json")) as f:
        info = json.load(f)

    rtol = compare_h5.DEFAULT_RTOL if a.rtol is None else a.rtol
    atol_scale = compare_h5.DEFAULT_ATOL_SCALE if a.atol_scale is None else a.atol_scale
    floor_factor = compare_h5.DEFAULT_FLOOR_FACTOR if a.floor_factor is None else a.floor_factor
    results, stats = [], []
    prev = os.path.join(a.workdir, "ckpt0.h5")
    for k in range(1, a.steps + 1):
        if a.chain == "ref" and k > 1:
            prev = os.path.join(a.workdir, "ref%d.h5" % (k - 1))
        out = os.path.join(a.workdir, "out%d.h5" % k)
        cmd = [a.trainbench, "step", "--ckpt", prev, "--batch", os.path.join(a.workdir, "batch%d.h5" % k),
               "--out", out] + info["step_args"] + ["--backend", "cpu"]
        if a.threads > 0:
            cmd += ["--threads", str(a.threads)]
        cmd += a.step_arg
        rc = run(cmd)
        if rc != 0 or not os.path.isfile(out):
            print("golden_step: FAIL: step %d: trainbench exited %d%s%s"
                  % (k, rc, "" if os.path.isfile(out) else " and wrote no " + out,
                     "; the chain stops here" if a.chain == "own" else ""))
            results.append(False)
            stats.append(None)
            if a.chain == "own":
                break
            continue
        st = {}
        floor = os.path.join(a.workdir, "floor%d.h5" % k) if a.floor else None
        ok = compare_h5.compare_files(out, os.path.join(a.workdir, "ref%d.h5" % k), rtol, atol_scale,
                                      a.only_failures, floor_path=floor, floor_factor=floor_factor, stats=st)
        results.append(ok)
        stats.append(st)
        sys.stdout.flush()
        if ok and not a.keep:   # disk: what a passed step leaves behind is no longer needed
            done = [floor] if floor else []
            if a.chain == "own" and k > 1:
                done.append(prev)                       # out{k-1}.h5: step k has read it
            elif a.chain == "ref":
                done.append(out)
            for path in done:
                os.remove(path)
        prev = out

    # one line per step: worst max_rel_err per class of trainbench (and of the floor)
    print("# golden_step: %s, chained from %s, %s references%s; rtol %g, atol_scale %g%s"
          % (a.trainbench, "its own outputs" if a.chain == "own" else "the references (teacher forcing)",
             a.compute_dtype, "" if not a.floor else " with the PyTorch float32 floor",
             rtol, atol_scale, "" if not a.floor else ", floor factor %g" % floor_factor))
    for k, (ok, st) in enumerate(zip(results, stats), 1):
        if st is None:
            print("#   step %d: FAIL (trainbench did not run through)" % k)
            continue
        line = "#   step %d: %s: %d datasets, %d failed" % (k, "ok" if ok else "FAIL", st["datasets"], st["failed"])
        if a.floor:
            line += ", %d by the elementwise rule, %d only by the floor rule; floor outside the rule on %d" % (
                st["by_rule"], st["by_floor"], st["floor_outside"])
        print(line)
        print("#     trainbench worst max_rel_err: " + ", ".join("%s %.2e" % (g, v) for g, v in sorted(st["worst"].items())))
        if a.floor:
            print("#     floor      worst max_rel_err: " + ", ".join(
                "%s %.2e" % (g, v) for g, v in sorted(st["worst_floor"].items())))
    passed = len(results) == a.steps and all(results)
    print("# golden_step: %s %s: %s (%s)" % (a.model, "x".join(map(str, (a.batch, 3, a.height, a.width))),
          "PASS" if passed else "FAIL",
          ", ".join("step %d %s" % (i + 1, "ok" if r else "FAIL") for i, r in enumerate(results))))
    if passed and not a.keep:
        for path in glob.glob(os.path.join(a.workdir, "*.h5")):
            os.remove(path)
        print("# golden_step: removed the .h5 files in %s (--keep keeps them)" % a.workdir)
    elif not passed:
        print("# golden_step: files kept in %s" % a.workdir)
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
