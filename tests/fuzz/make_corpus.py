#!/usr/bin/env python3
"""make_corpus.py - (re)writes the committed seed corpus of trainbench's fuzz
targets: tests/fuzz/corpus/{jpeg,ckpt,batchfile}/.

    /usr/bin/python3 tests/fuzz/make_corpus.py [--out tests/fuzz/corpus]

Needs Pillow, h5py (Debian: python3-pil, python3-h5py) and cjpeg
(libjpeg-turbo-progs). CI does not run it: the files it writes are committed,
and the ctest replay of each target checks them (a seed named ok-* must be
accepted by trainbench's reader, bad-* rejected; fuzz_common.h).

jpeg/: a 32-byte control block (fuzz_jpeg.c: decode mode, train/eval,
explicit crop box, flip, output format, side, ten uniform draws) followed by
a small JPEG of each kind the decoder has a path for.

ckpt/: ResNet-18 checkpoints with 2 classes (the target's model). A real one
is ~90 MB; here the big tensors are created but never written, which HDF5
reads as zeros, so a complete checkpoint that loads is a few tens of KB. The
bad-* variants each fail one check of tb_ckpt_read_meta / tb_ckpt_load.

batchfile/: /images [N,3,H,W] and /labels [N] files, valid ones in several
numeric types, layouts and filters, and ones that fail each check of
tb_batchfile_read.
"""
import argparse
import io
import os
import shutil
import struct
import subprocess
import sys
import tempfile

import h5py
import numpy as np
from PIL import Image

# ---- JPEG ------------------------------------------------------------------

FAST, PARTIAL, FULL, FAST_ALL = 0, 1, 2, 3
F32_NCHW, F32_NHWC, U8_NHWC = 0, 1, 2


def control(mode, train=False, box=None, flip=False, fmt=F32_NCHW, S=24, draws=None):
    """fuzz_jpeg.c's 32-byte control block."""
    flags = mode | (train << 2) | ((box is not None) << 3) | (flip << 4) | (fmt << 5)
    b = struct.pack("<BHB", flags, S - 1, 0)
    b += struct.pack("<4h", *(box if box is not None else (0, 0, 0, 0)))
    draws = draws or [0.3, 0.6, 0.5, 0.5, 0.2, 0.9, 0.1, 0.7, 0.4, 0.8]
    b += struct.pack("<10H", *[int(d * 65536) & 0xFFFF for d in draws])
    assert len(b) == 32
    return b


def picture(w, h, seed):
    """A smooth colour picture with some texture (compresses like a photo)."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w].astype(np.float32)
    r = 128 + 100 * np.sin(x / (3 + w / 8) + seed)
    g = 128 + 100 * np.cos(y / (3 + h / 8) - seed)
    b = 128 + 60 * np.sin((x + y) / 5.0)
    img = np.stack([r, g, b], -1) + rng.normal(0, 12, (h, w, 3))
    return Image.fromarray(np.clip(img, 0, 255).astype(np.uint8), "RGB")


def pil_jpeg(img, **kw):
    buf = io.BytesIO()
    img.save(buf, "JPEG", **kw)
    return buf.getvalue()


def cjpeg(img, *args):
    with tempfile.TemporaryDirectory() as d:
        src = os.path.join(d, "in.ppm" if img.mode == "RGB" else "in.pgm")
        img.save(src)
        return subprocess.run(["cjpeg", *args, src], check=True, stdout=subprocess.PIPE).stdout


def set_adobe_transform(jpeg, transform):
    """Rewrites the Adobe APP14 marker's transform byte (0: CMYK, 2: YCCK):
    the same scan data then goes through libjpeg's YCCK path."""
    i = jpeg.index(b"\xff\xee")
    t = i + 4 + 11  # marker, length, "Adobe", version, flags0, flags1, transform
    assert jpeg[i + 4:i + 9] == b"Adobe"
    return jpeg[:t] + bytes([transform]) + jpeg[t + 1:]


def sof_offset(jpeg):
    for m in (b"\xff\xc0", b"\xff\xc1", b"\xff\xc2", b"\xff\xc9", b"\xff\xca"):
        i = jpeg.find(m)
        if i >= 0:
            return i
    raise ValueError("no SOF marker")


def scan_offset(jpeg):
    i = jpeg.index(b"\xff\xda")
    return i + 2 + struct.unpack(">H", jpeg[i + 2:i + 4])[0]


def jpeg_seeds():
    s = {}
    p64 = picture(64, 48, 1)
    s["ok-rgb420-fast-eval"] = control(FAST, S=24) + pil_jpeg(p64, quality=75, subsampling=2)
    s["ok-rgb444-partial-train"] = control(PARTIAL, True, S=20, fmt=F32_NHWC) + \
        pil_jpeg(picture(33, 65, 2), quality=90, subsampling=0)
    s["ok-rgb422-full-eval"] = control(FULL, S=16, fmt=U8_NHWC) + pil_jpeg(picture(17, 9, 3), quality=85, subsampling=1)
    s["ok-gray-fastall-train"] = control(FAST_ALL, True, S=12) + pil_jpeg(p64.convert("L"), quality=80)
    s["ok-cmyk-fast-train"] = control(FAST, True, S=16) + pil_jpeg(picture(24, 24, 4).convert("CMYK"), quality=90)
    cmyk = pil_jpeg(picture(40, 24, 5).convert("CMYK"), quality=90)
    s["ok-ycck-partial-eval"] = control(PARTIAL, S=16) + set_adobe_transform(cmyk, 2)
    s["ok-progressive-fastall-eval"] = control(FAST_ALL, S=10) + \
        pil_jpeg(picture(40, 30, 6), quality=85, progressive=True)
    s["ok-progressive-gray-full-train"] = control(FULL, True, S=8) + \
        pil_jpeg(picture(30, 40, 7).convert("L"), quality=85, progressive=True)
    p = picture(48, 40, 8)
    s["ok-restart-partial-train"] = control(PARTIAL, True, S=20) + cjpeg(p, "-quality", "90", "-restart", "1B")
    s["ok-arithmetic-fast-eval"] = control(FAST, S=20) + cjpeg(p, "-arithmetic")
    s["ok-rgbcolorspace-full-eval"] = control(FULL, S=20) + cjpeg(p, "-rgb")
    s["ok-s440-fast-train"] = control(FAST, True, S=16) + cjpeg(p, "-sample", "1x2")
    s["ok-s411-partial-eval"] = control(PARTIAL, S=16) + cjpeg(p, "-sample", "4x1")
    s["ok-progressive-arith-restart"] = control(FAST_ALL, True, S=16) + \
        cjpeg(p, "-progressive", "-arithmetic", "-restart", "2")
    s["ok-1x1-eval"] = control(FAST, S=4) + pil_jpeg(picture(1, 1, 9))
    s["ok-1x1-full-train"] = control(FULL, True, S=3) + pil_jpeg(picture(1, 1, 10))
    s["ok-thin-1x60-eval"] = control(PARTIAL, S=8) + pil_jpeg(picture(1, 60, 11))
    s["ok-thin-60x1-train"] = control(FAST, True, S=8) + pil_jpeg(picture(60, 1, 12))
    s["ok-upscale-7x5-eval"] = control(FAST, S=64) + pil_jpeg(picture(7, 5, 13))
    s["ok-box-flip"] = control(FAST, box=(5, 9, 30, 40), flip=True, S=16) + pil_jpeg(p64)
    s["ok-box-whole-partial"] = control(PARTIAL, box=(0, 0, 48, 64), S=32, fmt=U8_NHWC) + pil_jpeg(p64)
    s["ok-train-fallback"] = control(FAST, True, S=16, draws=[0.99] * 10) + pil_jpeg(picture(90, 12, 14))
    meta = pil_jpeg(picture(20, 20, 15), quality=80, icc_profile=b"\0" * 128,
                    exif=b"Exif\0\0MM\0*\0\0\0\x08\0\0")
    i = meta.index(b"\xff\xdb")
    meta = meta[:i] + b"\xff\xfe\x00\x0ctrainbench" + meta[i:]  # a COM marker
    s["ok-markers-fast-eval"] = control(FAST, S=12) + meta
    s["ok-trailing-junk"] = control(FULL, S=12) + pil_jpeg(picture(20, 20, 16)) + b"\0junk" * 20
    good = pil_jpeg(picture(32, 32, 17), quality=80)
    s["bad-truncated"] = control(FAST, S=16) + good[:len(good) // 2]
    s["bad-truncated-eoi-appended"] = control(FULL, S=16) + good[:len(good) // 2] + b"\xff\xd9"
    so = scan_offset(good)
    corrupt = bytearray(good)
    for k in range(so + 4, len(good) - 2, 7):
        corrupt[k] = 0xFF if corrupt[k] != 0xFF else 0x00
    s["bad-corrupt-entropy"] = control(PARTIAL, S=16) + bytes(corrupt)
    s["bad-not-jpeg"] = control(FAST) + b"\x89PNG\r\n\x1a\n" + b"\0" * 32
    s["bad-empty"] = control(FAST)
    sof = sof_offset(good)
    p12 = bytearray(good)
    p12[sof + 4] = 12  # sample precision
    s["bad-precision12"] = control(FAST, S=16) + bytes(p12)
    lossless = bytearray(good)
    lossless[sof + 1] = 0xC3  # SOF3: lossless
    s["bad-lossless-sof3"] = control(FULL, S=16) + bytes(lossless)
    s["bad-box-outside"] = control(FAST, box=(40, 0, 20, 20), S=16) + pil_jpeg(p64)
    s["bad-box-negative"] = control(PARTIAL, box=(-1, 0, 20, 20), S=16) + pil_jpeg(p64)
    return s


# ---- checkpoints -------------------------------------------------------------

def resnet18_params(classes=2):
    """(name, shape, kind) in torchvision's state_dict order; kind: train,
    stat (BN running statistics) or counter (num_batches_tracked)."""
    out = []

    def bn(prefix, c):
        out.extend([(prefix + ".weight", (c,), "train"), (prefix + ".bias", (c,), "train"),
                    (prefix + ".running_mean", (c,), "stat"), (prefix + ".running_var", (c,), "stat"),
                    (prefix + ".num_batches_tracked", (), "counter")])

    out.append(("conv1.weight", (64, 3, 7, 7), "train"))
    bn("bn1", 64)
    cin = 64
    for li, c in enumerate((64, 128, 256, 512), 1):
        for b in range(2):
            p = "layer%d.%d" % (li, b)
            out.append((p + ".conv1.weight", (c, cin if b == 0 else c, 3, 3), "train"))
            bn(p + ".bn1", c)
            out.append((p + ".conv2.weight", (c, c, 3, 3), "train"))
            bn(p + ".bn2", c)
            if b == 0 and li > 1:
                out.append((p + ".downsample.0.weight", (c, cin, 1, 1), "train"))
                bn(p + ".downsample.1", c)
        cin = c
    out.append(("fc.weight", (classes, 512), "train"))
    out.append(("fc.bias", (classes,), "train"))
    return out


SMALL = 64  # tensors up to this many values are written (with data); bigger ones are left unwritten


def value_for(name, shape):
    n = int(np.prod(shape)) if shape else 1
    if name.endswith("running_var") or (name.endswith(".weight") and len(shape) == 1):
        return np.ones(shape, np.float32)
    return (np.arange(n, dtype=np.float32).reshape(shape) % 7 - 3) / 100


def write_ckpt(path, classes=2, attrs=None, drop=(), extra=(), override=None, momentum=False,
               libver="earliest", filters=None, skip_params=False, params_as_dataset=False):
    """A ResNet-18 checkpoint. override: name -> callable(group, name, shape, kind)
    that writes that tensor instead (both /params and /momentum)."""
    override = override or {}
    a = {"model": "resnet18", "classes": np.int64(classes), "image_size": np.int64(32),
         "step": np.int64(0), "epoch": np.int64(0), "seed": np.int64(0),
         "trainbench_version": "0.1.0", "git_revision": "fuzz-seed"}
    a.update(attrs or {})
    with h5py.File(path, "w", libver=libver) as f:
        for k, v in a.items():
            if v is None:
                continue
            if callable(v):
                v(f, k)
            else:
                f.attrs[k] = v
        if skip_params:
            return
        if params_as_dataset:
            f.create_dataset("params", data=np.zeros(4, np.float32))
            return
        groups = [("params", False)] + ([("momentum", True)] if momentum else [])
        for gname, trainable_only in groups:
            g = f.create_group(gname)
            for name, shape, kind in resnet18_params(classes):
                if name in drop or (trainable_only and kind != "train"):
                    continue
                if name in override:
                    override[name](g, name, shape, kind)
                    continue
                if kind == "counter":
                    g.create_dataset(name, data=np.int64(3))
                    continue
                n = int(np.prod(shape))
                if n <= SMALL:
                    # filters on a few: each chunked dataset costs a B-tree node of ~2 KB
                    filtered = filters and (name.startswith("bn1.") or name == "fc.bias")
                    kw = dict(filters, chunks=shape) if filtered else {}
                    g.create_dataset(name, data=value_for(name, shape), **kw)
                else:
                    g.create_dataset(name, shape=shape, dtype=np.float32)  # never written: zeros
            for name, shape, dtype in extra:
                if gname == "params":
                    g.create_dataset(name, shape=shape, dtype=dtype)


def ckpt_seeds(d):
    j = lambda n: os.path.join(d, n + ".h5")
    # /momentum only where it matters: each group of ResNet-18 is ~120 objects
    write_ckpt(j("ok-complete"), momentum=True)
    write_ckpt(j("ok-no-momentum"))
    write_ckpt(j("ok-latest-format"), libver="latest", momentum=True)
    write_ckpt(j("ok-filters"), filters=dict(compression="gzip", shuffle=True, fletcher32=True))

    def fixed_str(f, k):
        f.attrs.create(k, np.bytes_("resnet18"), dtype="S8")
    write_ckpt(j("ok-model-fixed-string"), attrs={"model": fixed_str})

    def int32_attr(v):
        return lambda f, k: f.attrs.create(k, v, dtype=np.int32)
    write_ckpt(j("ok-classes-int32"), attrs={"classes": int32_attr(2)})

    def elsewhere(g, name, shape, kind):  # the tensor lives in /store, /params has a soft link
        st = g.file.require_group("store")
        st.create_dataset(g.name[1:] + "." + name, data=np.zeros(shape, np.float32))
        g[name] = h5py.SoftLink("/store/" + g.name[1:] + "." + name)
    write_ckpt(j("ok-softlink"), override={"fc.bias": elsewhere})

    write_ckpt(j("bad-classes10"), classes=10)
    # a torchvision state_dict written to HDF5 as /params alone (DESIGN.md: it loads): the model and classes
    # inferred; without a model attribute and with a block missing, no ResNet's: refused
    bare = {k: None for k in ("model", "classes", "image_size", "step", "epoch", "seed", "trainbench_version",
                              "git_revision")}
    write_ckpt(j("ok-no-model-attr-state-dict"), attrs=bare)
    write_ckpt(j("bad-no-model-attr-no-resnet"), attrs=bare, drop=("layer4.1.conv1.weight",))
    write_ckpt(j("bad-model-int"), attrs={"model": np.int64(18)})
    write_ckpt(j("bad-model-resnet34"), attrs={"model": "resnet34"})
    write_ckpt(j("bad-classes-zero"), attrs={"classes": np.int64(0)})
    write_ckpt(j("bad-classes-string"), attrs={"classes": "2"})
    write_ckpt(j("bad-classes-float"), attrs={"classes": np.float64(2.0)})
    write_ckpt(j("bad-no-params"), skip_params=True)
    write_ckpt(j("bad-params-dataset"), params_as_dataset=True)
    write_ckpt(j("bad-missing-tensor"), drop=("layer4.1.bn2.running_var",))
    write_ckpt(j("bad-missing-counter"), drop=("bn1.num_batches_tracked",))
    write_ckpt(j("bad-extra-tensor"), extra=(("extra.weight", (3,), np.float32),))

    def shaped(new_shape, dtype=np.float32):
        return lambda g, name, shape, kind: g.create_dataset(name, shape=new_shape, dtype=dtype)
    write_ckpt(j("bad-wrong-shape"), override={"conv1.weight": shaped((64, 3, 7, 6))})
    write_ckpt(j("bad-wrong-rank"), override={"fc.bias": shaped((2, 1))})
    write_ckpt(j("bad-scalar-for-vector"), override={"bn1.weight": shaped(())})
    write_ckpt(j("bad-int-weights"), override={"fc.bias": shaped((2,), np.int32)})
    write_ckpt(j("bad-float-counter"), override={"bn1.num_batches_tracked": shaped((), np.float32)})
    write_ckpt(j("bad-vector-counter"), override={"bn1.num_batches_tracked": shaped((1,), np.int64)})

    def strings(g, name, shape, kind):
        g.create_dataset(name, data=np.array([b"ab", b"cd"], dtype="S2"))
    write_ckpt(j("bad-string-tensor"), override={"fc.bias": strings})

    def compound(g, name, shape, kind):
        g.create_dataset(name, shape=shape, dtype=np.dtype([("a", np.float32), ("b", np.int8)]))
    write_ckpt(j("bad-compound-tensor"), override={"fc.bias": compound})

    def dangling(g, name, shape, kind):
        g[name] = h5py.SoftLink("/nowhere/" + name)
    write_ckpt(j("bad-dangling-softlink"), override={"fc.bias": dangling})

    def external(g, name, shape, kind):
        g[name] = h5py.ExternalLink("no-such-file.h5", "/x")
    write_ckpt(j("bad-external-link"), override={"fc.bias": external})

    def group_instead(g, name, shape, kind):
        g.create_group(name)
    write_ckpt(j("bad-group-for-tensor"), override={"fc.weight": group_instead})

    def momentum_stat(path):  # /momentum holds a BN running statistic
        write_ckpt(path, momentum=True)
        with h5py.File(path, "a") as f:
            f["momentum"].create_dataset("bn1.running_mean", data=np.zeros(64, np.float32))
    momentum_stat(j("bad-momentum-non-trainable"))

    def momentum_shape(path):
        write_ckpt(path, momentum=True)
        with h5py.File(path, "a") as f:
            del f["momentum/fc.bias"]
            f["momentum"].create_dataset("fc.bias", data=np.zeros(3, np.float32))
    momentum_shape(j("bad-momentum-shape"))

    def momentum_missing(path):
        write_ckpt(path, momentum=True)
        with h5py.File(path, "a") as f:
            del f["momentum/layer2.0.downsample.0.weight"]
    momentum_missing(j("bad-momentum-missing"))


# ---- batch files -------------------------------------------------------------

def write_batch(path, n=2, h=32, w=32, img_dtype=np.float32, lab_dtype=np.int64, labels=None,
                img_shape=None, lab_shape=None, libver="earliest", filters=None, skip=(), chunks=None):
    rng = np.random.default_rng(n * 1000 + h * 10 + w)
    shape = img_shape if img_shape is not None else (n, 3, h, w)
    with h5py.File(path, "w", libver=libver) as f:
        if "images" not in skip:
            img = rng.normal(0, 1, shape).astype(img_dtype) if np.issubdtype(img_dtype, np.floating) \
                else rng.integers(0, 255, shape).astype(img_dtype)
            kw = dict(filters or {})
            if kw or chunks:
                kw["chunks"] = chunks or tuple(max(1, s // 2) for s in shape)
            f.create_dataset("images", data=img, **kw)
        if "labels" not in skip:
            lab = np.array(labels if labels is not None else [i % 10 for i in range(n)])
            if lab_shape is not None:
                lab = np.resize(lab, lab_shape)
            f.create_dataset("labels", data=lab.astype(lab_dtype))


def batch_seeds(d):
    j = lambda n: os.path.join(d, n + ".h5")
    write_batch(j("ok-f32-i64"), n=1)
    write_batch(j("ok-f64-i32-1x32x33"), n=1, w=33, img_dtype=np.float64, lab_dtype=np.int32)
    write_batch(j("ok-f16-u8"), n=1, h=33, img_dtype=np.float16, lab_dtype=np.uint8)
    write_batch(j("ok-gzip-chunked"), n=2, h=32, w=36, filters=dict(compression="gzip", shuffle=True))
    write_batch(j("ok-latest-format"), n=1, libver="latest")
    write_batch(j("bad-label-range"), n=2, labels=[3, 10])
    write_batch(j("bad-label-negative"), n=1, labels=[-1])
    write_batch(j("bad-labels-float"), n=1, lab_dtype=np.float32)
    write_batch(j("bad-images-int"), n=1, img_dtype=np.int16)
    write_batch(j("bad-images-3d"), img_shape=(3, 32, 32))
    write_batch(j("bad-images-4-channels"), img_shape=(1, 4, 32, 32))
    write_batch(j("bad-images-empty-batch"), n=0)
    write_batch(j("bad-images-too-small"), n=1, h=16, w=40)
    write_batch(j("bad-labels-count"), n=2, lab_shape=(3,))
    write_batch(j("bad-labels-2d"), n=2, lab_shape=(2, 1))
    write_batch(j("bad-no-images"), skip=("images",))
    write_batch(j("bad-no-labels"), skip=("labels",))
    with h5py.File(j("bad-images-group"), "w") as f:
        f.create_group("images")
        f.create_dataset("labels", data=np.zeros(1, np.int64))
    with open(j("bad-not-hdf5"), "wb") as f:
        f.write(b"\x89HDF\r\n\x1a\n" + b"\0" * 64)


# ---- structure-aware programs (h5_build.c) -----------------------------------------

# op codes and operand order exactly as h5_build.c reads them
ATTR, DATASET, FILL, GROUP, SOFT, HARD, EXTERNAL, DELETE = range(8)
A_VLEN, A_FIXED, A_I64, A_I32, A_U8, A_F64, A_COMPOUND, A_U64, A_FIXED_PAD = range(9)
CKPT_ATTRS = ["model", "classes", "image_size", "step", "epoch", "seed", "trainbench_version", "git_revision"]
CKPT_STRINGS = ["resnet18", "resnet50", "resnet18 ", "", "0.1.0"]
CKPT_GROUPS = ["params", "momentum", ""]


def op_attr(name, kind, value, space=0, space_arg=0, fixed_size=16):
    """ATTR: name (index into CKPT_ATTRS), kind (A_*), value (str from
    CKPT_STRINGS or int 0..3), dataspace 0 scalar / 1 1-D of space_arg+1 /
    2 null / 3 2-D / 4 1-D of 1."""
    b = bytes([ATTR, CKPT_ATTRS.index(name), kind, space])
    if space in (1, 3):
        b += bytes([space_arg])
    if kind in (A_VLEN, A_FIXED, A_FIXED_PAD):
        b += bytes([CKPT_STRINGS.index(value)])
        value = 0
    b += bytes([2, value])  # number: small (0..3)
    if kind in (A_FIXED, A_FIXED_PAD):
        b += bytes([fixed_size - 1])
    return b


def op_fill(group, count=1):
    return bytes([FILL, group, count])


def op_dataset(group, tensor, shape=0, dtype=0, layout=0, shape_args=b""):
    """DATASET: tensor index into the model's table, shape mode, type (0 is
    the expected one), layout (0 unwritten contiguous, 1 written, 2 deflate,
    3 compact, 4 chunked unwritten, 5 fletcher32)."""
    return bytes([DATASET, group, tensor & 0xFF, tensor >> 8, shape, dtype, layout]) + shape_args


def op_link(op, group, name_index, target_group=0, args=b""):
    return bytes([op, group, name_index & 0xFF, name_index >> 8, target_group]) + args


def ckpt_gen_seeds():
    ok_attrs = op_attr("model", A_VLEN, "resnet18") + op_attr("classes", A_I64, 2)
    s = {}
    s["ok-complete"] = b"\0" + op_fill(0) + op_fill(1) + ok_attrs
    s["ok-latest-format"] = b"\1" + op_fill(0) + op_fill(1) + ok_attrs
    s["ok-no-momentum"] = b"\0" + op_fill(0) + ok_attrs + op_attr("step", A_I32, 3)
    s["ok-fixed-string-model"] = b"\0" + op_fill(0) + op_attr("model", A_FIXED, "resnet18", fixed_size=8) + \
        op_attr("classes", A_U8, 2)
    s["bad-no-classes"] = b"\0" + op_fill(0) + op_attr("model", A_VLEN, "resnet18")
    s["bad-classes-float"] = b"\0" + op_fill(0) + op_attr("model", A_VLEN, "resnet18") + op_attr("classes", A_F64, 2)
    s["bad-missing-tensor"] = b"\0" + op_fill(0) + ok_attrs + op_link(DELETE, 0, 5)
    s["bad-wrong-shape"] = b"\0" + op_fill(0) + ok_attrs + op_link(DELETE, 0, 0) + \
        op_dataset(0, 0, shape=1, shape_args=bytes([3, 4]))  # conv1.weight, last dim +2
    s["bad-int-weights"] = b"\0" + op_fill(0) + ok_attrs + op_link(DELETE, 0, 1) + \
        op_dataset(0, 1, dtype=7, layout=1)  # bn1.weight as int32
    s["bad-dangling-softlink"] = b"\0" + op_fill(0) + ok_attrs + op_link(DELETE, 0, 2) + \
        op_link(SOFT, 0, 2, 0, bytes([0]))
    # arrays where the reader reads one value: H5Aread writes every element
    s["bad-classes-int64-array"] = b"\0" + op_fill(0) + op_attr("model", A_VLEN, "resnet18") + \
        op_attr("classes", A_I64, 2, space=1, space_arg=39)
    s["bad-model-fixed-string-array"] = b"\0" + op_fill(0) + op_attr("classes", A_I64, 2) + \
        op_attr("model", A_FIXED, "resnet18", space=3, space_arg=3, fixed_size=8)
    s["bad-model-null-dataspace"] = b"\0" + op_fill(0) + op_attr("model", A_VLEN, "resnet18", space=2) + \
        op_attr("classes", A_I64, 2)
    # bn1.num_batches_tracked (tensor 5) with a null dataspace: rank 0 like a
    # scalar, but no value to read
    s["bad-counter-null-dataspace"] = b"\0" + op_fill(0) + ok_attrs + op_link(DELETE, 0, 5) + \
        op_dataset(0, 5, shape=3, layout=1)
    s["bad-extra-group"] = b"\0" + op_fill(0) + ok_attrs + op_link(GROUP, 0, 122, 0)  # /params/params
    return s


def batch_gen_seeds():
    s = {}
    # tensor 0: images [2,3,32,32] float, 1: labels [2] integer; group 0 is the root
    s["ok-written"] = b"\0" + op_dataset(0, 0, layout=1) + op_dataset(0, 1, layout=1) + bytes(8)
    s["ok-deflate"] = b"\1" + op_dataset(0, 0, layout=2) + b"\5" + op_dataset(0, 1, layout=3) + bytes(8)
    s["ok-f64-i32"] = b"\0" + op_dataset(0, 0, dtype=2, layout=1) + op_dataset(0, 1, dtype=7, layout=1) + bytes(8)
    s["bad-label-range"] = b"\0" + op_dataset(0, 0, layout=1) + op_dataset(0, 1, layout=1) + b"\x0b" * 16
    s["bad-labels-float"] = b"\0" + op_dataset(0, 0, layout=1) + op_dataset(0, 1, dtype=1, layout=1) + bytes(8)
    # a never-written /images of [1,3,16384,16384]: 3 GB of zeros from a 2 KB file
    s["bad-images-unwritten-huge"] = b"\0" + op_dataset(0, 0, shape=10, layout=0, shape_args=struct.pack(
        "<4H", 1, 3, 16384, 16384)) + op_dataset(0, 1, shape=4, layout=1, shape_args=b"\1") + bytes(8)
    s["bad-images-3d"] = b"\0" + op_dataset(0, 0, shape=7, layout=1) + op_dataset(0, 1, layout=1) + bytes(8)
    return s


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus"))
    a = ap.parse_args()
    if not shutil.which("cjpeg"):
        sys.exit("make_corpus.py: cjpeg not found (Debian: libjpeg-turbo-progs)")
    subs = ("jpeg", "ckpt", "ckpt_gen", "batchfile", "batchfile_gen")
    for sub in subs:
        d = os.path.join(a.out, sub)
        os.makedirs(d, exist_ok=True)
        for name in os.listdir(d):  # only the seeds this script makes; found inputs stay
            if name.startswith(("ok-", "bad-")):
                os.remove(os.path.join(d, name))
    for name, blob in jpeg_seeds().items():
        with open(os.path.join(a.out, "jpeg", name + ".bin"), "wb") as f:
            f.write(blob)
    ckpt_seeds(os.path.join(a.out, "ckpt"))
    batch_seeds(os.path.join(a.out, "batchfile"))
    for sub, seeds in (("ckpt_gen", ckpt_gen_seeds()), ("batchfile_gen", batch_gen_seeds())):
        for name, blob in seeds.items():
            with open(os.path.join(a.out, sub, name + ".bin"), "wb") as f:
                f.write(blob)
    for sub in subs:
        d = os.path.join(a.out, sub)
        files = os.listdir(d)
        print("%-10s %3d files, %7d bytes, largest %6d" % (
            sub, len(files), sum(os.path.getsize(os.path.join(d, x)) for x in files),
            max(os.path.getsize(os.path.join(d, x)) for x in files)))


if __name__ == "__main__":
    main()
