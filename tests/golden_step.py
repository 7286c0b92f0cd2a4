#!/usr/bin/env python3
"""golden_step.py: ctest driver that checks `trainbench step` against PyTorch.

  golden_step.py --trainbench BIN --model resnet50 --classes 7 --batch 2 \\
      --height 64 --width 48 --steps 3 --lr 0.01 --momentum 0.9 \\
      --weight-decay 1e-4 --nesterov --label-smoothing 0.1 --seed 24 \\
      --workdir DIR [--chain own|ref] [--floor] [--threads N] [--keep]

One process, step by step (gen_golden.build_model's random ResNet and
batches, the same as gen_golden.py writes): for step k it writes the
checkpoint trainbench starts from and batch k into DIR, computes the
float64 truth with PyTorch, runs `BIN step --backend cpu`, reads its output
and compares; then the step's files are deleted and the float64 state
moves on. The starting checkpoint of step k is

  --chain own  (default) trainbench's own output of step k-1 (its errors
               accumulate; the reference chain is PyTorch's own)
  --chain ref  the float64 truth after step k-1, rounded to float32
               (teacher forcing: every step is checked on its own)

Two rules:

  elementwise (default; the fp64 tests: trainbench_fp64 against PyTorch
      float64): |out - ref| <= atol_scale*max|ref| + rtol*|ref| per element
      (compare_h5.compare_tensor), integers exact.

  --floor (the float32 tests; needs --chain ref): per tensor,
      max|out - ref| <= floor_factor * floor_err + floor_rel * max|ref|
      where floor_err is PyTorch float32's own max error on that tensor,
      measured here: the step is run in the 8 PyTorch float32
      configurations of gen_golden.FLOOR_VARIANTS (oneDNN or native
      convolutions, NCHW or channels-last, 1 or 2 threads) and each is
      compared with the float64 step that made the SAME ReLU decisions
      (golden_torch.py: a ReLU input within rounding of zero goes either way
      in float32, and one such flip moves gradients by percents). Trainbench
      is compared with the float64 step with ITS ReLU decisions, found from
      its output (golden_flips.py); a flip is only accepted at a ReLU input
      within --flip-window times PyTorch float32's own largest error on that
      tensor. So both sides are held to rounding, on whatever CPU, BLAS and
      oneDNN kernels this machine picks; the flips are listed, and the
      comparison against the plain float64 truth is printed beside it.

      --floor-rule plain (the tf32 test) decides on that plain comparison
      instead: max|out - ref| against the float64 step as it is, bounded by
      floor_factor x PyTorch's own max error against the same step, its
      ReLU flips included. TF32 rounds every convolution input to 2^-11,
      so a step flips hundreds of ReLUs on both sides (PyTorch TF32 on an
      H200: 141 to 210 per step and variant); the flip search explains
      only some of trainbench's (55 to 205 found of 34000 candidates), and
      a flip it misses moves a gradient by percents. So the matched
      comparison measures the search, not trainbench: on the first H200
      run it put trainbench at up to 86x PyTorch's matched error while the
      plain comparison, each side with its own flips, put it at 1.6x
      PyTorch's own plain error at worst. The matched table is then
      printed for reading.

      Both bounds are capped: no bound exceeds --bound-cap (0.5; the tf32
      test 0.75) x max|ref|, so a zeroed tensor fails whatever PyTorch's
      own error (the plain TF32 bound exceeded max|ref| in 12 of the 36 rows
      the H200 re-run printed: 8 x an error of up to 24 % of the tensor).

  --floor-rule amp (the bf16 and fp16 tests; --floor-variants from
      gen_golden.AMP_FLOOR_VARIANTS, PyTorch autocast, float16 through
      GradScaler at --loss-scale): per tensor, the relative L2 error
      ||out - ref|| / ||ref|| against the plain float64 step, within
      floor_factor x PyTorch's own (the worse variant's) + floor_rel, and
      at most --bound-cap (0.75); and the median over the gradients of
      trainbench's error over PyTorch's at most --median (1.5). In 16 bits
      a step flips thousands of ReLUs and rounds every activation: its
      gradients sit 10-50 % from the float64 step, as far for PyTorch as
      for any correct implementation, so the relative L2 error (which a
      zeroed tensor puts at 1) is what can tell rounding from a bug; the
      median catches an error spread thinly over every tensor. The
      float64 step runs on --truth-device (cuda on the GPU tests). No
      flip search (it cannot explain thousands).

After the rule, every --floor step also checks (golden_rules.py): the
update, exactly (params and momentum = torch's SGD on trainbench's own
/grads and the state it started from, within float32 rounding, in every
precision: a wrong momentum, decay or loss scale fails it by orders of
magnitude), and planted errors the rule must catch (unless --no-plant): the
gradient with the loosest bound against its scale, zeroed, and from step 2
the output of a momentum 0.1 too low. A plant that passes fails the test.
A float16 step whose scaled gradients overflowed (trainbench's root
attribute skipped_steps) fails too.

Every command is printed before it runs. Exit 0 only if every step passes,
1 otherwise, 77 (ctest: skipped) when torch/torchvision/h5py/numpy are
missing from this interpreter or --trainbench is empty (the binary target is
not in this build). Disk: at most one step's files at a time (resnet50: the
checkpoint ~95 MB, trainbench's output ~285 MB); after a failed step only
its inputs (checkpoint and batch) stay, for the first failed step only, and
the summary says where and how to rerun; --keep keeps every file.
"""
import argparse
import glob
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


def read_h5(path):
    """({dataset path: array}, {step, model, classes}) of a `trainbench step` output."""
    import h5py
    import compare_h5
    out = {}
    with h5py.File(path, "r") as f:
        f.visititems(lambda n, o: out.__setitem__(n, o[()]) if isinstance(o, h5py.Dataset) else None)
        attrs = {key: compare_h5.attr_value(f, key) for key in ("step", "model", "classes")}
        for key in ("loss_scale", "skipped_steps"):   # float16 steps
            if key in f.attrs:
                attrs[key] = compare_h5.attr_value(f, key)
    return out, attrs


def remove(paths):
    for p in paths:
        if p and os.path.exists(p):
            os.remove(p)


def parse(argv):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trainbench", required=True,
                    help="path of the trainbench binary (empty: skip, the target is not in this build)")
    ap.add_argument("--workdir", required=True, help="directory for the step files (created)")
    ap.add_argument("--threads", type=int, default=0, help="pass --threads N to trainbench (0: don't)")
    ap.add_argument("--chain", choices=("own", "ref"), default="own",
                    help="step k starts from trainbench's output of step k-1 (own, default) or from "
                         "the float64 truth (ref: teacher forcing)")
    ap.add_argument("--floor", action="store_true",
                    help="the float32 rule: per-tensor bound from PyTorch float32's own error, ReLU "
                         "decisions matched (needs --compute-dtype float64 and --chain ref)")
    ap.add_argument("--floor-factor", type=float, default=None,
                    help="bound = floor_factor * floor_err + floor_rel * max|ref| (default 10)")
    ap.add_argument("--floor-rel", type=float, default=None, help="see --floor-factor (default 1e-4)")
    ap.add_argument("--floor-rule", choices=("matched", "plain", "amp"), default="matched",
                    help="--floor decides on the float64 step with trainbench's ReLU decisions "
                         "(matched, default) or on the plain float64 step against PyTorch's plain error "
                         "(plain: the tf32 test, where hundreds of ReLUs flip per step), or on relative L2 "
                         "errors against PyTorch autocast's (amp: the bf16 and fp16 tests)")
    ap.add_argument("--bound-cap", type=float, default=None,
                    help="no bound exceeds this share of its tensor's scale: max|ref| (default %g), or the "
                         "relative L2 error itself for --floor-rule amp (default %g); below 1, a zeroed "
                         "tensor always fails" % (0.5, 0.75))
    ap.add_argument("--median", type=float, default=1.5,
                    help="--floor-rule amp: the median over the gradients of trainbench's relative error over "
                         "PyTorch's may be at most this (default 1.5)")
    ap.add_argument("--truth-device", choices=("cpu", "cuda"), default="cpu",
                    help="where PyTorch computes the float64 step (--floor-rule amp; cuda on the GPU tests)")
    ap.add_argument("--loss-scale", type=float, default=0.0,
                    help="float16: the constant loss scale of both sides (trainbench step --loss-scale, "
                         "torch's GradScaler init_scale); 0: not passed")
    ap.add_argument("--no-plant", action="store_true",
                    help="skip the planted errors (a zeroed gradient, a wrong momentum) each step's rule "
                         "must catch")
    ap.add_argument("--flip-window", type=float, default=10.0,
                    help="a trainbench ReLU flip is accepted only at inputs within this many times "
                         "PyTorch float32's max error on that tensor of zero (default 10)")
    ap.add_argument("--rtol", type=float, default=None, help="elementwise rule rtol (default compare_h5's)")
    ap.add_argument("--atol-scale", type=float, default=None,
                    help="elementwise rule atol_scale (default compare_h5's)")
    ap.add_argument("--top", type=int, default=12, help="--floor: tensors listed per step (default 12)")
    ap.add_argument("--keep", action="store_true", help="keep every step's files")
    ap.add_argument("--step-arg", action="append", default=[], metavar="ARG",
                    help="extra argument appended to every `trainbench step` command (repeatable; "
                         "e.g. --step-arg=--momentum --step-arg=0.8 to see the test fail)")
    gen = ap.add_argument_group("the case (as gen_golden.py)")
    gen.add_argument("--model", required=True)
    for name in ("--classes", "--batch", "--height", "--width", "--steps", "--seed"):
        gen.add_argument(name, type=int, required=True)
    for name in ("--lr", "--momentum", "--weight-decay"):
        gen.add_argument(name, type=float, required=True)
    gen.add_argument("--nesterov", action="store_true")
    gen.add_argument("--label-smoothing", type=float, default=0.0)
    gen.add_argument("--residual-gamma", type=float, default=1.0,
                     help="scale of each block's last BatchNorm weight (gen_golden.build_model; 0.1 for the "
                          "16-bit tests: a well-conditioned step)")
    gen.add_argument("--compute-dtype", choices=("float32", "float64"), default="float32",
                     help="precision of the PyTorch reference")
    gen.add_argument("--torch-threads", type=int, default=0,
                     help="threads of the reference computation (0: torch's default)")
    gen.add_argument("--floor-variants", default="all",
                     help="PyTorch float32 configurations of the floor: 'all' (the CPU ones) or a "
                          "comma-separated subset of gen_golden.FLOOR_VARIANTS and CUDA_FLOOR_VARIANTS "
                          "(PyTorch on the GPU, e.g. cuda-tf32-nchw: the floor of a tf32 test)")
    a = ap.parse_args(argv)
    if a.floor and (a.compute_dtype != "float64" or a.chain != "ref"):
        ap.error("--floor needs --compute-dtype float64 and --chain ref (PyTorch float32 and trainbench "
                 "start each step from the float64 state)")
    if a.floor_rule != "matched" and not a.floor:
        ap.error("--floor-rule applies to --floor only")
    if a.bound_cap is None:
        a.bound_cap = 0.75 if a.floor_rule == "amp" else 0.5
    if not 0 < a.bound_cap < 1:
        ap.error("--bound-cap must lie in (0, 1): at 1 or more a zeroed tensor can pass")
    return a


class Case:
    """The model, its state between steps and the step flags."""

    def __init__(self, a):
        import torch
        from gen_golden import build_model, git_revision
        self.a = a
        a.git_revision = git_revision()
        if a.torch_threads > 0:
            torch.set_num_threads(a.torch_threads)
        self.template = build_model(a.model, a.classes, a.seed, a.residual_gamma)   # also seeds torch's RNG
        self.state = {n: t.detach().clone() for n, t in self.template.state_dict().items()}
        self.momentum = None
        self.dtype = torch.float64 if a.compute_dtype == "float64" else torch.float32
        self.step_args = ["--lr", repr(a.lr), "--momentum", repr(a.momentum),
                          "--weight-decay", repr(a.weight_decay)]
        if a.nesterov:
            self.step_args.append("--nesterov")
        if a.label_smoothing != 0:
            self.step_args += ["--label-smoothing", repr(a.label_smoothing)]
        if a.loss_scale > 0:
            self.step_args += ["--loss-scale", repr(a.loss_scale)]

    def next_batch(self):
        import torch
        images = torch.randn(self.a.batch, 3, self.a.height, self.a.width)   # float32
        labels = torch.randint(0, self.a.classes, (self.a.batch,), dtype=torch.int64)
        return images, labels

    def state_datasets(self):
        from gen_golden import as_array
        d = {"params/" + n: as_array(n, t) for n, t in self.state.items()}
        if self.momentum is not None:
            d.update({"momentum/" + n: as_array(n, t) for n, t in self.momentum.items()})
        return d

    def write_ckpt(self, path, step):
        from gen_golden import write_file
        write_file(path, self.a, step, self.state_datasets())

    def write_batch(self, path, images, labels):
        import h5py
        with h5py.File(path, "w") as f:
            f.create_dataset("images", data=images.numpy())
            f.create_dataset("labels", data=labels.numpy())

    def step(self, images, labels, dtype=None, **kw):
        from golden_torch import run_step
        return run_step(self.template, self.state, self.momentum, images, labels, self.a,
                        dtype or self.dtype, threads=self.a.torch_threads or None, **kw)

    def state_arrays(self):
        """({name: params before the step}, {name: momentum} or None), float64 numpy."""
        import numpy as np
        p = {n: np.asarray(t.numpy(), np.float64) for n, t in self.state.items() if t.is_floating_point()}
        m = None if self.momentum is None else {n: np.asarray(t.numpy(), np.float64)
                                                for n, t in self.momentum.items()}
        return p, m


def check_names_attrs(out, attrs, ref, k, a):
    """Problems with the dataset names and the step/model/classes attributes."""
    msgs = []
    for n in sorted(set(ref) - set(out)):
        msgs.append("%s missing in trainbench's output" % n)
    for n in sorted(set(out) - set(ref)):
        msgs.append("%s in trainbench's output but not in the reference" % n)
    want = {"step": k, "model": a.model, "classes": a.classes}
    for key, v in want.items():
        if attrs.get(key) != v:
            msgs.append("attribute %s is %r, expected %r" % (key, attrs.get(key), v))
    return msgs


def elementwise_step(out, ref, rtol, atol_scale):
    """The fp64 rule; prints failing tensors and the worst per class. True when all pass."""
    import compare_h5
    rows = [compare_h5.compare_tensor(n, out[n], ref[n], rtol, atol_scale) for n in sorted(ref) if n in out]
    worst = {}
    for r in rows:
        if not r.ok:
            print("  FAIL %-48s max_abs_err %.4e max_rel_err %.4e #wrong %d %s"
                  % (r.name, r.abs_err, r.rel_err, r.wrong, r.note))
        g = compare_h5.group_of(r.name)
        worst[g] = max(worst.get(g, 0.0), r.rel_err if r.rel_err == r.rel_err else float("inf"))
    print("# elementwise rule rtol %g, atol %g x max|ref|: worst max_rel_err by class: %s"
          % (rtol, atol_scale, ", ".join("%s %.3e" % (g, worst[g]) for g in sorted(worst))))
    bad = [r for r in rows if not r.ok]
    print("# %d tensors, %d failed" % (len(rows), len(bad)))
    return not bad


def floor_step(case, images, labels, out, o):
    """The float32 rule (matched) or the TF32 one (plain) for one step (see
    the module doc); o: factor, rel, cap, window, variants, top, rule."""
    import numpy as np
    import torch
    import compare_h5
    import golden_flips
    from golden_rules import Verdict
    from golden_torch import count_flips, describe_flips, flip_key, flips_between

    factor, rel, cap, rule = o.factor, o.rel, o.cap, o.rule
    t0 = time.time()
    base = case.step(images, labels, capture=True, grads=True)
    truth = base.tracker.pre
    names = sorted(base.datasets)
    floor = dict.fromkeys(names, 0.0)
    raw_floor = dict.fromkeys(names, 0.0)
    noise = [0.0] * len(truth)
    cache_key, cache_ref = None, None
    for v in o.variants:
        t1 = time.time()
        rv = case.step(images, labels, dtype=torch.float32, variant=v, capture=True)
        fl = flips_between(rv.tracker.pre, truth)
        for k, (x, t) in enumerate(zip(rv.tracker.pre, truth)):
            noise[k] = max(noise[k], float(np.max(np.abs(x - t))))
        key = flip_key(fl)
        if not key:
            ref = base.datasets
        elif key == cache_key:
            ref = cache_ref
        else:
            ref = case.step(images, labels, force=fl).datasets
            cache_key, cache_ref = key, ref
        for n in names:
            floor[n] = max(floor[n], compare_h5.max_abs_err(rv.datasets[n], ref[n]))
            raw_floor[n] = max(raw_floor[n], compare_h5.max_abs_err(rv.datasets[n], base.datasets[n]))
        print("#   PyTorch float32 %-15s %d ReLU flip(s) (%.1f s)" % (v, count_flips(fl), time.time() - t1),
              flush=True)
        del rv
    cache_ref = None
    bounds = {n: compare_h5.bound_row(n, base.datasets[n], base.datasets[n], floor[n], factor, rel, cap).bound
              for n in names}
    cands = golden_flips.candidates(truth, noise, o.window)
    params_before = {"params/" + n: t.numpy() for n, t in case.state.items()}
    rerun = lambda force: case.step(images, labels, force=force, capture=True, grads=True)  # noqa: E731
    flips, ref = golden_flips.explain(out, base, cands, bounds, params_before, rerun)
    print("# trainbench: %d ReLU flip(s) against the float64 step (%d candidates within %g x PyTorch "
          "float32's error of zero)" % (count_flips(flips), sum(len(v) for v in cands.values()), o.window))
    for line in describe_flips(flips, truth, base.tracker.bn, noise):
        print("#   " + line)

    def table(outd, which):
        if which == "matched":
            return [compare_h5.bound_row(n, outd[n], ref.datasets[n], floor[n], factor, rel, cap)
                    for n in names if n in outd]
        return [compare_h5.bound_row(n, outd[n], base.datasets[n], raw_floor[n], factor, rel, cap)
                for n in names if n in outd]
    matched, raw = table(out, "matched"), table(out, "plain")
    capped = "min(%g x floor_err + %g x max|ref|, %g x max|ref|)" % (factor, rel, cap)
    titles = {
        "matched": "against the float64 step with trainbench's ReLU decisions; bound = %s, floor_err = PyTorch "
                   "float32's max error with its own ReLU decisions" % capped,
        "plain": "against the plain float64 step (each side with its own ReLU flips); bound = %s, floor_err = "
                 "PyTorch's max error against that same step" % capped}
    # the rule's table decides; the other one is printed for reading
    rows, other, other_rule = (matched, raw, "plain") if rule == "matched" else (raw, matched, "matched")
    ok = compare_h5.print_bound_table(rows, titles[rule], o.top)
    by_floor = sorted((r for r in other if r.floor_err > 0), key=lambda r: -r.over_floor) or other
    other_out = sum(1 for r in other if not r.ok)
    print("# for reference, %s: %d tensors outside the same bound; worst err/floor: "
          % ("against the plain float64 step and PyTorch's plain error (no ReLU matched)" if other_rule == "plain"
             else "against the float64 step with trainbench's ReLU decisions (the flip search)", other_out)
          + ", ".join("%s %.3g" % (r.name, r.over_floor) for r in by_floor[:4]))
    worst = max(rows, key=lambda r: r.over_bound)
    worst_f = max((r for r in rows if r.bound > 0), key=lambda r: r.over_floor)
    summary = ("trainbench %d flip(s); %s rule: worst err/bound %.3g (%s), worst err/floor %.3g (%s); "
               "%s: %d outside, worst err/floor %.3g (%s); %.0f s"
               % (count_flips(flips), rule, worst.over_bound, worst.name, worst_f.over_floor, worst_f.name,
                  "plain truth" if other_rule == "plain" else "matched", other_out, by_floor[0].over_floor,
                  by_floor[0].name, time.time() - t0))

    def judge(outd):
        r = table(outd, rule)
        return all(x.ok for x in r), r
    return Verdict(ok, summary, base, rows, judge)


def verdict_extras(case, out, attrs, v, a):
    """After a --floor rule: the update check and the planted errors (golden_rules.py),
    and a float16 step that skipped its update. True when all hold."""
    import golden_rules
    ok = True
    if attrs.get("skipped_steps"):
        print("  FAIL trainbench skipped the update (its scaled gradients overflowed at loss scale %s)"
              % attrs.get("loss_scale"))
        ok = False
    if a.loss_scale > 0 and attrs.get("loss_scale") != a.loss_scale:
        print("  FAIL trainbench ran at loss scale %s, not the --loss-scale %g asked" % (attrs.get("loss_scale"),
                                                                                       a.loss_scale))
        ok = False
    elif a.loss_scale <= 0 and "loss_scale" in attrs:
        print("  FAIL trainbench scaled the loss (%s) where no --loss-scale was asked" % attrs["loss_scale"])
        ok = False
    p0, m0 = case.state_arrays()
    upd_ok, lines = golden_rules.update_check(out, p0, m0, a)
    for line in lines:
        print(line)
    if not a.no_plant and v.rows:
        caught, lines = golden_rules.plants(out, p0, m0, a, v.judge, v.rows, v.relative, v.extra_plants)
        for line in lines:
            print(line)
        ok = ok and caught
    return ok and upd_ok


def main(argv=None):
    a = parse(argv)
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
    import golden_rules
    from gen_golden import AMP_FLOOR_VARIANTS, CUDA_FLOOR_VARIANTS, FLOOR_VARIANTS

    if not (os.path.isfile(a.trainbench) and os.access(a.trainbench, os.X_OK)):
        print("golden_step: error: trainbench binary not found or not executable: %r" % a.trainbench)
        return 1
    variants = list(FLOOR_VARIANTS) if a.floor_variants == "all" else a.floor_variants.split(",")
    known = list(FLOOR_VARIANTS) + list(CUDA_FLOOR_VARIANTS) + list(AMP_FLOOR_VARIANTS)
    for v in variants:
        if v not in known:
            print("golden_step: error: unknown --floor-variants entry %r (known: %s)" % (v, ", ".join(known)))
            return 2
        if a.floor and (v in AMP_FLOOR_VARIANTS) != (a.floor_rule == "amp"):
            print("golden_step: error: --floor-rule amp takes the autocast variants (%s) and only them; %r given"
                  % (", ".join(AMP_FLOOR_VARIANTS), v))
            return 2
    on_gpu = [v for v in variants if v in CUDA_FLOOR_VARIANTS or AMP_FLOOR_VARIANTS.get(v, ("",))[0] == "cuda"]
    if on_gpu or a.truth_device == "cuda":
        import torch
        if not torch.cuda.is_available():
            print("SKIP: golden_step: %s need PyTorch with a CUDA device (torch %s sees none)"
                  % (",".join(on_gpu + (["--truth-device cuda"] if a.truth_device == "cuda" else [])),
                     torch.__version__))
            return 77
    if any(AMP_FLOOR_VARIANTS.get(v, ("", "", ""))[2] == "float16" for v in variants) and a.loss_scale <= 0:
        print("golden_step: error: float16 autocast variants need --loss-scale (both sides scale the loss by it)")
        return 2
    os.makedirs(a.workdir, exist_ok=True)
    for stale in glob.glob(os.path.join(a.workdir, "*.h5")):
        os.remove(stale)
    rtol = compare_h5.DEFAULT_RTOL if a.rtol is None else a.rtol
    atol_scale = compare_h5.DEFAULT_ATOL_SCALE if a.atol_scale is None else a.atol_scale
    factor = compare_h5.DEFAULT_BOUND_FACTOR if a.floor_factor is None else a.floor_factor
    rel = compare_h5.DEFAULT_BOUND_REL if a.floor_rel is None else a.floor_rel
    rule_opts = argparse.Namespace(factor=factor, rel=rel, cap=a.bound_cap, window=a.flip_window,
                                   variants=variants, top=a.top, rule=a.floor_rule, median=a.median,
                                   truth_device=a.truth_device)

    case = Case(a)
    results, summaries, kept = [], [], []
    own_prev = None     # --chain own: trainbench's output of the previous step
    for k in range(1, a.steps + 1):
        print("# ---- step %d ----" % k, flush=True)
        images, labels = case.next_batch()
        batch = os.path.join(a.workdir, "batch%d.h5" % k)
        case.write_batch(batch, images, labels)
        if own_prev is None:
            ckpt = os.path.join(a.workdir, "ckpt%d.h5" % (k - 1))
            case.write_ckpt(ckpt, k - 1)
        else:
            ckpt = own_prev
        out_path = os.path.join(a.workdir, "out%d.h5" % k)
        cmd = [a.trainbench, "step", "--ckpt", ckpt, "--batch", batch, "--out", out_path] + \
            case.step_args + ["--backend", "cpu"]
        if a.threads > 0:
            cmd += ["--threads", str(a.threads)]
        cmd += a.step_arg
        rc = run(cmd)
        ok, base, summary = False, None, ""
        if rc != 0 or not os.path.isfile(out_path):
            print("golden_step: FAIL: step %d: trainbench exited %d%s"
                  % (k, rc, "" if os.path.isfile(out_path) else " and wrote no " + out_path))
            summary = "trainbench did not run through"
        else:
            out, attrs = read_h5(out_path)
            if a.floor:
                v = (golden_rules.amp_step if a.floor_rule == "amp" else floor_step)(case, images, labels, out,
                                                                                    rule_opts)
                ok, summary, base = v.ok, v.summary, v.base
                ref = base.datasets
                ok = verdict_extras(case, out, attrs, v, a) and ok
            else:
                base = case.step(images, labels)
                ref = base.datasets
                ok = elementwise_step(out, ref, rtol, atol_scale)
            problems = check_names_attrs(out, attrs, ref, k, a)
            for msg in problems:
                print("  FAIL " + msg)
            ok = ok and not problems
            del out
        print("# step %d: %s%s" % (k, "ok" if ok else "FAIL", (": " + summary) if summary else ""), flush=True)
        results.append(ok)
        summaries.append(summary)
        # files: inputs of the first failed step stay (unless --keep keeps all)
        if not a.keep:
            if ok or kept:
                remove([batch] + ([ckpt] if ckpt != own_prev else []))
            else:
                kept = [ckpt, batch]
            if own_prev and own_prev not in kept:
                remove([own_prev])
        own_prev = out_path if a.chain == "own" and os.path.isfile(out_path) else None
        if not a.keep and a.chain == "ref":
            remove([out_path])
        if base is None:
            if a.chain == "own":
                break
            base = case.step(images, labels)
        case.state, case.momentum = base.state, base.momentum
        del base
    if not a.keep and own_prev:
        remove([own_prev])

    passed = len(results) == a.steps and all(results)
    print("# golden_step: %s, %s, chained from %s, %s references; %s"
          % (a.trainbench, a.model, "its own outputs" if a.chain == "own" else "the references (teacher forcing)",
             a.compute_dtype, ("per-tensor bound %g x PyTorch's own error + %g x max|ref|, at most %g x "
                               "max|ref|, %s" % (factor, rel, a.bound_cap, "ReLU decisions matched"
                                                 if a.floor_rule == "matched" else
                                                 "plain float64 step, each side's own ReLU flips")
                               if a.floor_rule != "amp" else
                               "relative L2 error per tensor at most %g x PyTorch autocast's + %g, and %g; median "
                               "ratio over the gradients at most %g" % (factor, rel, a.bound_cap, a.median))
             if a.floor else
             "elementwise rtol %g, atol_scale %g" % (rtol, atol_scale)))
    for k, (r, s) in enumerate(zip(results, summaries), 1):
        print("#   step %d: %s: %s" % (k, "ok" if r else "FAIL", s))
    print("# golden_step: %s %s: %s (%s)" % (a.model, "x".join(map(str, (a.batch, 3, a.height, a.width))),
          "PASS" if passed else "FAIL",
          ", ".join("step %d %s" % (i + 1, "ok" if r else "FAIL") for i, r in enumerate(results))))
    left = sorted(glob.glob(os.path.join(a.workdir, "*.h5")))
    size = sum(os.path.getsize(p) for p in left)
    if left:
        print("# golden_step: %d file(s), %.0f MB, left in %s%s" % (
            len(left), size / 1e6, a.workdir,
            " (--keep)" if a.keep else ": the inputs of the first failed step; rerun it with the "
            "trainbench command above"))
    else:
        print("# golden_step: no files left in %s" % a.workdir)
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
