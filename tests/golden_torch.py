"""golden_torch.py: one PyTorch training step for the golden tests, with every
ReLU watched and, on request, steered.

A float32 ResNet step and its float64 truth differ in two ways. Rounding
moves every value a little. And a ReLU whose input lies within that
rounding of zero can land on the other side: its output is then 0 instead
of a tiny value (harmless), but its backward mask lets the whole upstream
gradient through instead of none (or the reverse), and in a ResNet with
small BatchNorm populations that one element moves whole gradient tensors by
percents. Every float32 implementation flips a few such ReLUs per step and
which ones depends on its summation order (measured on the golden resnet50
fixture: 1 to 4 flips per step for PyTorch's and trainbench's float32).

So the golden tests compare float32 results against the float64 step run
with the SAME ReLU decisions: run_step(..., force=flips) is the float64
step in which the ReLUs listed in `flips` take the other branch (forward
output x*m and backward mask m, m the flipped mask), i.e. the exact answer
for the decisions the float32 run made. What is left is rounding, which is
what "PyTorch's own float32 error" must mean for a fair bound.

ReLU calls are numbered in forward order (torchvision calls each block's
`relu` module two or three times); `flips` maps call k to flat indices into
that call's input, NCHW order.
"""
import copy

import numpy as np
import torch
import torch.nn.functional as F

from gen_golden import AMP_FLOOR_VARIANTS, CUDA_FLOOR_VARIANTS, FLOOR_VARIANTS, step_datasets


class _MaskedReLU(torch.autograd.Function):
    """y = x*m, dx = dy*m: a ReLU whose on/off decisions are given."""

    @staticmethod
    def forward(ctx, x, m):
        ctx.save_for_backward(m)
        return x * m

    @staticmethod
    def backward(ctx, g):
        (m,) = ctx.saved_tensors
        return g * m, None


class ReluTracker:
    """Numbers the ReLU calls of one forward pass, records their inputs (and,
    with grads=True, the gradient arriving at their outputs and the output of
    the BatchNorm before each), and applies forced flips."""

    def __init__(self, force=None, capture=False, grads=False):
        self.force = force or {}
        self.capture = capture or grads
        self.grads = grads
        self.pre = []        # [k] float64 numpy NCHW: the ReLU's input
        self.bn = []         # [k] name of the BatchNorm feeding call k
        self.outs = []       # [k] output tensors (grads=True), for .grad
        self.bn_in = {}      # BatchNorm name -> float64 numpy input (grads=True)
        self.conv_in = {}    # BatchNorm name -> input of the conv before it (grads=True)
        self.conv = {}       # BatchNorm name -> that nn.Conv2d (grads=True)

    def call(self, x, bn_name):
        k = len(self.bn)
        self.bn.append(bn_name)
        if self.capture:
            self.pre.append(x.detach().cpu().to(torch.float64).contiguous().numpy().copy())
        idx = self.force.get(k)
        if idx is not None and len(idx):
            # forced runs are NCHW (run_step's default configuration)
            m = (x.detach() > 0).to(x.dtype).contiguous()
            flat = m.view(-1)
            at = torch.as_tensor(np.asarray(idx, dtype=np.int64))
            flat[at] = 1.0 - flat[at]
            y = _MaskedReLU.apply(x.contiguous(), m)
        else:
            y = torch.relu(x)
        if self.grads:
            y.retain_grad()
            self.outs.append(y)
        return y

    def gout(self, k):
        """dL/d(output of ReLU call k), float64 numpy NCHW (grads=True)."""
        g = self.outs[k].grad
        return np.zeros(self.pre[k].shape) if g is None else g.cpu().to(torch.float64).contiguous().numpy()


class _TrackedReLU(torch.nn.Module):
    def __init__(self, tracker, owner):
        super().__init__()
        self.tracker, self.owner, self.calls = tracker, owner, 0

    def forward(self, x):
        # the BatchNorm before the n-th call of this module: the stem's bn1,
        # or a block's bn1, bn2 (, bn3)
        name = ("%s.bn%d" % (self.owner, self.calls + 1)) if self.owner else "bn1"
        self.calls += 1
        return self.tracker.call(x, name)


def install(model, tracker):
    """Replaces every nn.ReLU of a torchvision ResNet by a tracked one."""
    for name, mod in list(model.named_modules()):
        for child_name, child in list(mod.named_children()):
            if isinstance(child, torch.nn.ReLU):
                setattr(mod, child_name, _TrackedReLU(tracker, name))
    if tracker.grads:   # what golden_flips needs: each BN's input, its conv and the conv's input
        def keep(store, key):
            return lambda m, i, o: store.__setitem__(
                key, i[0].detach().cpu().to(torch.float64).contiguous().numpy().copy())
        for name, mod in model.named_modules():
            if "downsample" in name:
                continue
            head, _, last = name.rpartition(".")
            if isinstance(mod, torch.nn.BatchNorm2d):
                mod.register_forward_hook(keep(tracker.bn_in, name))
            elif isinstance(mod, torch.nn.Conv2d) and last.startswith("conv"):
                bn = (head + "." if head else "") + "bn" + last[4:]
                tracker.conv[bn] = mod
                mod.register_forward_hook(keep(tracker.conv_in, bn))


class StepResult:
    """datasets: what `trainbench step` writes (step_datasets: float32 numpy);
    state, momentum: the state after the update rounded to float32 (the
    next step's start, as it is when steps chain through float32 files);
    tracker: the ReLU record; skipped: a float16 step whose scaled gradients
    overflowed (GradScaler skipped the update)."""

    def __init__(self, datasets, state, momentum, tracker, skipped=False):
        self.datasets, self.state, self.momentum, self.tracker = datasets, state, momentum, tracker
        self.skipped = skipped


def grad_scaler(device, init_scale):
    """torch's GradScaler at a constant scale (growth never reached)."""
    kw = dict(init_scale=init_scale, growth_interval=1 << 30)
    if hasattr(torch, "amp") and hasattr(torch.amp, "GradScaler"):
        return torch.amp.GradScaler(device, **kw)
    return torch.cuda.amp.GradScaler(**kw)


def _round_bf16(t):
    """t rounded to bfloat16 and back (differentiable: the gradient through
    it is rounded the same way, as a 16-bit activation's gradient is)."""
    return t.to(torch.bfloat16).to(torch.float32)


def emulate_bf16(model):
    """autocast's bfloat16 on a float32 model, in float32 arithmetic: every
    Conv2d's and Linear's input, weight and output rounded to bfloat16
    (float32 accumulation between, as cuDNN and cuBLAS do), every
    BatchNorm's output and every residual block's output rounded (16-bit
    activations; BatchNorm computes in float32 from 16-bit input, as
    cuDNN's). Max pooling and ReLU keep bfloat16 values bfloat16; the loss
    is float32, as under autocast. The same on every CPU, unlike PyTorch's
    own CPU bfloat16 kernels."""
    import torchvision.models.resnet as tvr

    def conv_fwd(mod):
        return lambda x: _round_bf16(F.conv2d(_round_bf16(x), _round_bf16(mod.weight),
                                              None if mod.bias is None else _round_bf16(mod.bias),
                                              mod.stride, mod.padding, mod.dilation, mod.groups))

    def linear_fwd(mod):
        return lambda x: _round_bf16(F.linear(_round_bf16(x), _round_bf16(mod.weight),
                                              None if mod.bias is None else _round_bf16(mod.bias)))

    def rounded_out(fwd):
        return lambda x: _round_bf16(fwd(x))

    for mod in model.modules():
        if isinstance(mod, torch.nn.Conv2d):
            mod.forward = conv_fwd(mod)
        elif isinstance(mod, torch.nn.Linear):
            mod.forward = linear_fwd(mod)
        elif isinstance(mod, (torch.nn.BatchNorm2d, tvr.BasicBlock, tvr.Bottleneck)):
            mod.forward = rounded_out(mod.forward)


def _configuration(variant, threads, device):
    """(device, mkldnn, channels_last, threads, tf32, autocast dtype, "emu" or None) of a variant."""
    if variant in AMP_FLOOR_VARIANTS:
        dev, channels_last, amp = AMP_FLOOR_VARIANTS[variant]
        return dev, True, channels_last, threads, False, "emu" if amp == "bfloat16-emu" else getattr(torch, amp)
    if variant in CUDA_FLOOR_VARIANTS:
        channels_last, tf32 = CUDA_FLOOR_VARIANTS[variant]
        return "cuda", False, channels_last, threads, tf32, None
    mkldnn, channels_last, nthreads = FLOOR_VARIANTS[variant] if variant else (True, False, threads)
    return device or "cpu", mkldnn, channels_last, nthreads, False, None


def run_step(template, state, momentum, images, labels, a, dtype, variant=None, force=None,
             capture=False, grads=False, threads=None, device=None):
    """One torch.optim.SGD step (a: lr, momentum, weight_decay, nesterov,
    label_smoothing, and loss_scale for float16 autocast) of `template` (a
    torchvision ResNet, left untouched) loaded with `state` (state_dict) and
    `momentum` ({name: tensor}, None: a fresh optimizer), on images
    [N,3,H,W] float32 / labels int64, computed in `dtype`. variant: a
    gen_golden FLOOR_VARIANTS name (oneDNN or native convolutions, NCHW or
    channels-last, threads), CUDA_FLOOR_VARIANTS name (PyTorch on the GPU,
    TF32 on or off) or AMP_FLOOR_VARIANTS name (torch.autocast in bfloat16
    or float16 with float32 weights, dtype must be float32; float16 through
    GradScaler at a.loss_scale); results come back to the host. None:
    oneDNN (unused in float64), NCHW, `threads` (default: torch's current),
    on `device` (default cpu; cuda computes the float64 truth on the GPU).
    force: ReLU flips (module doc). capture: record ReLU inputs; grads: also
    the gradients at ReLU outputs and the BatchNorm outputs."""
    dev, mkldnn, channels_last, nthreads, tf32, amp = _configuration(variant, threads, device)
    if dev == "cuda" and not torch.cuda.is_available():
        raise SystemExit("golden: %s needs PyTorch with a CUDA device" % (variant or "--truth-device cuda"))
    if amp is not None and dtype != torch.float32:
        raise SystemExit("golden: autocast variant %s runs on float32 weights, not %s" % (variant, dtype))
    saved_threads = torch.get_num_threads()
    if nthreads:
        torch.set_num_threads(nthreads)
    saved_tf32 = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    try:
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = tf32
        with torch.backends.mkldnn.flags(enabled=mkldnn):
            m = copy.deepcopy(template)
            m.load_state_dict(state)
            m = m.to(dtype).to(dev).train()
            x = images.to(dtype).to(dev)
            labels = labels.to(dev)
            if channels_last:
                m = m.to(memory_format=torch.channels_last)
                x = x.contiguous(memory_format=torch.channels_last)
            tracker = ReluTracker(force, capture, grads)
            install(m, tracker)
            if amp == "emu":
                emulate_bf16(m)
            opt = torch.optim.SGD(m.parameters(), lr=a.lr, momentum=a.momentum, dampening=0,
                                  weight_decay=a.weight_decay, nesterov=a.nesterov)
            names = {p: n for n, p in m.named_parameters()}
            if momentum is not None:
                for p in m.parameters():
                    buf = momentum[names[p]].to(dtype).to(dev).clone()
                    if channels_last and buf.dim() == 4:
                        buf = buf.contiguous(memory_format=torch.channels_last)
                    opt.state[p]["momentum_buffer"] = buf
            scaler = grad_scaler(dev, a.loss_scale) if amp == torch.float16 else None
            if amp is not None and amp != "emu":
                with torch.autocast(device_type=dev, dtype=amp):
                    logits = m(x)
                    loss = F.cross_entropy(logits, labels, label_smoothing=a.label_smoothing)
            else:
                logits = m(x)
                loss = F.cross_entropy(logits, labels, label_smoothing=a.label_smoothing)
            skipped = False
            if scaler is not None:
                scaler.scale(loss).backward()
                scaler.unscale_(opt)          # p.grad: the unscaled gradient torch steps with
                skipped = not all(bool(torch.isfinite(p.grad).all()) for p in m.parameters())
            else:
                loss.backward()
            grads_d = {names[p]: p.grad.detach().clone() for p in m.parameters()}
            if scaler is not None:
                scaler.step(opt)
                scaler.update()
            else:
                opt.step()
            mom = None
            if a.momentum != 0 and all(opt.state[p].get("momentum_buffer") is not None for p in m.parameters()):
                mom = {names[p]: opt.state[p]["momentum_buffer"] for p in m.parameters()}
            d = step_datasets(m, mom, loss.float(), logits.float(), grads_d)
            with torch.no_grad():
                nstate = {n: (t.detach().float() if t.is_floating_point() else t.detach()).cpu().contiguous().clone()
                          for n, t in m.state_dict().items()}
                nmom = None if mom is None else {n: t.detach().float().cpu().contiguous().clone()
                                                 for n, t in mom.items()}
            if not grads:
                tracker.outs = []
            return StepResult(d, nstate, nmom, tracker, skipped)
    finally:
        torch.set_num_threads(saved_threads)
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved_tf32


def flips_between(pre, truth):
    """{k: flat indices} where the ReLU inputs `pre` (one run's record) and
    `truth` (the float64 run's) are on different sides of zero."""
    out = {}
    for k, (x, t) in enumerate(zip(pre, truth)):
        idx = np.flatnonzero((x.reshape(-1) > 0) != (t.reshape(-1) > 0))
        if idx.size:
            out[k] = idx
    return out


def flip_key(flips):
    """Hashable form of a flips dict (to share one float64 run between runs
    that made the same decisions)."""
    return tuple(sorted((k, tuple(int(i) for i in v)) for k, v in flips.items() if len(v)))


def count_flips(flips):
    return sum(len(v) for v in flips.values())


def describe_flips(flips, truth_pre, bn_names, noise):
    """One line per flip: the BatchNorm before the ReLU, the element
    [n,c,h,w], its float64 input and that input over PyTorch float32's
    largest error on the tensor."""
    lines = []
    for k in sorted(flips):
        shape = truth_pre[k].shape
        for i in flips[k]:
            x = float(truth_pre[k].reshape(-1)[i])
            lines.append("ReLU after %s at %s: float64 input %+.3e = %.2f x PyTorch float32's max error "
                         "%.2e there" % (bn_names[k], list(np.unravel_index(int(i), shape)), x,
                                         abs(x) / noise[k] if noise[k] > 0 else float("inf"), noise[k]))
    return lines
