#!/usr/bin/env python3
"""convergence.py: trainbench and PyTorch trained side by side on the same
learnable synthetic data, from the same weights, with the same schedule;
both loss curves stored, plotted together and compared.

  convergence.py --trainbench BIN --model resnet18 --image-size 32 --batch 16
      --steps 120 --out DIR [--backend cpu] [--precision fp32] [--device cpu]
      [--lr 0.1 --lr-base-batch 256 --warmup-steps 20 --label-smoothing 0.1]

What both sides get:
  data     DIR/data.h5 (a batch file: /images float32 [N,3,S,S], /labels):
           --pool samples of --classes classes, each a class's smooth random
           pattern (4 plane waves per channel, as trainbench's --synthetic) at
           a random contrast plus Gaussian noise (sd 0.7). trainbench trains
           on it with --batch-file (rows in file order, the file repeated each
           epoch); PyTorch takes the same rows in the same order.
  weights  DIR/init.h5: torchvision's <model>(num_classes) at its own init
           (seed --seed; --zero-init-residual: each block's last BatchNorm
           gamma at 0), read by trainbench's --init; PyTorch starts from the
           same state_dict.
  schedule trainbench's (src/train/lr_schedule.c): peak = lr x batch / lr-base-batch,
           linear warm-up from peak/W to peak over W steps, then cosine to 0
           at --steps; SGD with momentum and weight decay on every parameter
           (torch.optim.SGD semantics), label smoothing. The lr each side
           used at each step is compared exactly (same schedule).
  precision fp32 (PyTorch float32, TF32 off), tf32, bf16 (autocast,
           channels-last, as trainbench's NHWC), fp16 (autocast + GradScaler
           at 65536, growth every 2000 steps: trainbench's dynamic scaler).

Outputs in DIR: curves.tsv (step, lr and loss of each side), curves.png
(both loss curves, and the windowed difference), summary.txt; trainbench's
log and results file. The comparison: the mean loss over windows of
--window steps, each side; every window after the first must agree within
--bound-abs + --bound-rel x PyTorch's window mean, and both must have fallen
(last window below --fell x the first). Two correct implementations start
equal and then differ by rounding that the training amplifies (no two runs
of a network agree step by step after tens of steps, float32 or not), so
the curves are compared as curves, not point by point.

Exit status: 0 when the curves agree, 1 when not, 77 when torch, h5py or
numpy is missing (ctest: skipped). --self-test: the comparison alone on
made-up curves (passes noise, fails an offset, a shifted schedule, a side
that does not learn).
"""
import argparse
import math
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SKIP = 77


def parse(argv):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trainbench", required=True, help="trainbench binary")
    ap.add_argument("--out", required=True, help="output directory (created)")
    ap.add_argument("--model", default="resnet18")
    ap.add_argument("--classes", type=int, default=10)
    ap.add_argument("--image-size", type=int, default=32)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--steps", type=int, default=120)
    ap.add_argument("--pool", type=int, default=0, help="samples in the data file (0: 8 batches)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--lr", type=float, default=0.1, help="lr for a batch of --lr-base-batch (trainbench's --lr)")
    ap.add_argument("--lr-base-batch", type=int, default=256)
    ap.add_argument("--warmup-steps", type=int, default=20, help="linear lr warm-up steps")
    ap.add_argument("--momentum", type=float, default=0.9)
    ap.add_argument("--weight-decay", type=float, default=5e-5)
    ap.add_argument("--label-smoothing", type=float, default=0.1)
    ap.add_argument("--nesterov", action="store_true")
    ap.add_argument("--zero-init-residual", action="store_true",
                    help="each block's last BatchNorm gamma starts at 0 (Goyal et al.), in the shared init")
    ap.add_argument("--precision", choices=("fp32", "tf32", "bf16", "fp16"), default="fp32")
    ap.add_argument("--backend", default="cpu", help="trainbench's --backend")
    ap.add_argument("--device", default="cpu", help="PyTorch's device (cpu or cuda)")
    ap.add_argument("--threads", type=int, default=0, help="threads of each side (0: their defaults)")
    ap.add_argument("--tb-arg", action="append", default=[], metavar="ARG",
                    help="extra argument for `trainbench train` (repeatable)")
    ap.add_argument("--window", type=int, default=10, help="steps per window of the comparison")
    ap.add_argument("--bound-abs", type=float, default=0.1, help="windows agree within this + ...")
    ap.add_argument("--bound-rel", type=float, default=0.1, help="... this x PyTorch's window mean")
    ap.add_argument("--fell", type=float, default=0.5,
                    help="each side's last window must be below this x its first (the data is learnable)")
    ap.add_argument("--no-plot", action="store_true")
    a = ap.parse_args(argv)
    if a.pool == 0:
        a.pool = 8 * a.batch
    if a.steps < 2 * a.window:
        ap.error("--steps must cover at least two windows")
    return a


# ---- the shared inputs --------------------------------------------------------------------------

def make_data(a, path):
    """Learnable synthetic samples (module doc) written as a batch file."""
    import h5py
    import numpy as np
    rng = np.random.default_rng(a.seed)
    s = a.image_size
    y, x = np.mgrid[0:s, 0:s].astype(np.float64)
    proto = np.zeros((a.classes, 3, s, s))
    for c in range(a.classes):
        for ch in range(3):
            for _ in range(4):
                fy, fx = (rng.uniform(-2, 2, 2) * 2 * math.pi / s)
                ph = rng.uniform(0, 2 * math.pi)
                proto[c, ch] += 0.5 * np.cos(fy * y + fx * x + ph)
    labels = rng.integers(0, a.classes, a.pool)
    contrast = rng.uniform(0.5, 1.5, a.pool)[:, None, None, None]
    images = np.empty((a.pool, 3, s, s), np.float32)
    for i0 in range(0, a.pool, 256):   # bounded temporaries at 224 px
        i1 = min(a.pool, i0 + 256)
        images[i0:i1] = contrast[i0:i1] * proto[labels[i0:i1]] + 0.7 * rng.standard_normal((i1 - i0, 3, s, s))
    with h5py.File(path, "w") as f:
        f.create_dataset("images", data=images)
        f.create_dataset("labels", data=labels.astype(np.int64))
    return images, labels


def make_init(a, path):
    """torchvision's model at its own init, written as a trainbench checkpoint."""
    import torch
    import torchvision
    sys.path.insert(0, os.path.join(HERE, "..", "tests"))
    from gen_golden import state_datasets, write_file
    torch.manual_seed(a.seed)
    model = getattr(torchvision.models, a.model)(weights=None, num_classes=a.classes,
                                                 zero_init_residual=a.zero_init_residual)
    meta = argparse.Namespace(model=a.model, classes=a.classes, height=a.image_size, seed=a.seed,
                              compute_dtype="float32", git_revision="convergence.py")
    write_file(path, meta, 0, state_datasets(model, None))
    return {n: t.detach().clone() for n, t in model.state_dict().items()}


def lr_at(a, step):
    """src/train/lr_schedule.c's cosine schedule (0-based step)."""
    peak = a.lr * a.batch / a.lr_base_batch
    if step < a.warmup_steps:
        return peak * (step + 1) / a.warmup_steps
    span = a.steps - a.warmup_steps
    if span <= 0:
        return peak
    t = min(1.0, (step - a.warmup_steps) / span)
    return 0.5 * peak * (1 + math.cos(math.pi * t))


# ---- the two runs ----------------------------------------------------------------------------------

def run_trainbench(a, data, init):
    import h5py
    import numpy as np
    res = os.path.join(a.out, "trainbench.h5")
    log = os.path.join(a.out, "trainbench.log")
    cmd = [a.trainbench, "train", "--backend", a.backend, "--model", a.model, "--classes", str(a.classes),
           "--batch-file", data,
           "--init", init, "--batch-size", str(a.batch), "--steps", str(a.steps), "--lr", repr(a.lr),
           "--lr-base-batch", str(a.lr_base_batch), "--lr-warmup-steps", str(a.warmup_steps),
           "--lr-schedule", "cosine", "--momentum", repr(a.momentum), "--weight-decay", repr(a.weight_decay),
           "--label-smoothing", repr(a.label_smoothing), "--precision", a.precision, "--warmup-steps", "0",
           "--scaling-steps", "0", "--print-every", str(max(1, a.steps // 10)), "--results", res]
    if a.nesterov:
        cmd.append("--nesterov")
    if a.threads:
        cmd += ["--threads", str(a.threads)]
    cmd += a.tb_arg
    print("+ " + " ".join(cmd), flush=True)
    t0 = time.time()
    with open(log, "w") as f:
        rc = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT).returncode
    print("# trainbench: exit %d after %.1f s (log %s)" % (rc, time.time() - t0, log), flush=True)
    if rc != 0:
        print(open(log).read()[-3000:])
        return None
    with h5py.File(res, "r") as f:
        return np.asarray(f["steps/lr"][()], np.float64), np.asarray(f["steps/loss"][()], np.float64)


def run_torch(a, images, labels, state):
    import numpy as np
    import torch
    import torch.nn.functional as F
    import torchvision
    sys.path.insert(0, HERE)
    from torch_resnet50 import backward_step
    if a.threads:
        torch.set_num_threads(a.threads)
    dev = torch.device(a.device)
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = a.precision == "tf32"
    model = getattr(torchvision.models, a.model)(weights=None, num_classes=a.classes)
    model.load_state_dict(state)
    model = model.to(dev).train()
    amp = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(a.precision)
    if amp is not None:
        model = model.to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=lr_at(a, 0), momentum=a.momentum, dampening=0,
                          weight_decay=a.weight_decay, nesterov=a.nesterov)
    scaler = None
    if amp == torch.float16:
        kw = dict(init_scale=65536.0, growth_interval=2000)
        scaler = torch.amp.GradScaler(a.device, **kw) if hasattr(torch.amp, "GradScaler") \
            else torch.cuda.amp.GradScaler(**kw)
    x_all = torch.from_numpy(images).to(dev)
    y_all = torch.from_numpy(labels.astype(np.int64)).to(dev)
    n = x_all.shape[0]
    lrs, losses = [], []
    t0 = time.time()
    for step in range(a.steps):
        rows = torch.arange(step * a.batch, (step + 1) * a.batch, device=dev) % n
        x, y = x_all[rows], y_all[rows]
        if amp is not None:
            x = x.contiguous(memory_format=torch.channels_last)
        lr = lr_at(a, step)
        for g in opt.param_groups:
            g["lr"] = lr
        opt.zero_grad(set_to_none=True)
        with torch.autocast(device_type=dev.type, dtype=amp, enabled=amp is not None):
            loss = F.cross_entropy(model(x), y, label_smoothing=a.label_smoothing)
        backward_step(loss, opt, scaler)
        lrs.append(lr)
        losses.append(float(loss))
    print("# PyTorch %s on %s: %d steps in %.1f s" % (torch.__version__, a.device, a.steps, time.time() - t0),
          flush=True)
    return np.array(lrs), np.array(losses)


# ---- the comparison ---------------------------------------------------------------------------------

def windows(loss, w):
    import numpy as np
    k = len(loss) // w
    return np.array([float(np.mean(loss[i * w:(i + 1) * w])) for i in range(k)])


def compare(a, tb, pt):
    """(ok, lines): the schedule, the windowed curves, and both falling."""
    import numpy as np
    (tb_lr, tb_loss), (pt_lr, pt_loss) = tb, pt
    lines, ok = [], True
    if len(tb_loss) != a.steps or len(pt_loss) != a.steps:
        return False, ["# FAIL: %d trainbench and %d PyTorch steps, %d asked" % (len(tb_loss), len(pt_loss), a.steps)]
    lr_err = float(np.max(np.abs(tb_lr - pt_lr) / np.maximum(pt_lr, 1e-30)))
    lr_ok = lr_err <= 1e-6   # trainbench stores its lr as float32
    ok &= lr_ok
    lines.append("# schedule: lr of each step equal within %.1e relative (%s); peak %.4g at step %d"
                 % (lr_err, "ok" if lr_ok else "FAIL", float(np.max(pt_lr)), int(np.argmax(pt_lr)) + 1))
    wt, wp = windows(tb_loss, a.window), windows(pt_loss, a.window)
    lines.append("# window  steps      trainbench    PyTorch   |diff|     bound")
    worst = 0.0
    for i, (x, y) in enumerate(zip(wt, wp)):
        bound = a.bound_abs + a.bound_rel * y
        d = abs(x - y)
        judged = i > 0
        bad = judged and not d <= bound
        ok &= not bad
        if judged:
            worst = max(worst, d / bound)
        lines.append("  %6d  %4d-%-4d  %10.4f %10.4f %8.4f  %8.4f  %s"
                     % (i, i * a.window + 1, (i + 1) * a.window, x, y, d, bound,
                        "FAIL" if bad else ("ok" if judged else "(first window: equal start)")))
    for name, w in (("trainbench", wt), ("PyTorch", wp)):
        fell = w[-1] < a.fell * w[0]
        ok &= fell
        lines.append("# %s: loss %.4f -> %.4f (first and last window), %s" % (
            name, w[0], w[-1], "fell" if fell else "did NOT fall below %g x its start: FAIL" % a.fell))
    lines.append("# windows: worst |diff| / bound %.3g; curves %s" % (worst, "agree" if ok else "DIFFER"))
    return ok, lines


def plot(a, tb, pt, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("# no matplotlib: %s not drawn" % path)
        return
    import numpy as np
    steps = np.arange(1, a.steps + 1)
    fig, ax = plt.subplots(figsize=(8, 4.5))
    ax.plot(steps, pt[1], label="PyTorch", color="tab:orange", alpha=0.8)
    ax.plot(steps, tb[1], label="trainbench", color="tab:blue", alpha=0.8)
    ax2 = ax.twinx()
    ax2.plot(steps, pt[0], color="gray", linestyle=":", label="lr")
    ax2.set_ylabel("learning rate")
    ax.set_xlabel("step")
    ax.set_ylabel("training loss")
    ax.set_title("%s %d px, batch %d, %s: warm-up %d, peak lr %.3g, smoothing %g%s"
                 % (a.model, a.image_size, a.batch, a.precision, a.warmup_steps,
                    a.lr * a.batch / a.lr_base_batch, a.label_smoothing,
                    ", zero-init residual" if a.zero_init_residual else ""), fontsize=10)
    ax.legend(loc="upper right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    print("# plot: %s" % path)


def self_test():
    """The comparison on made-up curves: it passes two curves that differ by
    noise and fails an offset (a loss floor of 0.5 against 0: label smoothing
    lost on one side), a schedule off by one step, and a side that does not
    learn. Exit 0 when every verdict is the expected one."""
    import numpy as np
    a = argparse.Namespace(steps=100, window=10, bound_abs=0.05, bound_rel=0.1, fell=0.5, lr=0.1, batch=16,
                           lr_base_batch=256, warmup_steps=10)
    rng = np.random.default_rng(3)
    lr = np.array([lr_at(a, k) for k in range(a.steps)])
    base = 0.5 + 1.8 * np.exp(-np.arange(a.steps) / 12.0)
    noisy = base + 0.02 * rng.standard_normal(a.steps)
    cases = [("equal curves up to noise", (lr, noisy), (lr, base), True),
             ("one side without label smoothing (floor 0 against 0.5)", (lr, base - 0.5 * (1 - np.exp(
                 -np.arange(a.steps) / 12.0))), (lr, base), False),
             ("the schedule one step late", (np.roll(lr, 1), noisy), (lr, base), False),
             ("a side that does not learn", (lr, np.full(a.steps, 2.3)), (lr, base), False)]
    ok = True
    for what, tb, pt, want in cases:
        got, _ = compare(a, tb, pt)
        ok &= got == want
        print("%-4s %s: %s (expected %s)" % ("ok" if got == want else "FAIL", what, "agree" if got else "differ",
                                             "agree" if want else "differ"))
    print("# convergence self-test: %s" % ("PASS" if ok else "FAIL"))
    return 0 if ok else 1


def main(argv=None):
    if "--self-test" in (sys.argv[1:] if argv is None else argv):
        return self_test()
    a = parse(argv)
    try:
        import h5py, numpy, torch, torchvision   # noqa: F401  (presence check)
    except ImportError as e:
        print("SKIP: convergence.py needs torch, torchvision, h5py and numpy (%s)" % e)
        return SKIP
    if a.device.startswith("cuda") and not torch.cuda.is_available():
        print("SKIP: convergence.py: --device %s but torch sees no CUDA device" % a.device)
        return SKIP
    os.makedirs(a.out, exist_ok=True)
    data, init = os.path.join(a.out, "data.h5"), os.path.join(a.out, "init.h5")
    t0 = time.time()
    images, labels = make_data(a, data)
    state = make_init(a, init)
    print("# data: %d learnable samples of %d classes at %d px, %.0f MB (%.1f s)"
          % (a.pool, a.classes, a.image_size, images.nbytes / 1e6, time.time() - t0), flush=True)
    tb = run_trainbench(a, data, init)
    if tb is None:   # no PyTorch run to compare with: its device time is not spent
        os.remove(data)
        os.remove(init)
        print("# convergence: FAIL: trainbench did not run through")
        return 1
    pt = run_torch(a, images, labels, state)
    os.remove(data)   # large at 224 px (and the weights at 1000 classes), both made again from the seed
    os.remove(init)
    with open(os.path.join(a.out, "curves.tsv"), "w") as f:
        f.write("step\tlr_trainbench\tloss_trainbench\tlr_pytorch\tloss_pytorch\n")
        for i in range(min(len(tb[1]), len(pt[1]))):
            f.write("%d\t%.8g\t%.6f\t%.8g\t%.6f\n" % (i + 1, tb[0][i], tb[1][i], pt[0][i], pt[1][i]))
    ok, lines = compare(a, tb, pt)
    with open(os.path.join(a.out, "summary.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    if not a.no_plot:
        plot(a, tb, pt, os.path.join(a.out, "curves.png"))
    print("# convergence: %s %d px batch %d %s, %d steps: %s"
          % (a.model, a.image_size, a.batch, a.precision, a.steps, "PASS" if ok else "FAIL"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
