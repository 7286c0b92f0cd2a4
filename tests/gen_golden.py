#!/usr/bin/env python3
"""gen_golden.py: golden fixtures for `trainbench step`, computed by PyTorch.

Builds torchvision.models.<model>(num_classes=C) in train mode, makes its
weights non-trivial (torchvision's conv/fc init, but every BatchNorm weight,
bias, running mean/var and num_batches_tracked randomised, and fc.bias too),
then runs K steps of torch.optim.SGD on random batches and writes, in --out:

  ckpt0.h5       checkpoint before step 1 (no /momentum: fresh optimizer)
  batch{k}.h5    /images float32 [N,3,H,W], /labels int64 [N]        k=1..K
  ref{k}.h5      what `trainbench step` must write for step k: a complete
                 checkpoint after the update (step attribute = k, /params,
                 /momentum) plus /loss and /logits (forward of step k, train
                 mode, before the update) and /grads/<name> (raw p.grad)
  args.json      the step flags (--lr ...) so a driver passes trainbench the
                 same hyper-parameters
  floor{k}.h5    only with --floor (needs --compute-dtype float64): PyTorch's
                 own FLOAT32 results for step k started from the reference
                 state before it (ckpt0.h5 for step 1, ref{k-1}.h5 after:
                 "teacher forcing"), same layout as ref{k}.h5. The step is
                 run in several PyTorch float32 configurations (oneDNN or
                 native convolutions, NCHW or channels-last, 1 or 2 threads:
                 --floor-variants) and each tensor is taken from the one
                 farthest from ref{k}, so max|floor-ref| per tensor is the
                 worst PyTorch float32 error against the float64 truth: the
                 "float32 floor" compare_h5.py --floor uses. One float32 run
                 is one draw: whether a ReLU input within rounding of zero
                 flips sign depends on the summation order, and a flip moves
                 gradients by up to tens of percent. These floor files hold
                 the plain errors, flips included, for looking at by hand;
                 the golden tests (golden_step.py --floor) measure the floor
                 in-process with each run's ReLU decisions matched in its
                 float64 reference (golden_torch.py), which is rounding only

The optimizer state is carried across steps, so ref{k} is step k of one run.
With --compute-dtype float64 PyTorch computes in double and the state is
rounded to float32 after every step, exactly as it is when steps chain
through float32 files, so ref{k} is also step k started from ref{k-1}.h5.
Formats: see DESIGN.md "Contracts other tools rely on". Deterministic for a
given --seed, torch version and --torch-threads; the floor also depends on
the CPU (oneDNN picks its kernels by instruction set).

  /usr/bin/python3 tests/gen_golden.py --model resnet18 --classes 10 \\
      --batch 4 --height 64 --width 64 --steps 3 --lr 0.01 --momentum 0.9 \\
      --weight-decay 5e-4 --seed 72 --compute-dtype float64 --floor \\
      --torch-threads 1 --out /tmp/golden18
"""
import argparse
import copy
import json
import os
import sys
import time

import h5py
import numpy as np
import torch
import torch.nn.functional as F
import torchvision

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "model"))
from convert_torchvision import git_revision  # noqa: E402  (the checkpoints' provenance, one definition)

MODELS = ("resnet18", "resnet34", "resnet50", "resnet101", "resnet152")
BN_BUFFERS = ("running_mean", "running_var", "num_batches_tracked")


def build_model(name, classes, seed, residual_gamma=1.0):
    """torchvision ResNet with randomised BN parameters/buffers and fc.bias.
    residual_gamma scales the weight of each block's last BatchNorm (the
    16-bit golden tests: 0.1, near-identity blocks as zero_init_residual
    starts them). At 1 the randomised ResNet-50 step (batch 8, 96x96) is so
    badly conditioned that scaling the input by 1 + 2^-9 noise moves its
    gradients by 94 % (median relative L2 over the tensors) even in float64,
    and every 16-bit result is as far from the truth (PyTorch CPU bfloat16:
    126 %); at 0.1, 14 % (bfloat16: 24 %)."""
    torch.manual_seed(seed)
    model = getattr(torchvision.models, name)(weights=None, num_classes=classes)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                m.weight.uniform_(0.5, 1.5)
                m.bias.normal_(0.0, 0.1)
                m.running_mean.normal_(0.0, 0.1)
                m.running_var.uniform_(0.5, 2.0)
                m.num_batches_tracked.fill_(int(torch.randint(0, 1001, ()).item()))
        model.fc.bias.normal_(0.0, 0.1)
        if residual_gamma != 1.0:
            for m in model.modules():
                if isinstance(m, (torchvision.models.resnet.BasicBlock, torchvision.models.resnet.Bottleneck)):
                    (m.bn3 if hasattr(m, "bn3") else m.bn2).weight.mul_(residual_gamma)
    return model.train()


def write_root_attrs(f, a, step, compute_dtype=None):
    f.attrs["model"] = a.model                     # str -> vlen UTF-8
    f.attrs["classes"] = np.int64(a.classes)
    f.attrs["image_size"] = np.int64(a.height)     # batch file is authoritative
    f.attrs["step"] = np.int64(step)
    f.attrs["epoch"] = np.int64(0)
    f.attrs["seed"] = np.int64(a.seed)
    f.attrs["trainbench_version"] = "gen_golden.py (torch %s, %s)" % (torch.__version__,
                                                                  compute_dtype or a.compute_dtype)
    f.attrs["git_revision"] = a.git_revision


def as_array(name, t):
    """One dataset's value: float tensors as float32, num_batches_tracked as an int64 scalar."""
    t = t.detach().cpu()
    if name.endswith("num_batches_tracked"):
        return np.int64(t.item())
    return t.to(torch.float32).contiguous().numpy()


def state_datasets(model, momentum):
    """{dataset path: array} of a checkpoint: /params (state_dict) and /momentum."""
    d = {"params/" + n: as_array(n, t) for n, t in model.state_dict().items()}
    if momentum is not None:
        d.update({"momentum/" + n: as_array(n, t) for n, t in momentum.items()})
    return d


def step_datasets(model, momentum, loss, logits, grads):
    """{dataset path: array} of a step file: the checkpoint after the update plus
    /loss, /logits and /grads."""
    d = state_datasets(model, momentum)
    d["loss"] = np.float32(loss.item())
    d["logits"] = as_array("logits", logits)
    d.update({"grads/" + n: as_array(n, t) for n, t in grads.items()})
    return d


def write_file(path, a, step, datasets, compute_dtype=None):
    with h5py.File(path, "w") as f:
        write_root_attrs(f, a, step, compute_dtype)
        for name, v in datasets.items():
            f.create_dataset(name, data=v)


def round_state_to_float32(model, opt):
    """float64 mode: the state between steps lives in float32 files, so round it
    (params, BN buffers, momentum) exactly as a chained `trainbench step` sees it."""
    with torch.no_grad():
        tensors = list(model.parameters()) + list(model.buffers())
        tensors += [st["momentum_buffer"] for st in opt.state.values() if st.get("momentum_buffer") is not None]
        for t in tensors:
            if t.is_floating_point():
                t.copy_(t.float())


# PyTorch float32 configurations the floor is taken over: each computes the
# same step with a different summation order (oneDNN or PyTorch's own
# convolutions, NCHW or channels-last kernels, 1 or 2 threads), i.e. several
# float32 implementations, not one draw. name: (mkldnn, channels_last, threads)
FLOOR_VARIANTS = {
    "mkldnn-nchw-1t": (True, False, 1), "mkldnn-nchw-2t": (True, False, 2),
    "mkldnn-nhwc-1t": (True, True, 1), "mkldnn-nhwc-2t": (True, True, 2),
    "native-nchw-1t": (False, False, 1), "native-nchw-2t": (False, False, 2),
    "native-nhwc-1t": (False, True, 1), "native-nhwc-2t": (False, True, 2),
}
# PyTorch on the GPU (needs torch with CUDA): the floor of the GPU tf32 golden
# tests is PyTorch's own TF32 error, NCHW and channels-last, (channels_last,
# tf32). Not part of 'all'.
CUDA_FLOOR_VARIANTS = {
    "cuda-tf32-nchw": (False, True), "cuda-tf32-nhwc": (True, True),
    "cuda-fp32-nchw": (False, False),
}
# PyTorch mixed precision (torch.autocast, float32 weights, 16-bit
# convolutions and GEMMs): the floor of the 16-bit golden tests, NCHW and
# channels-last. name: (device, channels_last, autocast dtype). float16 steps
# go through torch's GradScaler at the case's constant --loss-scale. The CPU
# ones: bfloat16 only (CPU autocast has no float16 in older torch).
# cpu-bf16emu-*: autocast's bfloat16 emulated in float32 (golden_torch.py's
# emulate_bf16: the inputs, weights and outputs of every convolution and
# linear layer, every BatchNorm's and every block's output rounded to
# bfloat16, float32 accumulation as on a GPU), which runs the 16-bit rule
# in CI: the same on every CPU, where PyTorch's own CPU bfloat16 kernels
# are not (on a CPU without AVX-512 a 3x3 convolution's relative L2 error is
# 2.7e-2 against 2.9e-3 emulated: there the rule's planted errors passed).
# Not part of 'all'.
AMP_FLOOR_VARIANTS = {
    "cpu-bf16-nchw": ("cpu", False, "bfloat16"), "cpu-bf16-nhwc": ("cpu", True, "bfloat16"),
    "cpu-bf16emu-nchw": ("cpu", False, "bfloat16-emu"), "cpu-bf16emu-nhwc": ("cpu", True, "bfloat16-emu"),
    "cuda-bf16-nchw": ("cuda", False, "bfloat16"), "cuda-bf16-nhwc": ("cuda", True, "bfloat16"),
    "cuda-fp16-nchw": ("cuda", False, "float16"), "cuda-fp16-nhwc": ("cuda", True, "float16"),
}


def float32_step(model32, momentum32, images, labels, a, variant):
    """PyTorch float32, one step from a float32 copy of the state (model32 and
    its momentum buffers by name, None: fresh optimizer), in one FLOOR_VARIANTS
    configuration. Leaves model32 alone; returns step_datasets()."""
    mkldnn, channels_last, threads = FLOOR_VARIANTS[variant]
    saved_threads = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        with torch.backends.mkldnn.flags(enabled=mkldnn):
            m = copy.deepcopy(model32).train()
            x = images
            if channels_last:
                m = m.to(memory_format=torch.channels_last)
                x = images.contiguous(memory_format=torch.channels_last)
            opt = torch.optim.SGD(m.parameters(), lr=a.lr, momentum=a.momentum, dampening=0,
                                  weight_decay=a.weight_decay, nesterov=a.nesterov)
            names = {p: n for n, p in m.named_parameters()}
            if momentum32 is not None:
                for p in m.parameters():
                    buf = momentum32[names[p]].clone()
                    if channels_last and buf.dim() == 4:
                        buf = buf.contiguous(memory_format=torch.channels_last)
                    opt.state[p]["momentum_buffer"] = buf
            logits = m(x)
            loss = F.cross_entropy(logits, labels, label_smoothing=a.label_smoothing)
            loss.backward()
            grads = {names[p]: p.grad.detach().clone() for p in m.parameters()}
            opt.step()
            momentum = None
            if a.momentum != 0:
                momentum = {names[p]: opt.state[p]["momentum_buffer"] for p in m.parameters()}
            return step_datasets(m, momentum, loss, logits, grads)
    finally:
        torch.set_num_threads(saved_threads)


def max_abs_diff(x, ref):
    return float(np.max(np.abs(np.asarray(x, np.float64) - np.asarray(ref, np.float64)))) if np.size(ref) else 0.0


def worst_class_summary(errs, ref):
    """'grads 1.2e-01, ...': worst max|x-ref|/max|ref| per tensor class."""
    worst = {}
    for name, e in errs.items():
        top = name.split("/", 1)[0]
        m = float(np.max(np.abs(ref[name]))) if np.size(ref[name]) else 0.0
        worst[top] = max(worst.get(top, 0.0), e / m if m > 0 else 0.0)
    return ", ".join("%s %.2e" % (g, worst[g]) for g in sorted(worst))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, choices=MODELS)
    ap.add_argument("--classes", type=int, required=True)
    ap.add_argument("--batch", type=int, required=True)
    ap.add_argument("--height", type=int, required=True)
    ap.add_argument("--width", type=int, required=True)
    ap.add_argument("--steps", type=int, required=True)
    ap.add_argument("--lr", type=float, required=True)
    ap.add_argument("--momentum", type=float, required=True)
    ap.add_argument("--weight-decay", type=float, required=True)
    ap.add_argument("--nesterov", action="store_true")
    ap.add_argument("--label-smoothing", type=float, default=0.0)
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--out", required=True, help="output directory (created)")
    ap.add_argument("--torch-threads", type=int, default=0,
                    help="torch.set_num_threads(N) (0: leave torch's default)")
    ap.add_argument("--compute-dtype", choices=("float32", "float64"), default="float32",
                    help="precision PyTorch computes in (default float32). Files are always "
                         "float32; with float64 the state is rounded to float32 after each step, "
                         "as it is when steps chain through files")
    ap.add_argument("--floor", action="store_true",
                    help="also write floor{k}.h5: PyTorch float32 for step k started from the "
                         "reference state of step k-1 (needs --compute-dtype float64)")
    ap.add_argument("--floor-variants", default="all", metavar="LIST",
                    help="PyTorch float32 configurations the floor is the worst of: 'all' (default: %s) "
                         "or a comma-separated subset" % ", ".join(FLOOR_VARIANTS))
    a = ap.parse_args(argv)
    a.floor_variants = list(FLOOR_VARIANTS) if a.floor_variants == "all" else a.floor_variants.split(",")
    for v in a.floor_variants:
        if v not in FLOOR_VARIANTS:
            ap.error("--floor-variants: unknown configuration %r (known: %s)" % (v, ", ".join(FLOOR_VARIANTS)))
    if a.floor and a.compute_dtype != "float64":
        ap.error("--floor needs --compute-dtype float64 (it measures float32 against the float64 truth)")
    if a.classes < 1 or a.batch < 1 or a.steps < 1 or a.height < 1 or a.width < 1:
        ap.error("--classes, --batch, --steps, --height and --width must be >= 1")
    if a.momentum == 0 and a.nesterov:
        ap.error("--nesterov needs --momentum > 0 (as torch.optim.SGD)")
    if a.torch_threads > 0:
        torch.set_num_threads(a.torch_threads)
    a.git_revision = git_revision()
    dtype = torch.float64 if a.compute_dtype == "float64" else torch.float32
    os.makedirs(a.out, exist_ok=True)
    t0 = time.time()

    model = build_model(a.model, a.classes, a.seed)
    write_file(os.path.join(a.out, "ckpt0.h5"), a, 0, state_datasets(model, None))
    model.to(dtype)   # exact: float32 -> float64, and a no-op for float32

    opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=a.momentum, dampening=0,
                          weight_decay=a.weight_decay, nesterov=a.nesterov)
    names = {p: n for n, p in model.named_parameters()}
    floor_tag = "float32 floor over %d PyTorch configurations, teacher-forced" % len(a.floor_variants)
    for k in range(1, a.steps + 1):
        images = torch.randn(a.batch, 3, a.height, a.width)          # float32
        labels = torch.randint(0, a.classes, (a.batch,), dtype=torch.int64)
        with h5py.File(os.path.join(a.out, "batch%d.h5" % k), "w") as f:
            f.create_dataset("images", data=images.numpy())
            f.create_dataset("labels", data=labels.numpy())
        if a.floor:   # float32 copy of the state before step k (= ref{k-1}.h5 exactly: it is float32-rounded)
            model32 = copy.deepcopy(model).to(torch.float32)
            momentum32 = None
            if any(opt.state[p].get("momentum_buffer") is not None for p in model.parameters() if p in opt.state):
                momentum32 = {names[p]: opt.state[p]["momentum_buffer"].to(torch.float32).clone()
                              for p in model.parameters()}

        opt.zero_grad(set_to_none=True)
        logits = model(images.to(dtype))
        loss = F.cross_entropy(logits, labels, label_smoothing=a.label_smoothing)
        loss.backward()
        grads = {n: p.grad.detach().clone() for n, p in model.named_parameters()}
        opt.step()
        if dtype != torch.float32:
            round_state_to_float32(model, opt)
        # torch keeps no buffers when momentum == 0: then /momentum is absent (= zeros)
        momentum = None
        if a.momentum != 0:
            momentum = {names[p]: opt.state[p]["momentum_buffer"] for p in model.parameters()}
        ref = step_datasets(model, momentum, loss, logits, grads)
        write_file(os.path.join(a.out, "ref%d.h5" % k), a, k, ref)
        print("gen_golden: step %d loss %.6f" % (k, loss.item()), flush=True)

        if a.floor:
            # per tensor, keep the configuration's result farthest from ref: max|floor-ref| is then
            # the worst PyTorch float32 error over the configurations
            floor, floor_err = {}, {}
            for v in a.floor_variants:
                t1 = time.time()
                d = float32_step(model32, momentum32, images, labels, a, v)
                errs = {n: max_abs_diff(x, ref[n]) for n, x in d.items()}
                for n, x in d.items():
                    if n not in floor or errs[n] > floor_err[n]:
                        floor[n], floor_err[n] = x, errs[n]
                print("gen_golden: step %d float32 %-15s loss %.6f, worst max_rel_err by class: %s (%.1f s)"
                      % (k, v, float(d["loss"]), worst_class_summary(errs, ref), time.time() - t1), flush=True)
                del d
            write_file(os.path.join(a.out, "floor%d.h5" % k), a, k, floor, floor_tag)
            print("gen_golden: step %d float32 floor (worst per tensor): %s"
                  % (k, worst_class_summary(floor_err, ref)), flush=True)
            del floor, model32, momentum32

    step_args = ["--lr", repr(a.lr), "--momentum", repr(a.momentum), "--weight-decay", repr(a.weight_decay)]
    if a.nesterov:
        step_args.append("--nesterov")
    if a.label_smoothing != 0:
        step_args += ["--label-smoothing", repr(a.label_smoothing)]
    info = {"model": a.model, "classes": a.classes, "batch": a.batch, "height": a.height,
            "width": a.width, "steps": a.steps, "seed": a.seed, "step_args": step_args,
            "compute_dtype": a.compute_dtype,
            "floor_variants": a.floor_variants if a.floor else [], "torch_threads": torch.get_num_threads(),
            "torch_version": torch.__version__, "torchvision_version": torchvision.__version__}
    with open(os.path.join(a.out, "args.json"), "w") as f:
        json.dump(info, f, indent=2)
        f.write("\n")
    size = sum(os.path.getsize(os.path.join(a.out, n)) for n in os.listdir(a.out))
    print("gen_golden: %s %d steps -> %s (%.1f MB, %.1f s, %d torch threads)"
          % (a.model, a.steps, a.out, size / 1e6, time.time() - t0, torch.get_num_threads()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
