#!/usr/bin/env python3
"""golden_amp_calibrate.py: the numbers behind the 16-bit golden rule's
constants (golden_step.py --floor-rule amp: k, the cap, the median bound),
measured with two PyTorch bfloat16 autocast implementations against each
other (NCHW and channels-last: different kernels, the same format), on the
CPU, on the GPU tests' fixtures.

  golden_amp_calibrate.py --model resnet50 --classes 7 --batch 8 --height 96 \\
      --width 96 --seed 24 --residual-gamma 0.1 --steps 2 [--variants A,B]

Per step: each implementation's relative L2 error per tensor against the
float64 step (the floor the rule uses), the largest by tensor class; the
ratio A / B per gradient tensor (what trainbench / PyTorch is in the rule),
its median and largest; and how many gradient tensors' bound 3 x B + 2^-7
reaches the cap 0.75. Steps are teacher-forced as in the tests. Also, per
step, the float64 step's own sensitivity: the gradients' relative L2 change
when the input is scaled by 1 + 2^-9 noise (what any 16-bit step must at
least show). Output: '#' lines for reading (docs/golden_16bit.md quotes
them; results/golden_amp_calibration/ holds the runs).
"""
import argparse
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def rel_l2(x, ref):
    import numpy as np
    r = np.asarray(ref, np.float64).ravel()
    n = float(np.linalg.norm(r))
    d = float(np.linalg.norm(np.asarray(x, np.float64).ravel() - r))
    return d / n if n > 0 else d


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True)
    for name in ("--classes", "--batch", "--height", "--width", "--seed", "--steps"):
        ap.add_argument(name, type=int, required=True)
    ap.add_argument("--residual-gamma", type=float, default=1.0)
    ap.add_argument("--variants", default="cpu-bf16-nhwc,cpu-bf16-nchw",
                    help="A,B: A plays trainbench, B PyTorch (gen_golden.AMP_FLOOR_VARIANTS)")
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args(argv)
    import numpy as np
    import torch
    sys.path.insert(0, HERE)
    from gen_golden import build_model
    from golden_torch import run_step
    import golden_rules
    from golden_rules import scale_err
    torch.set_num_threads(a.threads)
    va, vb = a.variants.split(",")
    hp = argparse.Namespace(lr=0.01, momentum=0.9, weight_decay=1e-4, nesterov=False, label_smoothing=0.1,
                            loss_scale=1024.0)
    t = build_model(a.model, a.classes, a.seed, a.residual_gamma)
    state = {n: v.detach().clone() for n, v in t.state_dict().items()}
    mom = None
    print("# %s %dx3x%dx%d, seed %d, residual gamma x%g; A = %s, B = %s; torch %s" % (
        a.model, a.batch, a.height, a.width, a.seed, a.residual_gamma, va, vb, torch.__version__))
    for k in range(1, a.steps + 1):
        t0 = time.time()
        images = torch.randn(a.batch, 3, a.height, a.width)
        labels = torch.randint(0, a.classes, (a.batch,))
        base = run_step(t, state, mom, images, labels, hp, torch.float64)
        ra = run_step(t, state, mom, images, labels, hp, torch.float32, variant=va)
        rb = run_step(t, state, mom, images, labels, hp, torch.float32, variant=vb)
        pert = images.double() * (1 + 2.0 ** -9 * torch.randn(images.shape, dtype=torch.float64))
        rp = run_step(t, state, mom, pert, labels, hp, torch.float64)
        ea, eb, ep, ratio = {}, {}, [], []
        sa, sb = {}, {}
        for n, ref in base.datasets.items():
            if np.asarray(ref).dtype.kind in "iub":
                continue
            ea[n], eb[n] = rel_l2(ra.datasets[n], ref), rel_l2(rb.datasets[n], ref)
            if n.startswith("grads/"):
                ep.append(rel_l2(rp.datasets[n], ref))
                sa[n], sb[n] = scale_err(ra.datasets[n], ref), scale_err(rb.datasets[n], ref)
                ratio.append(ea[n] / eb[n] if eb[n] > 0 else 1.0)
        by_class = {}
        for n in ea:
            c = n.split("/")[0]
            by_class[c] = max(by_class.get(c, 0.0), ea[n], eb[n])
        grads = [n for n in eb if n.startswith("grads/")]
        capped = sum(1 for n in grads if 3 * eb[n] + 2.0 ** -7 > 0.75)
        worst = max(grads, key=lambda n: max(ea[n], eb[n]))
        print("# step %d: largest relative L2 error of A or B by class: %s" % (
            k, ", ".join("%s %.3g" % kv for kv in sorted(by_class.items()))))
        print("#   gradients: A/B median %.3f, largest %.3f; B's error median %.3f, largest %.3f (%s); bound "
              "3 x B + 2^-7 at the cap 0.75 for %d of %d" % (
                  float(np.median(ratio)), max(ratio), float(np.median([eb[n] for n in grads])),
                  max(ea[worst], eb[worst]), worst, capped, len(grads)))
        print("#   float64 with the input x (1 + 2^-9 noise): gradients move by %.3f (median), %.3f (largest); "
              "%.0f s" % (float(np.median(ep)), max(ep), time.time() - t0), flush=True)
        # the scale rule: |s_A - 1| <= SCALE_K x |s_B - 1| + SCALE_Q x B's relative L2 error
        kq = [sa[n] / (golden_rules.SCALE_K * sb[n] + golden_rules.SCALE_Q * eb[n]) for n in grads]
        wk = grads[int(np.argmax(kq))]
        print("#   scale |<x,ref>/<ref,ref> - 1|: A median %.4f, largest %.4f; B median %.4f, largest %.4f; A over "
              "the scale bound (%g x B's + %g x B's L2 error): largest %.3f (%s)" % (
                  float(np.median(list(sa.values()))), max(sa.values()), float(np.median(list(sb.values()))),
                  max(sb.values()), golden_rules.SCALE_K, golden_rules.SCALE_Q, max(kq), wk))
        for f in (0.5, 0.8, 1.25):
            caught = sum(1 for n in grads if
                         scale_err(f * np.asarray(ra.datasets[n], np.float64), base.datasets[n]) >
                         golden_rules.SCALE_K * sb[n] + golden_rules.SCALE_Q * eb[n])
            print("#   A's gradients x %g: the scale rule catches %d of %d" % (f, caught, len(grads)))
        state, mom = base.state, base.momentum
    return 0


if __name__ == "__main__":
    sys.exit(main())
