"""golden_rules.py: the 16-bit rule of the golden tests (amp_step,
golden_step.py --floor-rule amp, documented there) and the parts of every
rule's verdict that do not depend on which PyTorch reference it compares
with:

  update_check   the optimizer, exactly: trainbench's /params and /momentum
                 after the step must be torch.optim.SGD applied to ITS OWN
                 /grads (and the state it started from), within float32
                 rounding. Gradient rounding does not enter, so this holds
                 in every precision as tightly as in float32: a wrong
                 momentum, weight decay, Nesterov term, learning rate, a
                 loss scale left in the update or a skipped step fails it
                 by orders of magnitude.
  plants         errors planted into trainbench's output after a step was
                 judged, which the rule in force must catch: a gradient
                 zeroed (the one whose bound is loosest against its own
                 scale: the rule's weakest point) and, from the second step
                 on (the first step's momentum buffer is the gradient
                 itself), the output of a momentum 0.1 lower than asked
                 (what `trainbench step --momentum 0.8` writes for 0.9,
                 computed from trainbench's own gradients); under the
                 16-bit rule also the loosest gradient halved, a whole
                 stage's gradients x 1.25 and noise of twice PyTorch's
                 error added to every gradient (amp_plants). A plant the
                 rule lets through fails the test: a rule that cannot fail
                 proves nothing.
  scale check    (the 16-bit rule) per gradient tensor, |<out,ref>/<ref,ref>
                 - 1| <= SCALE_K x PyTorch's own + SCALE_Q x PyTorch's
                 relative L2 error: rounding noise is mostly orthogonal to
                 the gradient, a wrong scale is not; where PyTorch's own
                 L2 error reaches 0.25-0.5 (the cap decides the L2 bound),
                 this is what catches a gradient off by 0.5x or 1.25x.
"""
import time

import numpy as np

# float32 rounding of the update, element by element: |x - expected| <=
# UPDATE_ULPS * 2^-24 * (sum of the magnitudes of the terms that make x).
# torch's SGD rounds 3-4 times per element; CUDA may fuse with FMA in
# another order: 16 ulps of the terms is several times either.
UPDATE_ULPS = 16.0
EPS32 = 2.0 ** -24
PLANT_MOMENTUM_DELTA = 0.1
# the 16-bit rule's scale check, per gradient tensor: |<out,ref>/<ref,ref> - 1|
# <= SCALE_K x PyTorch's own + SCALE_Q x PyTorch's relative L2 error
# (docs/golden_16bit.md; tests/golden_amp_calibrate.py measures them)
SCALE_K = 3.0
SCALE_Q = 0.5
# + SCALE_U x the format's unit (--floor-rel: 2^-7 bf16, 2^-10 fp16): a
# scale within half a unit is the output's own rounding (the H200's first
# run: bf16 ResNet-50's fc.bias at 1.0019 against PyTorch's float32 loss
# gradient's 1.0001; bound 0.0008 without it)
SCALE_U = 0.5


def _f64(x):
    return np.asarray(x, np.float64)


def scale_err(x, ref):
    """|<x, ref> / <ref, ref> - 1|: how far x's projection on ref lies from
    ref (a tensor scaled by s: |s - 1|; rounding noise, mostly orthogonal to
    ref, moves it far less than the relative L2 error)."""
    r = _f64(ref).ravel()
    rr = float(r @ r)
    return abs(float(_f64(x).ravel() @ r) / rr - 1) if rr > 0 else 0.0


def trainable_names(out):
    return sorted(n[len("grads/"):] for n in out if n.startswith("grads/"))


def sgd_expected(g, p0, b0, lr, momentum, wd, nesterov):
    """torch.optim.SGD (dampening 0) in float64: (momentum buffer, params,
    magnitude of the buffer's terms, magnitude of the params' terms)."""
    d = g + wd * p0
    dmag = np.abs(g) + np.abs(wd * p0)
    if momentum == 0:
        b, bmag = None, None
        step, smag = d, dmag
    else:
        b = d if b0 is None else momentum * b0 + d
        bmag = dmag if b0 is None else momentum * np.abs(b0) + dmag
        step, smag = (d + momentum * b, dmag + momentum * bmag) if nesterov else (b, bmag)
    return b, p0 - lr * step, bmag, np.abs(p0) + lr * smag


def update_check(out, params0, momentum0, a):
    """(ok, lines): every trainable tensor's momentum and params in `out`
    against SGD on out's own grads. params0/momentum0: {name: array or
    tensor} the step started from (momentum0 None: a fresh optimizer)."""
    worst, bad = (0.0, ""), []
    for n in trainable_names(out):
        g = _f64(out["grads/" + n])
        p0 = _f64(params0[n])
        b0 = None if momentum0 is None else _f64(momentum0[n])
        b, p1, bmag, pmag = sgd_expected(g, p0, b0, a.lr, a.momentum, a.weight_decay, a.nesterov)
        pairs = [("params/" + n, p1, pmag)]
        if b is not None:
            pairs.append(("momentum/" + n, b, bmag))
        for key, want, mag in pairs:
            if key not in out:
                bad.append("%s missing" % key)
                continue
            diff = np.abs(_f64(out[key]) - want)
            tol = UPDATE_ULPS * EPS32 * mag + 1e-30
            ratio = float(np.max(diff / tol)) if diff.size else 0.0
            if not ratio == ratio:
                ratio = float("inf")
            if ratio > worst[0]:
                worst = (ratio, key)
            if ratio > 1:
                bad.append("%s: max |out - SGD(own grads)| %.3e, %.3g x the float32 rounding bound"
                           % (key, float(np.max(diff)), ratio))
    lines = ["# update check (SGD on trainbench's own gradients, %g float32 ulps of the terms): %s; worst %.3g x "
             "the bound (%s)" % (UPDATE_ULPS, "ok" if not bad else "FAIL in %d tensor(s)" % len(bad), worst[0],
                                 worst[1] or "-")]
    lines += ["  FAIL update " + m for m in bad[:12]]
    return not bad, lines


def loosest_grad(rows, relative):
    """The gradient row whose bound is largest against its own scale:
    bound / max|ref|, or the bound itself for a relative rule (L2)."""
    best, key = None, -1.0
    for r in rows:
        if not r.name.startswith("grads/") or not r.ref_max > 0:
            continue
        scale = r.bound if relative else r.bound / r.ref_max
        if scale > key:
            best, key = r, scale
    return best, key


def plant_momentum(out, params0, momentum0, a, delta=PLANT_MOMENTUM_DELTA):
    """A copy of `out` as a step with momentum (a.momentum - delta) would write
    it, from out's own gradients; None when there is no buffer yet (step 1)
    or no momentum."""
    if momentum0 is None or a.momentum == 0:
        return None
    bad = dict(out)
    for n in trainable_names(out):
        g, p0, b0 = _f64(out["grads/" + n]), _f64(params0[n]), _f64(momentum0[n])
        b_ok, p_ok, _, _ = sgd_expected(g, p0, b0, a.lr, a.momentum, a.weight_decay, a.nesterov)
        b_bad, p_bad, _, _ = sgd_expected(g, p0, b0, a.lr, a.momentum - delta, a.weight_decay, a.nesterov)
        bad["momentum/" + n] = (_f64(out["momentum/" + n]) + (b_bad - b_ok)).astype(np.float32)
        bad["params/" + n] = (_f64(out["params/" + n]) + (p_bad - p_ok)).astype(np.float32)
    return bad


def plants(out, params0, momentum0, a, judge, rows, relative=False, extra=()):
    """Plants errors into `out` and asks the rule: judge(outd) -> (ok, rows)
    for the per-tensor rule in force (relative: its bounds are relative
    errors); extra: more (what, plant(out) -> planted copy) the whole rule
    must fail. Returns (all caught, lines)."""
    lines, all_caught = [], True
    for what, plant in extra:
        caught = not judge(plant(out))[0]
        all_caught &= caught
        lines.append("# planted: %s: %s by the rule" % (what, "caught" if caught else "NOT CAUGHT"))
    target, share = loosest_grad(rows, relative)
    if target is not None:
        bad = dict(out)
        bad[target.name] = np.zeros_like(out[target.name])
        ok, brows = judge(bad)
        row = next(r for r in brows if r.name == target.name)
        caught = not row.ok
        all_caught &= caught
        lines.append("# planted: %s zeroed (the loosest bound against its scale, %.3g of it): %s by the tensor "
                     "rule (err/bound %.3g)" % (target.name, share,
                                                "caught" if caught else "NOT CAUGHT", row.over_bound))
    bad = plant_momentum(out, params0, momentum0, a)
    if bad is None:
        lines.append("# planted: wrong momentum: not applicable at this step (no momentum buffer yet)")
    else:
        upd_ok, _ = update_check(bad, params0, momentum0, a)
        tens_ok, brows = judge(bad)
        worst = max((r for r in brows if r.name.startswith(("momentum/", "params/"))), key=lambda r: r.over_bound)
        caught = not upd_ok
        all_caught &= caught
        lines.append("# planted: momentum %g instead of %g: %s by the update check; the tensor rule alone: %s "
                     "(worst err/bound %.3g, %s)" % (a.momentum - PLANT_MOMENTUM_DELTA, a.momentum,
                                                     "caught" if caught else "NOT CAUGHT",
                                                     "caught" if not tens_ok else "passes it", worst.over_bound,
                                                     worst.name))
    return all_caught, lines


class Verdict:
    """One step under a --floor rule: ok, a one-line summary, the plain
    float64 StepResult (its state starts the next step), the rule's rows and
    judge(outd) -> (ok, rows), the same rule on another output (the plants);
    relative: the rows' bounds are relative errors (the L2 rule)."""

    def __init__(self, ok, summary, base, rows, judge, relative=False, extra_plants=()):
        self.ok, self.summary, self.base, self.rows, self.judge = ok, summary, base, rows, judge
        self.relative, self.extra_plants = relative, extra_plants


def _scaled(out, names, f):
    bad = dict(out)
    for n in names:
        bad[n] = (_f64(out[n]) * f).astype(np.float32)
    return bad


def amp_plants(base, rows):
    """The 16-bit rule's own plants (beyond the zeroed tensor and the
    momentum): the loosest gradient halved; every gradient of the stage
    with the loosest bounds x 1.25 (a wrong scale in a code path a whole
    stage shares); random noise of twice PyTorch's own relative error added
    to every gradient (inside each L2 bound of 3 x PyTorch's: the median
    rule's plant)."""
    grads = [r for r in rows if r.name.startswith("grads/") and r.ref_max > 0]
    if not grads:
        return []
    loosest = max(grads, key=lambda r: r.bound).name
    stages = {}
    for r in grads:  # ResNet's stages (layer1..layer4): the stem's conv1 / bn1 and fc are no stage
        top = r.name.split("/")[1].split(".")[0]
        if top.startswith("layer"):
            stages.setdefault(top, []).append(r)
    if not stages:
        stages = {"every gradient": grads}
    stage = max(stages, key=lambda k: float(np.median([r.bound for r in stages[k]])))
    names = [r.name for r in stages[stage]]

    def noisier(o):
        rng = np.random.default_rng(1)
        bad = dict(o)
        for r in grads:
            noise = rng.standard_normal(np.shape(o[r.name]))
            nn = float(np.linalg.norm(noise))
            if nn > 0:
                noise *= 2 * r.floor_err * r.ref_max / nn  # ref_max: ||ref|| in the L2 rows
            bad[r.name] = (_f64(o[r.name]) + noise).astype(np.float32)
        return bad
    return [("%s x 0.5 (the loosest L2 bound)" % loosest, lambda o: _scaled(o, [loosest], 0.5)),
            ("every gradient of %s (%d tensors, the loosest stage) x 1.25" % (stage, len(names)),
             lambda o: _scaled(o, names, 1.25)),
            ("noise of twice PyTorch's own error added to every gradient (within each L2 bound: the median "
             "rule's to catch)", noisier)]


def amp_step(case, images, labels, out, o):
    """The 16-bit rule for one step (module doc): relative L2 errors against
    the plain float64 step, PyTorch autocast's own as the floor, and the
    median over the gradients of trainbench's error over PyTorch's."""
    import torch
    import compare_h5

    t0 = time.time()
    base = case.step(images, labels, device=o.truth_device)
    names = sorted(base.datasets)
    floor = dict.fromkeys(names, 0.0)
    sfloor = dict.fromkeys(names, 0.0)
    for v in o.variants:
        t1 = time.time()
        rv = case.step(images, labels, dtype=torch.float32, variant=v)
        if rv.skipped:
            print("golden_step: FAIL: PyTorch %s overflowed at loss scale %g (GradScaler skipped the step): "
                  "the case needs a smaller --loss-scale" % (v, case.a.loss_scale))
            return Verdict(False, "PyTorch %s skipped its step" % v, base, [], lambda d: (False, []), True)
        for n in names:
            floor[n] = max(floor[n], compare_h5.rel_l2_err(rv.datasets[n], base.datasets[n]))
            if n.startswith("grads/"):
                sfloor[n] = max(sfloor[n], scale_err(rv.datasets[n], base.datasets[n]))
        worst = max((n for n in names if n.startswith("grads/")), key=lambda n: floor[n])
        print("#   PyTorch %-15s loss %.6f, gradients' relative L2 error up to %.3g (%s) (%.1f s)"
              % (v, float(rv.datasets["loss"]), floor[worst], worst, time.time() - t1), flush=True)
        del rv

    def scale_rows(outd):
        """(name, scale error, bound) per gradient: the scale check"""
        return [(n, scale_err(outd[n], base.datasets[n]), SCALE_K * sfloor[n] + SCALE_Q * floor[n] + SCALE_U * o.rel)
                for n in names if n.startswith("grads/") and n in outd]

    def judge(outd):
        r = [compare_h5.l2_row(n, outd[n], base.datasets[n], floor[n], o.factor, o.rel, o.cap)
             for n in names if n in outd]
        ratios = [x.over_floor for x in r if x.name.startswith("grads/") and x.floor_err > 0]
        med = float(np.median(ratios)) if ratios else 0.0
        sc = scale_rows(outd)
        return all(x.ok for x in r) and med <= o.median and all(e <= b for _, e, b in sc), r, med
    ok, rows, med = judge(out)
    # the floor must be a 16-bit one: a variant that computed in float32
    # (an emulation that rounds nothing, an autocast that did not engage)
    # makes every bound 3 x float32's error + floor_rel, and the rule then
    # tests nothing of 16 bits
    fmed = float(np.median([floor[n] for n in names if n.startswith("grads/")]))
    if fmed < o.rel / 4:
        ok = False
        print("# FAIL: PyTorch's own median gradient error %.3g is below a quarter of the format's unit (%g): the "
              "variants %s did not compute in 16 bits" % (fmed, o.rel, ", ".join(o.variants)))
    sc = scale_rows(out)
    title = ("against the plain float64 step, relative L2 error per tensor (||out - ref|| / ||ref||); bound = "
             "min(%g x floor_rel + %g, %g), floor_rel = PyTorch autocast's own relative L2 error (worst of %s)"
             % (o.factor, o.rel, o.cap, ", ".join(o.variants)))
    compare_h5.print_bound_table(rows, title, o.top, cols=("||ref||", "rel_err", "floor_rel"))
    print("# median over the gradients of trainbench's error / PyTorch's: %.3g (at most %g)%s"
          % (med, o.median, "" if med <= o.median else ": FAIL, trainbench is typically worse than PyTorch"))
    sworst = max(sc, key=lambda x: x[1] / x[2] if x[2] > 0 else float("inf")) if sc else ("-", 0.0, 1.0)
    sbad = [x for x in sc if not x[1] <= x[2]]
    print("# scale per gradient, |<out,ref>/<ref,ref> - 1| <= %g x PyTorch's + %g x PyTorch's relative L2 error + %g: "
          "%s; worst %.4f against %.4f (%s)" % (SCALE_K, SCALE_Q, SCALE_U * o.rel,
                                                "ok" if not sbad else "FAIL in %d" % len(sbad), sworst[1], sworst[2],
                                                sworst[0]))
    for n, e, b in sbad[:12]:
        print("  FAIL scale %s: %.4f > %.4f (the gradient is scaled, not just rounded)" % (n, e, b))
    worst = max(rows, key=lambda r: r.over_bound)
    summary = ("amp rule: worst err/bound %.3g (%s), median err/floor over gradients %.3g; %.0f s"
               % (worst.over_bound, worst.name, med, time.time() - t0))
    return Verdict(ok, summary, base, rows, lambda d: judge(d)[:2], True, amp_plants(base, rows))
