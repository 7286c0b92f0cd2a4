#!/usr/bin/env python3
"""convert_torchvision.py: torchvision ResNet weights <-> trainbench checkpoints.

  convert_torchvision.py to-h5 IN.pt OUT.h5 [--model NAME] [--image-size 224] [--seed 0]
  convert_torchvision.py to-pt IN.h5 OUT.pt

to-h5 reads a torchvision ResNet (resnet18/34/50/101/152) saved with
torch.save: a state_dict, or a whole model object (also accepted: a dict
holding it under "state_dict" or "model", and DataParallel "module." names).
The model is inferred from the keys when --model is not given, the number of
classes from fc.weight. It writes a trainbench checkpoint (DESIGN.md,
"Contracts other tools rely on"): /params/<state_dict key> float32 with the
torch shape, num_batches_tracked as an int64 scalar, /momentum/<parameter>
zeros (a fresh optimizer: torch.optim.SGD's first step is the same from
zeros with dampening 0), root attributes model, classes, image_size,
step=0, epoch=0, seed, trainbench_version (the repository's version, from
CMakeLists.txt), git_revision, converted_by.

to-pt reads a trainbench checkpoint and writes a state_dict with exactly
torchvision's key order and dtypes (num_batches_tracked int64, 0-dim) that
loads with strict=True into torchvision.models.<model>(num_classes=classes).
/momentum, if present, is not part of a state_dict and is left out.

A whole pickled model is unpickled, which runs code from the file: convert
only files you trust (plain state_dicts are read with weights_only=True).
Both write to a temporary name in the output's directory and rename it, so an
interrupted run never leaves a half-written file. Errors are one line on
stderr, exit status 1.
"""
import argparse
import collections
import functools
import os
import pickle
import re
import subprocess
import sys
import tempfile

PROG = "convert_torchvision"
# name -> (block type, blocks per stage), as torchvision builds them
RESNETS = {
    "resnet18": ("basic", (2, 2, 2, 2)),
    "resnet34": ("basic", (3, 4, 6, 3)),
    "resnet50": ("bottleneck", (3, 4, 6, 3)),
    "resnet101": ("bottleneck", (3, 4, 23, 3)),
    "resnet152": ("bottleneck", (3, 8, 36, 3)),
}


class ConvertError(Exception):
    pass


def is_nbt(name):
    return name.endswith("num_batches_tracked")


def listing(names, limit=3):
    names = sorted(names)
    more = len(names) - limit
    return ", ".join(names[:limit]) + (" (+%d more)" % more if more > 0 else "")


def project_version():
    """trainbench's version, as CMakeLists.txt's project() states it (what a trainbench build reports)."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "CMakeLists.txt")
    try:
        with open(path) as f:
            m = re.search(r"project\(trainbench VERSION ([0-9.]+)", f.read())
        if m:
            return m.group(1)
    except OSError:
        pass
    return "unknown"


def git_revision():
    here = os.path.dirname(os.path.abspath(__file__))
    try:
        r = subprocess.run(["git", "-C", here, "describe", "--always", "--dirty", "--abbrev=12"],
                           capture_output=True, text=True, timeout=10)
        if r.returncode == 0 and r.stdout.strip():
            return r.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        pass
    return "unknown"


@functools.lru_cache(maxsize=None)
def expected_state(model, classes):
    """torchvision's own state_dict for this model: the key order, shapes and dtypes to match."""
    import torchvision
    net = getattr(torchvision.models, model)(weights=None, num_classes=classes)
    return net, net.state_dict()


def infer_model(names):
    """Model name from the key pattern (block type and blocks per stage)."""
    if "conv1.weight" not in names or "fc.weight" not in names:
        raise ConvertError("not a ResNet state dict: no conv1.weight/fc.weight keys (keys: %s)" % listing(names))
    counts = []
    for stage in range(1, 5):
        blocks = {int(m.group(1)) for n in names for m in [re.match(r"layer%d\.(\d+)\." % stage, n)] if m}
        if not blocks:
            raise ConvertError("not a ResNet state dict: no layer%d.* keys" % stage)
        counts.append(max(blocks) + 1)
    kind = "bottleneck" if "layer1.0.conv3.weight" in names else "basic"
    for name, (k, c) in RESNETS.items():
        if k == kind and tuple(counts) == c:
            return name
    raise ConvertError("not a known torchvision ResNet: %s blocks with %s per stage (expected one of %s)"
                       % (kind, counts, ", ".join(RESNETS)))


def check_against(sd, model, classes, what):
    """Raise ConvertError unless sd has exactly torchvision's keys and shapes for model."""
    import torch
    net, ref = expected_state(model, classes)
    missing = [n for n in ref if n not in sd]
    extra = [n for n in sd if n not in ref]
    if missing or extra:
        parts = []
        if missing:
            parts.append("missing %s" % listing(missing))
        if extra:
            parts.append("unexpected %s" % listing(extra))
        raise ConvertError("%s does not match torchvision %s(num_classes=%d): %s"
                           % (what, model, classes, "; ".join(parts)))
    for n, t in ref.items():
        got = sd[n]
        if is_nbt(n):
            if got.numel() != 1 or got.is_floating_point() or got.is_complex():
                raise ConvertError("%s: %s must be one integer, got %s of shape %s"
                                   % (what, n, got.dtype, tuple(got.shape)))
        else:
            if tuple(got.shape) != tuple(t.shape):
                raise ConvertError("%s: %s has shape %s, torchvision %s expects %s"
                                   % (what, n, tuple(got.shape), model, tuple(t.shape)))
            if not got.is_floating_point():
                raise ConvertError("%s: %s has dtype %s, expected floating point" % (what, n, got.dtype))
    # torchvision order and dtypes: float32 tensors, int64 0-dim num_batches_tracked
    out = collections.OrderedDict()
    for n in ref:
        if is_nbt(n):
            out[n] = torch.tensor(int(sd[n].reshape(()).item()), dtype=torch.int64)
        else:
            out[n] = sd[n].detach().to(torch.float32).contiguous()
    return net, out


def atomic_output(path, write):
    """Call write(tmp) for a temporary file beside path, then rename it to path."""
    if os.path.isdir(path):
        raise ConvertError("%s is a directory; give the output a file path (a new file inside it, or another "
                           "path)" % path)
    d = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(d):
        raise ConvertError("output directory does not exist: %s" % d)
    fd, tmp = tempfile.mkstemp(dir=d, prefix="." + os.path.basename(path) + ".", suffix=".tmp")
    os.close(fd)
    try:
        write(tmp)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise


def load_torch_state(path):
    import torch
    if not os.path.isfile(path):
        raise ConvertError("no such file: %s" % path)
    try:
        try:   # tensors only first; a whole pickled model needs full unpickling
            obj = torch.load(path, map_location="cpu", weights_only=True)
        except pickle.UnpicklingError:
            obj = torch.load(path, map_location="cpu", weights_only=False)
    except Exception as e:   # torch.load raises many kinds for non-torch files
        msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ConvertError("cannot read %s as a torch.save file (%s: %s)" % (path, type(e).__name__, msg))
    if isinstance(obj, torch.nn.Module):
        obj = obj.state_dict()
    if isinstance(obj, dict):
        for key in ("state_dict", "model"):
            inner = obj.get(key)
            if isinstance(inner, torch.nn.Module):
                inner = inner.state_dict()
            if isinstance(inner, dict) and inner and all(torch.is_tensor(v) for v in inner.values()):
                obj = inner
                break
    if not isinstance(obj, dict) or not obj or not all(isinstance(k, str) and torch.is_tensor(v)
                                                       for k, v in obj.items()):
        raise ConvertError("%s holds a %s, not a state dict of tensors or a model" % (path, type(obj).__name__))
    if all(k.startswith("module.") for k in obj):
        obj = {k[len("module."):]: v for k, v in obj.items()}
    return obj


def to_h5(a):
    import h5py
    import numpy as np
    import torch
    sd = load_torch_state(a.input)
    notes = []
    model = a.model or infer_model(set(sd))
    if "fc.weight" not in sd or sd["fc.weight"].dim() != 2:
        raise ConvertError("not a ResNet state dict: no 2-D fc.weight")
    classes = int(sd["fc.weight"].shape[0])
    # weights saved before torch 0.4.1 have no num_batches_tracked: torch itself reads them as 0
    ref_net, ref = expected_state(model, classes)
    absent = [n for n in ref if is_nbt(n) and n not in sd]
    if absent and len(absent) == sum(1 for n in ref if is_nbt(n)):
        sd = dict(sd)
        for n in absent:
            sd[n] = torch.tensor(0, dtype=torch.int64)
        notes.append("no num_batches_tracked in the input: written as 0")
    if any(t.is_floating_point() and t.dtype != torch.float32 for t in sd.values()):
        notes.append("parameters converted to float32")
    _, sd = check_against(sd, model, classes, a.input)

    def write(tmp):
        with h5py.File(tmp, "w") as f:
            f.attrs["model"] = model
            f.attrs["classes"] = np.int64(classes)
            f.attrs["image_size"] = np.int64(a.image_size)
            f.attrs["step"] = np.int64(0)
            f.attrs["epoch"] = np.int64(0)
            f.attrs["seed"] = np.int64(a.seed)
            f.attrs["trainbench_version"] = project_version()
            f.attrs["git_revision"] = git_revision()
            f.attrs["converted_by"] = "model/convert_torchvision.py (torch %s)" % torch.__version__
            g = f.create_group("params", track_order=True)  # listed in state_dict order, as train writes
            for n, t in sd.items():
                if is_nbt(n):
                    g.create_dataset(n, data=np.int64(t.item()))
                else:
                    g.create_dataset(n, data=t.numpy())
            mg = f.create_group("momentum", track_order=True)  # the named parameters: no BN buffer
            for n in (n for n, _ in ref_net.named_parameters()):
                mg.create_dataset(n, data=np.zeros(tuple(sd[n].shape), np.float32))
    atomic_output(a.output, write)
    print("%s: %s -> %s (%s, %d classes, %d tensors%s)"
          % (PROG, a.input, a.output, model, classes, len(sd), "; " + "; ".join(notes) if notes else ""))


def attr_str(f, key):
    """A string attribute, variable- or fixed-length (h5py gives bytes for the latter)."""
    import numpy as np
    v = f.attrs.get(key)
    if isinstance(v, np.ndarray) and v.size == 1:
        v = v.reshape(-1)[0]
    if isinstance(v, bytes):
        v = v.decode("utf-8")
    return None if v is None else str(v).rstrip("\0")


def to_pt(a):
    import h5py
    import numpy as np
    import torch
    if not os.path.isfile(a.input):
        raise ConvertError("no such file: %s" % a.input)
    try:
        f = h5py.File(a.input, "r")
    except OSError as e:
        raise ConvertError("cannot read %s as HDF5: %s" % (a.input, str(e).splitlines()[0]))
    with f:
        if "params" not in f or not isinstance(f["params"], h5py.Group):
            raise ConvertError("%s has no /params group: not a trainbench checkpoint" % a.input)
        sd = {}
        for n, d in f["params"].items():
            if not isinstance(d, h5py.Dataset):
                raise ConvertError("%s: /params/%s is not a dataset" % (a.input, n))
            v = np.asarray(d[()])
            if is_nbt(n) and v.dtype.kind not in "iu":
                raise ConvertError("%s: /params/%s has dtype %s, expected int64" % (a.input, n, v.dtype))
            if not is_nbt(n) and v.dtype.kind != "f":
                raise ConvertError("%s: /params/%s has dtype %s, expected float32" % (a.input, n, v.dtype))
            sd[n] = torch.from_numpy(v.astype(np.int64 if is_nbt(n) else np.float32))
        model = attr_str(f, "model") or infer_model(set(sd))
        if model not in RESNETS:
            raise ConvertError("%s: model attribute %r is not one of %s" % (a.input, model, ", ".join(RESNETS)))
        classes = f.attrs.get("classes")
        if classes is None:
            if "fc.weight" not in sd:
                raise ConvertError("%s: no classes attribute and no /params/fc.weight" % a.input)
            classes = sd["fc.weight"].shape[0]
        classes = int(np.asarray(classes).reshape(()))
    net, sd = check_against(sd, model, classes, a.input)
    net.load_state_dict(sd, strict=True)     # the promise to the user, checked here
    atomic_output(a.output, lambda tmp: torch.save(sd, tmp))
    print("%s: %s -> %s (%s, %d classes, %d tensors)" % (PROG, a.input, a.output, model, classes, len(sd)))


def main(argv=None):
    ap = argparse.ArgumentParser(prog=PROG, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("to-h5", help="torchvision .pt -> trainbench checkpoint .h5")
    p.add_argument("input", metavar="IN.pt")
    p.add_argument("output", metavar="OUT.h5")
    p.add_argument("--model", choices=sorted(RESNETS), help="default: inferred from the keys")
    p.add_argument("--image-size", type=int, default=224, help="image_size attribute (default 224)")
    p.add_argument("--seed", type=int, default=0, help="seed attribute (default 0)")
    p.set_defaults(func=to_h5)
    p = sub.add_parser("to-pt", help="trainbench checkpoint .h5 -> torchvision state_dict .pt")
    p.add_argument("input", metavar="IN.h5")
    p.add_argument("output", metavar="OUT.pt")
    p.set_defaults(func=to_pt)
    a = ap.parse_args(argv)
    try:
        import h5py, numpy, torch, torchvision  # noqa: F401
    except ImportError as e:
        print("%s: error: needs torch, torchvision, h5py and numpy (%s) in the Python running it, %s; install "
              "them there, or run it with the Python that has them (Debian's python3-torch: /usr/bin/python3 %s ...)"
              % (PROG, e, sys.executable, sys.argv[0]), file=sys.stderr)
        return 1
    try:
        if os.path.isdir(a.output):  # before the conversion, not at the rename after it
            raise ConvertError("%s is a directory; give the output a file path (a new file inside it, or "
                               "another path)" % a.output)
        a.func(a)
    except ConvertError as e:
        print("%s: error: %s" % (PROG, e), file=sys.stderr)
        return 1
    except OSError as e:
        print("%s: error: %s" % (PROG, e), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
