#!/usr/bin/env python3
"""resnet50_step_cost.py: a roofline cost model of one ResNet-50 training
step (bf16 activations, NHWC, batch 256, 224 px) as trainbench's CUDA
backend runs it and as PyTorch eager runs it (channels_last, bf16 autocast,
cudnn.benchmark: bench/torch_resnet50.py), and estimates of what the
remaining performance levers would save. Every number is a MODEL ESTIMATE
computed from the op sequences below; none is a measurement.
docs/perf_review_resnet50.md explains the model and quotes this output.

The model. Each kernel of the step moves a number of bytes to and from HBM
and does a number of FLOPs; its floor is max(FLOPs / peak, bytes / HBM
bandwidth); the step's floor is the sum over its kernels (one stream, no
overlap between kernels). Bytes count every tensor a kernel reads or
writes once (no L2 reuse between kernels, no re-reads inside one): a
lower bound on the traffic. FLOPs are counted for convolutions and the
fully connected layer (2 per multiply-add); BatchNorm, ReLU, add, pooling,
conversions and SGD count only bytes.

trainbench's op sequence (model/graph.c, model/cuda/, --precision bf16):
  conv (cuDNN legacy API; dgrad with beta 1 where a gradient accumulates:
  each block's conv1, whose input also feeds the shortcut), BatchNorm fused
  with ReLU and with residual add + ReLU (cudnnBatchNormalizationForward-
  TrainingEx / BackwardEx, SPATIAL_PERSISTENT, BN_ACTIVATION /
  BN_ADD_ACTIVATION, ReLU bitmask in the reserve space), max pool (backward
  recomputes each window's argmax from x: reads x and dy), global average
  pool, fc (cuBLASLt, bias epilogues), softmax cross-entropy, per conv/fc
  weight a bf16 -> float32 gradient conversion after wgrad, one SGD kernel
  over the flat float32 buffers, per conv/fc weight a float32 -> bf16 OHWI
  refresh of the op copy, and the input op (input_rows: the resident float32
  rows gathered and converted to bf16 NHWC in one pass).
PyTorch eager (torchvision resnet50, channels_last, autocast bf16):
  the same cuDNN convolutions (dgrad always beta 0), cuDNN BatchNorm alone,
  then separate in-place ReLU, in-place residual add and ReLU kernels;
  backward: threshold_backward per ReLU, BatchNorm backward, an add kernel
  where autograd sums a block input's two gradients; max pool stores int64
  indices; autocast casts each weight to bf16 in forward and the bf16
  weight gradient back to float32; SGD foreach (weight decay, momentum mul,
  momentum add, parameter add: 44 bytes per parameter).
BatchNorm's traffic: forward reads x twice (statistics, then normalise:
  at batch 256 no layer's activation fits on chip), reads z, writes y and
  (fused ReLU) a 1-bit mask; backward reads x and dy (and the mask) twice
  (reduction, then dx) and writes dx (and dz).

Usage:
  python3 bench/resnet50_step_cost.py                    # H100 and H200 tables
  python3 bench/resnet50_step_cost.py --gpu h100 --layers # + one row per conv layer
  python3 bench/resnet50_step_cost.py --check            # the layer list against torchvision's counts (ctest)
"""
import argparse
import sys

E = 2                     # bytes per bf16 activation / op-weight element
GPUS = {                  # src/device/gpu_peaks.c: dense bf16 tensor TFLOP/s, HBM GB/s (datasheets)
    "h100": ("H100 SXM5 80GB", 989.4, 3350.0),
    "h200": ("H200 SXM 141GB", 989.4, 4800.0),
}
# Efficiencies for the "attainable" column (assumptions, not measurements):
# cuDNN convolutions at 70 % of the tensor peak, streaming kernels at 85 % of
# the HBM bandwidth. The floor column is at 100 % of both.
ETA_CONV = 0.70
ETA_MEM = 0.85
# Small kernels (weight conversions, a few-KB tensors) cost at least this on
# the GPU whatever their bytes: launch-to-launch gap inside a stream (graph
# replay), an assumption.
SMALL_KERNEL_US = 2.0

# MLPerf Training v4.0, NVIDIA (MXNet + DALI, batch 400 per GPU, every BN fused into the convs as lever 1
# does, stem padded to 4 channels, CUDA graphs): img/s per GPU (shared/GPU.md; public results). Used only to
# put the model's floor beside a measured stack of the same network.
MLPERF_IMG_S = {"h100": 7160.0, "h200": 7950.0}

TORCHVISION_R50_MACS = 4089184256      # forward multiply-adds at 224 px (tests/test_model.c)
TORCHVISION_R50_PARAMS = 25557032      # trainable elements (tests/test_model.c)


class Kernel:
    """One kernel: where it belongs (layer, stage, op category, phase 'fwd',
    'bwd' or 'opt'), its FLOPs and bytes; y: the bytes of the tensor a
    BatchNorm normalises or a max pool writes (for the levers)."""
    __slots__ = ("layer", "stage", "cat", "phase", "flops", "bytes", "conv", "y")

    def __init__(self, layer, stage, cat, phase, flops, nbytes, conv=False, y=0.0):
        self.layer, self.stage, self.cat, self.phase = layer, stage, cat, phase
        self.flops, self.bytes, self.conv, self.y = float(flops), float(nbytes), conv, float(y)

    def copy(self):
        return Kernel(self.layer, self.stage, self.cat, self.phase, self.flops, self.bytes, self.conv, self.y)


def resnet50_convs(image):
    """The conv layers in forward order: dicts with the conv's geometry and
    the BatchNorm after it (relu, residual), as model/resnet.c builds them."""
    convs = []
    h = (image + 2 * 3 - 7) // 2 + 1
    convs.append(dict(name="conv1", stage="stem", cin=3, cout=64, k=7, s=2, hin=image, hout=h, relu=True,
                      z=False, dgrad=False, acc=False, block_in=False))
    h = (h + 2 - 3) // 2 + 1  # max pool 3x3/2 pad 1
    inplanes = 64
    for stage, (planes, blocks) in enumerate(((64, 3), (128, 4), (256, 6), (512, 3))):
        for b in range(blocks):
            stride = 2 if (b == 0 and stage > 0) else 1
            name = "layer%d.%d" % (stage + 1, b)
            st = "layer%d" % (stage + 1)
            ho = (h + 2 - 3) // stride + 1
            w, outc = planes, planes * 4
            convs.append(dict(name=name + ".conv1", stage=st, cin=inplanes, cout=w, k=1, s=1, hin=h, hout=h,
                              relu=True, z=False, dgrad=True, acc=True, block_in=True))
            convs.append(dict(name=name + ".conv2", stage=st, cin=w, cout=w, k=3, s=stride, hin=h, hout=ho,
                              relu=True, z=False, dgrad=True, acc=False, block_in=False))
            if stride != 1 or inplanes != outc:
                convs.append(dict(name=name + ".downsample", stage=st, cin=inplanes, cout=outc, k=1, s=stride,
                                  hin=h, hout=ho, relu=False, z=False, dgrad=True, acc=False, block_in=False))
            convs.append(dict(name=name + ".conv3", stage=st, cin=w, cout=outc, k=1, s=1, hin=ho, hout=ho,
                              relu=True, z=True, dgrad=True, acc=False, block_in=False))
            inplanes, h = outc, ho
    return convs, inplanes, h


def conv_flops(c, n):
    return 2.0 * n * c["hout"] * c["hout"] * c["cout"] * c["cin"] * c["k"] * c["k"]


def step_kernels(n, image, classes, fw, stem_c=3):
    """The kernels of one training step for framework fw ('tb' or 'pt'),
    in launch order, and the trainable parameter count. stem_c: the input's
    channels (3; 4 models the padded stem)."""
    ks = []
    convs, feat, hf = resnet50_convs(image)
    conv_w = sum(c["cout"] * c["cin"] * c["k"] * c["k"] for c in convs) + classes * feat
    params = conv_w + sum(2 * c["cout"] for c in convs) + classes  # + BN gamma/beta + fc bias

    def A(c, h):  # an activation's bytes, [n, c, h, h] bf16
        return float(n) * c * h * h * E

    def K(layer, stage, cat, phase, flops, nbytes, conv=False, y=0.0):
        ks.append(Kernel(layer, stage, cat, phase, flops, nbytes, conv, y))

    def cin_of(c):
        return stem_c if c["name"] == "conv1" else c["cin"]

    def wn_of(c):
        return c["cout"] * cin_of(c) * c["k"] * c["k"]

    hs = convs[0]["hout"]                                       # the stem's conv output side (112)
    Xp, Yp = A(64, hs), A(64, (hs + 2 - 3) // 2 + 1)           # max pool in / out
    # ---- forward
    # the input: the resident float32 batch into the bf16 NHWC input (read 4, write 2 bytes)
    K("input", "stem", "input", "fwd", 0, n * 3 * image * image * 4 + A(stem_c, image))
    # weight copies, float32 -> bf16 (trainbench: refresh after SGD; PyTorch: autocast's casts)
    for c in convs:
        K(c["name"], c["stage"], "convert", "fwd", 0, wn_of(c) * (4 + E))
    K("fc", "head", "convert", "fwd", 0, classes * feat * (4 + E))
    for c in convs:
        X, Y = A(cin_of(c), c["hin"]), A(c["cout"], c["hout"])
        flops = conv_flops(dict(c, cin=cin_of(c)), n)
        K(c["name"], c["stage"], "conv_fwd", "fwd", flops, X + wn_of(c) * E + Y, conv=True)
        if fw == "tb":  # BN (+ add) (+ ReLU) in one cuDNN call
            mask = Y / (8 * E) if c["relu"] else 0.0
            K(c["name"], c["stage"], "bn_fwd", "fwd", 0, 2 * Y + (Y if c["z"] else 0) + Y + mask, y=Y)
        else:
            K(c["name"], c["stage"], "bn_fwd", "fwd", 0, 3 * Y, y=Y)
            if c["z"]:
                K(c["name"], c["stage"], "elementwise", "fwd", 0, 3 * Y)  # out += identity
            if c["relu"]:
                K(c["name"], c["stage"], "elementwise", "fwd", 0, 2 * Y)  # relu_
        if c["name"] == "conv1":  # the stem's max pool; PyTorch also writes int64 indices
            K("maxpool", "stem", "pool", "fwd", 0, Xp + Yp + (Yp / E * 8 if fw == "pt" else 0), y=Yp)
    X4 = A(feat, hf)
    K("avgpool", "head", "pool", "fwd", 0, X4 + n * feat * E)
    K("fc", "head", "linear", "fwd", 2.0 * n * feat * classes, n * feat * E + classes * feat * E + n * classes * E)
    # the loss: trainbench reads bf16 logits, writes bf16 dlogits; PyTorch casts to float32 first
    K("loss", "head", "loss", "fwd", 0, n * classes * (2 * E if fw == "tb" else E + 4 + 4 + 4 + E))
    # ---- backward, last layer first
    K("fc", "head", "linear", "bwd", 4.0 * n * feat * classes,
      2 * n * classes * E + 2 * n * feat * E + 2 * classes * feat * E)
    K("fc", "head", "convert", "bwd", 0, classes * feat * (E + 4))
    K("avgpool", "head", "pool", "bwd", 0, n * feat * E + X4)
    for c in reversed(convs):
        X, Y = A(cin_of(c), c["hin"]), A(c["cout"], c["hout"])
        flops = conv_flops(dict(c, cin=cin_of(c)), n)
        if c["name"] == "conv1":
            # trainbench recomputes each window's argmax from x (reads x and dy); PyTorch reads int64 indices
            K("maxpool", "stem", "pool", "bwd", 0, (Xp + Yp if fw == "tb" else Yp + Yp / E * 8) + Xp, y=Yp)
        if fw == "tb":
            mask = Y / (8 * E) if c["relu"] else 0.0
            K(c["name"], c["stage"], "bn_bwd", "bwd", 0, 2 * (2 * Y + mask) + Y + (Y if c["z"] else 0), y=Y)
        else:
            if c["relu"]:
                K(c["name"], c["stage"], "elementwise", "bwd", 0, 3 * Y)  # threshold_backward
            K(c["name"], c["stage"], "bn_bwd", "bwd", 0, 2 * 2 * Y + Y, y=Y)
        K(c["name"], c["stage"], "conv_wgrad", "bwd", flops, X + Y + wn_of(c) * E, conv=True)
        K(c["name"], c["stage"], "convert", "bwd", 0, wn_of(c) * (E + 4))  # bf16 weight grad -> float32
        if c["dgrad"]:
            acc = X if (c["acc"] and fw == "tb") else 0.0  # beta 1: dx read back
            K(c["name"], c["stage"], "conv_dgrad", "bwd", flops, Y + wn_of(c) * E + X + acc, conv=True)
        if c["block_in"] and fw == "pt":  # autograd sums the block input's two gradients
            K(c["name"], c["stage"], "elementwise", "bwd", 0, 3 * X)
    # ---- optimizer: trainbench one kernel (p, g, m read; p, m written); PyTorch foreach (44 B)
    K("sgd", "optimizer", "optimizer", "opt", 0, params * (20 if fw == "tb" else 44))
    return ks, params


def kernel_ms(k, peak_tflops, bw_gbs, eta_c=1.0, eta_m=1.0):
    t_c = k.flops / (peak_tflops * 1e12 * eta_c) if k.flops else 0.0
    t_m = k.bytes / (bw_gbs * 1e9 * eta_m)
    t = max(t_c, t_m) * 1e3
    if eta_m < 1.0 and not k.conv and k.bytes < 64e6:  # attainable: a small kernel costs its launch gap
        t = max(t, SMALL_KERNEL_US * 1e-3)
    return t


def total(ks, gpu, attainable):
    _, p, bw = GPUS[gpu]
    ec, em = (ETA_CONV, ETA_MEM) if attainable else (1.0, 1.0)
    return sum(kernel_ms(k, p, bw, ec, em) for k in ks)


def group(ks, key):
    out = {}
    for k in ks:
        g = out.setdefault(getattr(k, key), [0.0, 0.0, []])
        g[0] += k.flops
        g[1] += k.bytes
        g[2].append(k)
    return out


# ---- levers -----------------------------------------------------------------------------------

def lever_graph_fusion(ks, fwd=True, bwd=True):
    """cuDNN graph API, the MLPerf recipe: conv + BN statistics (GEN_STATS in
    the conv epilogue) for every BN after a conv but the stem's; BN scale +
    bias + ReLU applied in the next conv's prologue for the 32 bn1/bn2 of the
    blocks (no normalised tensor written or read back); backward: dReLU and
    the dBN reductions in the producing dgrad's epilogue for those 32 (one
    of the two BN backward passes gone). bn3 (+ residual) and the
    downsample BN keep a normalise pass (scale-bias-add-ReLU)."""
    out = []
    for k in ks:
        k2 = k.copy()
        inner = k.layer.endswith(".conv1") or k.layer.endswith(".conv2")
        if fwd and k.cat == "bn_fwd" and k.layer != "conv1":
            k2.bytes -= k.y                      # statistics from the conv epilogue
            if inner:
                k2.bytes = k.y / (8 * E)         # only the ReLU mask is written; apply in the next prologue
        if bwd and k.cat == "bn_bwd" and inner:
            k2.bytes -= 2 * k.y + k.y / (8 * E)  # the reduction pass: in the dgrad epilogue
        out.append(k2)
    return out


def lever_pool_indices(ks):
    """Max pool forward stores a 1-byte window index per output; backward
    reads dy and the index instead of x and dy (x is 4 outputs' bytes)."""
    out = []
    for k in ks:
        k2 = k.copy()
        if k.layer == "maxpool":
            idx = k.y / E  # one byte per output element
            k2.bytes += idx if k.phase == "fwd" else idx - 4 * k.y
        out.append(k2)
    return out


def lever_sgd_writes_bf16(ks):
    """The SGD kernel writes each conv/fc weight's bf16 OHWI copy as it
    updates the float32 master: the forward refresh (a read of the master,
    one launch per weight) goes, its bf16 writes move into SGD."""
    out, moved = [], 0.0
    for k in ks:
        if k.cat == "convert" and k.phase == "fwd":
            moved += k.bytes / (4 + E) * E
            continue
        out.append(k.copy())
    for k in out:
        if k.cat == "optimizer":
            k.bytes += moved
    return out


def conv1_rows(ks):
    return [k for k in ks if k.layer == "conv1" and k.conv]


def levers(n, image, classes, gpu):
    base, _ = step_kernels(n, image, classes, "tb")
    t0 = total(base, gpu, True)
    rows = []

    def saved(ks):
        return t0 - total(ks, gpu, True)

    # 1. graph-API fusion
    fused = lever_graph_fusion(base)
    rows.append(("1. cuDNN graph API: conv + BN-stats, BN-ReLU in the next conv's prologue, dReLU/dBN in dgrad",
                 saved(fused), "1500-2500", "includes 5; fused ops in the table + CPU twins + tests"))
    rows.append(("  1a. its forward half: conv + GEN_STATS, BN-ReLU applied in the next conv's prologue",
                 saved(lever_graph_fusion(base, bwd=False)), "900-1400", "a first stage of 1"))
    rows.append(("  1b. its backward half: dReLU + dBN reductions in the dgrad epilogue",
                 saved(lever_graph_fusion(base, fwd=False)), "600-1100", ""))
    # 2. stem padding: C=3 runs at an assumed 10 % of the tensor peak, padded at the usual 70 %
    _, p, _ = GPUS[gpu]
    f3 = sum(k.flops for k in conv1_rows(base))
    pad4, _ = step_kernels(n, image, classes, "tb", stem_c=4)
    f4 = sum(k.flops for k in conv1_rows(pad4))
    t3 = f3 / (p * 1e12 * 0.10) * 1e3
    t4 = f4 / (p * 1e12 * ETA_CONV) * 1e3
    extra_bytes_ms = (total(pad4, gpu, True) - total(base, gpu, True))  # the 4th channel's traffic (roofline)
    rows.append(("2. pad the stem's 3 input channels to 4 (tensor-core conv1 fwd + wgrad)",
                 t3 - t4 - max(extra_bytes_ms, 0.0), "120-200", "C=3 speed is a guess: measure conv1 first"))
    # 3. max pool indices
    rows.append(("3. max pool: forward stores 1-byte argmax, backward reads it instead of x",
                 saved(lever_pool_indices(base)), "80-120", "plus the recompute's L1 work (not modelled)"))
    # 4. SGD writes the bf16 copy
    rows.append(("4. SGD writes the bf16 OHWI weight copies (no refresh pass, 54 fewer launches)",
                 saved(lever_sgd_writes_bf16(base)), "80-150", "54 launch gaps more than bytes"))
    # 5. engine autotune for the graph-API plans: part of 1, assumed 5 % of conv time otherwise lost
    conv_ms = sum(kernel_ms(k, p, GPUS[gpu][2], ETA_CONV, ETA_MEM) for k in base if k.conv)
    rows.append(("5. engine autotune of graph-API plans (time the heuristic's top engines, cache the winner)",
                 0.05 * conv_ms, "200-300", "part of 1 (guess: 5 % of conv time); legacy convs are measured already"))
    # 0. done here: input_rows
    old_extra = n * 3 * image * image * 4 * 2  # the per-row device copies' read + write of float32
    rows.append(("0. (done) resident input in one input_rows pass instead of 256 copies + convert",
                 old_extra / (GPUS[gpu][2] * 1e9 * ETA_MEM) * 1e3 + 255 * SMALL_KERNEL_US * 1e-3, "~120",
                 "measured here in lines: +117 -47 code, +179 tests; plus ~256 host API calls a step"))
    return t0, rows, f3, f4, t3, t4


# ---- output -----------------------------------------------------------------------------------

CATS = ["conv_fwd", "conv_dgrad", "conv_wgrad", "bn_fwd", "bn_bwd", "elementwise", "pool", "linear", "loss",
        "convert", "optimizer", "input"]


def report(n, image, classes, gpu, show_layers):
    name, p, bw = GPUS[gpu]
    tb, params = step_kernels(n, image, classes, "tb")
    pt, _ = step_kernels(n, image, classes, "pt")
    print("# ResNet-50 training step cost model: batch %d, %d px, bf16 NHWC, %s (%.1f TFLOP/s bf16 dense, "
          "%.0f GB/s HBM)" % (n, image, name, p, bw))
    print("# MODEL ESTIMATES, not measurements. floor: max(FLOPs/peak, bytes/BW) per kernel, summed; "
          "attainable: conv at %.0f %% of peak, memory at %.0f %% of BW, small kernels >= %.0f us (assumptions)"
          % (100 * ETA_CONV, 100 * ETA_MEM, SMALL_KERNEL_US))
    flops = sum(k.flops for k in tb)
    print("# FLOPs per step %.3f TFLOP (forward %.3f); trainable params %d; kernels per step: trainbench %d, "
          "PyTorch eager %d" % (flops / 1e12, sum(k.flops for k in tb if k.phase == "fwd") / 1e12, params,
                                len(tb), len(pt)))
    print("# ridge point %.0f FLOP/byte: a kernel below it is bandwidth-bound at the roofline" % (p * 1e12 / (bw * 1e9)))
    print("# compute-only floor %.2f ms; bytes-only floor: trainbench %.2f ms (%.1f GB), PyTorch %.2f ms (%.1f GB)"
          % (flops / (p * 1e12) * 1e3, sum(k.bytes for k in tb) / (bw * 1e9) * 1e3, sum(k.bytes for k in tb) / 1e9,
             sum(k.bytes for k in pt) / (bw * 1e9) * 1e3, sum(k.bytes for k in pt) / 1e9))
    hdr = "%-12s %9s %9s %9s %9s %9s %9s %9s" % ("category", "TFLOP", "tb GB", "pt GB", "tb floor", "pt floor",
                                                  "tb att.", "pt att.")
    print("#\n# by op category (ms)\n" + hdr)
    gt, gp = group(tb, "cat"), group(pt, "cat")
    for c in CATS:
        a, b = gt.get(c, [0, 0, []]), gp.get(c, [0, 0, []])
        print("%-12s %9.3f %9.2f %9.2f %9.2f %9.2f %9.2f %9.2f" % (
            c, a[0] / 1e12, a[1] / 1e9, b[1] / 1e9, _ms(a[2], p, bw, 0), _ms(b[2], p, bw, 0),
            _ms(a[2], p, bw, 1), _ms(b[2], p, bw, 1)))
    print("%-12s %9.3f %9.2f %9.2f %9.2f %9.2f %9.2f %9.2f" % (
        "total", flops / 1e12, sum(k.bytes for k in tb) / 1e9, sum(k.bytes for k in pt) / 1e9,
        total(tb, gpu, False), total(pt, gpu, False), total(tb, gpu, True), total(pt, gpu, True)))
    print("# step img/s at the attainable estimate: trainbench %.0f, PyTorch eager %.0f"
          % (n / total(tb, gpu, True) * 1e3, n / total(pt, gpu, True) * 1e3))
    print("#\n# by stage (ms)\n" + hdr.replace("category", "stage   "))
    st, sp = group(tb, "stage"), group(pt, "stage")
    for s in ["stem", "layer1", "layer2", "layer3", "layer4", "head", "optimizer"]:
        a, b = st[s], sp[s]
        print("%-12s %9.3f %9.2f %9.2f %9.2f %9.2f %9.2f %9.2f" % (
            s, a[0] / 1e12, a[1] / 1e9, b[1] / 1e9, _ms(a[2], p, bw, 0), _ms(b[2], p, bw, 0),
            _ms(a[2], p, bw, 1), _ms(b[2], p, bw, 1)))
    if show_layers:
        print("#\n# by layer (conv + its BN and elementwise ops, forward and backward; ms at the floor)")
        print("%-22s %9s %9s %9s %9s %9s %6s" % ("layer", "GFLOP", "tb GB", "pt GB", "tb floor", "pt floor", "AI"))
        lt, lp = group(tb, "layer"), group(pt, "layer")
        for lay in lt:
            a, b = lt[lay], lp[lay]
            ai = a[0] / a[1] if a[1] else 0
            print("%-22s %9.1f %9.3f %9.3f %9.3f %9.3f %6.0f" % (
                lay, a[0] / 1e9, a[1] / 1e9, b[1] / 1e9, _ms(a[2], p, bw, 0), _ms(b[2], p, bw, 0), ai))
    ftb = total(tb, gpu, False)
    bn_gb = (gt["bn_fwd"][1] + gt["bn_bwd"][1]) / 1e9
    bn_ms = _ms(gt["bn_fwd"][2] + gt["bn_bwd"][2], p, bw, 0)
    conv_ms = sum(_ms(gt[c][2], p, bw, 0) for c in ("conv_fwd", "conv_dgrad", "conv_wgrad"))
    l12 = _ms(st["layer1"][2] + st["layer2"][2], p, bw, 0)
    print("# summary: BatchNorm %.1f of %.1f GB (%.0f %%), %.2f of %.2f floor ms; convolutions' floor %.2f ms "
          "(compute alone %.2f); layer1+layer2 %.2f floor ms (%.0f %%); %.0f us attainable GPU time per kernel"
          % (bn_gb, sum(k.bytes for k in tb) / 1e9, 100 * bn_gb / (sum(k.bytes for k in tb) / 1e9), bn_ms, ftb,
             conv_ms, flops / (p * 1e12) * 1e3, l12, 100 * l12 / ftb, total(tb, gpu, True) / len(tb) * 1e3))
    print("# trainbench - PyTorch, GB by category: " + ", ".join(
        "%s %+.2f" % (c, (gt.get(c, [0, 0])[1] - gp.get(c, [0, 0])[1]) / 1e9) for c in CATS
        if abs(gt.get(c, [0, 0])[1] - gp.get(c, [0, 0])[1]) > 1e7) +
        "; total %+.2f GB, %+.2f floor ms" % ((sum(k.bytes for k in tb) - sum(k.bytes for k in pt)) / 1e9,
                                              ftb - total(pt, gpu, False)))
    fused = lever_graph_fusion(tb)
    ml_ms = n / MLPERF_IMG_S[gpu] * 1e3
    ratio = ml_ms / total(fused, gpu, False)
    print("# beside a measured stack: MLPerf v4.0 %.0f img/s per GPU is %.1f ms per %d images; this model's floor for a "
          "step fused as it is (lever 1) is %.2f ms: measured / floor = %.2f. trainbench's floor %.2f ms x %.2f = "
          "%.1f ms (%.0f img/s), a projection, not a measurement"
          % (MLPERF_IMG_S[gpu], ml_ms, n, total(fused, gpu, False), ratio, total(tb, gpu, False), ratio,
             total(tb, gpu, False) * ratio, n / (total(tb, gpu, False) * ratio) * 1e3))
    t0, rows, f3, f4, t3, t4 = levers(n, image, classes, gpu)
    print("#\n# levers on trainbench's step (attainable estimate %.2f ms); saved ms are model estimates" % t0)
    print("# stem conv1 fwd+wgrad: %.1f GFLOP at C=3 (assumed 10 %% of peak: %.2f ms), %.1f GFLOP at C=4 (%.0f %%: "
          "%.2f ms)" % (f3 / 1e9, t3, f4 / 1e9, 100 * ETA_CONV, t4))
    print("%-100s %8s %10s %8s  %s" % ("lever", "saved ms", "lines", "ms/100L", "note"))
    for what, ms, lines, note in rows:
        lo, _, hi = lines.lstrip("~").partition("-")
        mid = (float(lo) + float(hi or lo)) / 2
        print("%-100s %8.2f %10s %8.2f  %s" % (what, ms, lines, 100 * ms / mid, note))


def _ms(kl, p, bw, att):
    ec, em = (ETA_CONV, ETA_MEM) if att else (1.0, 1.0)
    return sum(kernel_ms(k, p, bw, ec, em) for k in kl)


def check(image, classes):
    """The layer list against torchvision's resnet50 counts (tests/test_model.c)."""
    convs, feat, _ = resnet50_convs(image)
    macs = sum(conv_flops(c, 1) / 2 for c in convs) + feat * classes
    _, params = step_kernels(1, image, classes, "tb")
    ok = int(macs) == TORCHVISION_R50_MACS and params == TORCHVISION_R50_PARAMS and len(convs) == 53
    print("check: %d convs, forward MACs %d (torchvision %d), params %d (torchvision %d): %s" % (
        len(convs), int(macs), TORCHVISION_R50_MACS, params, TORCHVISION_R50_PARAMS, "PASS" if ok else "FAIL"))
    # the fused step moves fewer bytes than PyTorch's, and a lever never costs time
    tb, _ = step_kernels(256, image, classes, "tb")
    pt, _ = step_kernels(256, image, classes, "pt")
    t0, rows, *_ = levers(256, image, classes, "h100")
    ok2 = sum(k.bytes for k in tb) < sum(k.bytes for k in pt) and all(r[1] > 0 for r in rows)
    print("check: trainbench bytes < PyTorch bytes, every lever saves time: %s" % ("PASS" if ok2 else "FAIL"))
    return 0 if ok and ok2 else 1


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--gpu", choices=["h100", "h200", "both"], default="both")
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--image", type=int, default=224)
    ap.add_argument("--classes", type=int, default=1000)
    ap.add_argument("--layers", action="store_true", help="one row per conv layer")
    ap.add_argument("--check", action="store_true", help="check the layer list against torchvision's counts")
    a = ap.parse_args()
    if a.check:
        return check(224, 1000)
    for g in (["h100", "h200"] if a.gpu == "both" else [a.gpu]):
        report(a.batch, a.image, a.classes, g, a.layers)
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
