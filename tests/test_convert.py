#!/usr/bin/env python3
"""test_convert.py: round trips through model/convert_torchvision.py (ctest).

  test_convert.py [--ckpt-copy PATH] [--workdir DIR] [--keep]

For resnet18 (10 classes) and resnet50 (7 classes), with randomised BN
weights and buffers:
  1. Python round trip: state_dict .pt -> to-h5 -> to-pt: every tensor
     torch.equal, same key order, dtypes and shapes; the .h5 follows the
     checkpoint contract (attributes, float32, int64 scalar
     num_batches_tracked, /momentum zeros for the named parameters); the
     result loads strict=True.
     Also from a whole pickled model, and from a checkpoint whose string
     attributes are fixed-length.
  2. C round trip: .pt -> to-h5 -> `tb_ckpt_copy in.h5 out.h5` (loads the
     checkpoint into trainbench's model and saves it) -> to-pt, exact again.
  3. Converter errors (missing file, non-ResNet dict, wrong shape, missing
     key, not a torch/HDF5 file): exit 1, one line on stderr, no traceback,
     no output file.
Exit 0 when all pass; 1 on any failure; 77 when torch/torchvision/h5py are
missing, or when --ckpt-copy is empty (tb_ckpt_copy not built) and
everything else passed, so the C round trip shows as skipped, not passed.
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
CONVERT = os.path.join(os.path.dirname(HERE), "model", "convert_torchvision.py")
SKIP = 77
failures = []


def check(cond, what):
    print("  %-4s %s" % ("ok" if cond else "FAIL", what), flush=True)
    if not cond:
        failures.append(what)
    return cond


def run(cmd):
    print("+ " + " ".join(cmd), flush=True)
    r = subprocess.run(cmd, capture_output=True, text=True)
    for line in (r.stdout + r.stderr).splitlines():
        print("    | " + line)
    return r


def convert(*args):
    return run([sys.executable, CONVERT] + list(args))


def random_model(name, classes, seed):
    """torchvision ResNet, BN weights/biases/buffers and fc.bias randomised:
    the golden tests' model (gen_golden.build_model)."""
    from gen_golden import build_model  # torch is imported only once the test runs
    return build_model(name, classes, seed)


def same_state(a, b, what):
    import torch
    ok = check(list(a) == list(b), "%s: same keys in the same order (%d)" % (what, len(a)))
    if ok:
        bad = [k for k in a if not (a[k].dtype == b[k].dtype and a[k].shape == b[k].shape
                                    and torch.equal(a[k], b[k]))]
        ok = check(not bad, "%s: every tensor equal, same dtype and shape%s"
                   % (what, "" if not bad else " (differ: %s)" % ", ".join(bad[:3])))
    return ok


def check_h5(path, model, classes, sd):
    import h5py
    import numpy as np
    import torchvision
    with h5py.File(path, "r") as f:
        attrs = {k: f.attrs[k] for k in f.attrs}
        m = attrs.get("model")
        m = m.decode() if isinstance(m, bytes) else m
        check(m == model, "%s: model attribute %r" % (path, m))
        for key, want in (("classes", classes), ("step", 0), ("epoch", 0)):
            v = attrs.get(key)
            check(isinstance(v, np.int64) and v == want, "%s: %s attribute int64 %r" % (path, key, want))
        for key in ("image_size", "seed"):
            check(isinstance(attrs.get(key), np.int64), "%s: %s attribute int64" % (path, key))
        for key in ("trainbench_version", "git_revision"):
            check(isinstance(attrs.get(key), str), "%s: %s attribute is a string" % (path, key))
        names = [n for n, _ in getattr(torchvision.models, model)(num_classes=classes).named_parameters()]
        mom = f.get("momentum")
        check(mom is not None and list(mom) == names and all(not np.any(mom[n][()]) for n in names),
              "%s: /momentum holds zeros for exactly the named parameters (a fresh optimizer)" % path)
        check(attrs.get("converted_by", "").startswith("model/convert_torchvision.py"),
              "%s: converted_by names the converter" % path)
        p = f["params"]
        check(set(p) == set(sd), "%s: /params names == state_dict keys" % path)
        # listed in the state_dict's order, as train's checkpoints are (creation order tracked)
        check(list(p) == list(sd), "%s: /params lists in the state_dict's order (%s ...)" % (path, list(p)[:3]))
        bad = []
        for k in p:
            d = p[k]
            if k.endswith("num_batches_tracked"):
                if not (d.dtype == np.int64 and d.shape == ()):
                    bad.append(k)
            elif not (d.dtype == np.float32 and d.shape == tuple(sd[k].shape)):
                bad.append(k)
        check(not bad, "%s: float32 with torch shapes, num_batches_tracked int64 scalar%s"
              % (path, "" if not bad else " (bad: %s)" % ", ".join(bad[:3])))


def expect_error(args, out, what):
    r = convert(*args)
    lines = [l for l in r.stderr.splitlines() if l.strip()]
    check(r.returncode == 1 and len(lines) == 1 and "Traceback" not in r.stderr
          and not os.path.exists(out), "error case: %s -> exit 1, one line, no %s" % (what, os.path.basename(out)))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ckpt-copy", default="", help="tb_ckpt_copy binary; empty: C round trip skipped")
    ap.add_argument("--workdir", default="", help="default: a temporary directory, removed on success")
    ap.add_argument("--keep", action="store_true", help="keep the temporary directory")
    a = ap.parse_args(argv)
    try:
        import h5py
        import numpy as np
        import torch
        import torchvision
    except ImportError as e:
        print("SKIP: test_convert needs torch, torchvision, h5py and numpy in %s (%s)" % (sys.executable, e))
        return SKIP

    work = a.workdir or tempfile.mkdtemp(prefix="tb_convert_")
    os.makedirs(work, exist_ok=True)
    w = lambda name: os.path.join(work, name)
    have_c = bool(a.ckpt_copy)
    if have_c and not (os.path.isfile(a.ckpt_copy) and os.access(a.ckpt_copy, os.X_OK)):
        check(False, "tb_ckpt_copy exists and is executable: %r" % a.ckpt_copy)
        have_c = False

    for name, classes, seed in (("resnet18", 10, 11), ("resnet50", 7, 12)):
        print("# %s, %d classes" % (name, classes))
        m = random_model(name, classes, seed)
        sd = m.state_dict()
        torch.save(sd, w(name + ".pt"))
        # 1. Python round trip
        r = convert("to-h5", w(name + ".pt"), w(name + ".h5"), "--image-size", "64", "--seed", "3")
        if check(r.returncode == 0, "to-h5 %s.pt (model inferred)" % name):
            check_h5(w(name + ".h5"), name, classes, sd)
            r = convert("to-pt", w(name + ".h5"), w(name + "_back.pt"))
            if check(r.returncode == 0, "to-pt %s.h5" % name):
                back = torch.load(w(name + "_back.pt"))
                same_state(sd, back, "python round trip " + name)
                net = getattr(torchvision.models, name)(weights=None, num_classes=classes)
                try:
                    net.load_state_dict(back, strict=True)
                    check(True, "to-pt result loads strict=True into torchvision %s" % name)
                except RuntimeError as e:
                    check(False, "to-pt result loads strict=True: %s" % str(e).splitlines()[0])
            # fixed-length string attributes must be read too
            shutil.copy(w(name + ".h5"), w(name + "_fixed.h5"))
            with h5py.File(w(name + "_fixed.h5"), "r+") as f:
                f.attrs["model"] = np.bytes_(name.encode())
            r = convert("to-pt", w(name + "_fixed.h5"), w(name + "_fixed.pt"))
            if check(r.returncode == 0, "to-pt with a fixed-length model attribute"):
                same_state(sd, torch.load(w(name + "_fixed.pt")), "fixed-length attribute " + name)
        # 2. C round trip
        if have_c:
            r = run([a.ckpt_copy, w(name + ".h5"), w(name + "_c.h5")])
            if check(r.returncode == 0, "tb_ckpt_copy %s.h5 %s_c.h5" % (name, name)):
                r = convert("to-pt", w(name + "_c.h5"), w(name + "_c.pt"))
                if check(r.returncode == 0, "to-pt %s_c.h5" % name):
                    same_state(sd, torch.load(w(name + "_c.pt")), "C round trip (tb_ckpt_copy) " + name)

    print("# whole pickled model object")
    m = random_model("resnet18", 5, 13)
    torch.save(m, w("full.pt"))
    r = convert("to-h5", w("full.pt"), w("full.h5"))
    if check(r.returncode == 0, "to-h5 from a whole model object"):
        r = convert("to-pt", w("full.h5"), w("full_back.pt"))
        if check(r.returncode == 0, "to-pt full.h5"):
            same_state(m.state_dict(), torch.load(w("full_back.pt")), "whole-model round trip")

    print("# converter errors")
    expect_error(["to-h5", w("missing.pt"), w("e1.h5")], w("e1.h5"), "to-h5 of a missing file")
    expect_error(["to-pt", w("missing.h5"), w("e2.pt")], w("e2.pt"), "to-pt of a missing file")
    torch.save({"features.0.weight": torch.zeros(8, 3, 3, 3), "classifier.weight": torch.zeros(10, 8)},
               w("notresnet.pt"))
    expect_error(["to-h5", w("notresnet.pt"), w("e3.h5")], w("e3.h5"), "to-h5 of a non-ResNet state dict")
    sd = random_model("resnet18", 10, 14).state_dict()
    sd["conv1.weight"] = torch.zeros(64, 3, 5, 5)
    torch.save(sd, w("badshape.pt"))
    expect_error(["to-h5", w("badshape.pt"), w("e4.h5")], w("e4.h5"), "to-h5 with a wrong conv1.weight shape")
    sd = random_model("resnet18", 10, 15).state_dict()
    sd["layer9.0.conv1.weight"] = torch.zeros(1)
    torch.save(sd, w("extrakey.pt"))
    expect_error(["to-h5", w("extrakey.pt"), w("e5.h5")], w("e5.h5"), "to-h5 with an unknown key")
    if os.path.exists(w("resnet18.h5")):
        shutil.copy(w("resnet18.h5"), w("dropped.h5"))
        with h5py.File(w("dropped.h5"), "r+") as f:
            del f["params/layer2.1.bn1.running_var"]
        expect_error(["to-pt", w("dropped.h5"), w("e6.pt")], w("e6.pt"), "to-pt with a missing /params key")
        expect_error(["to-h5", w("resnet18.h5"), w("e7.h5")], w("e7.h5"), "to-h5 of an HDF5 file")
    if os.path.exists(w("resnet18.pt")):
        expect_error(["to-pt", w("resnet18.pt"), w("e8.pt")], w("e8.pt"), "to-pt of a .pt file")
        # a directory as the output: one line naming it, and no temporary file beside it (it was
        # '[Errno 21] Is a directory: .../.outdir.XXXX.tmp -> .../outdir' after the conversion)
        os.makedirs(w("outdir"), exist_ok=True)
        r = convert("to-h5", w("resnet18.pt"), w("outdir"))
        check(r.returncode == 1 and r.stderr.strip() == "convert_torchvision: error: %s is a directory; give the "
              "output a file path (a new file inside it, or another path)" % w("outdir"),
              "error case: to-h5 into a directory -> exit 1, one line naming it")

    leftovers = [n for n in os.listdir(work) if n.endswith(".tmp")]
    check(not leftovers, "no temporary files left behind%s" % ("" if not leftovers else ": %s" % leftovers))
    if failures:
        print("# test_convert: FAIL: %d checks failed; files kept in %s" % (len(failures), work))
        for f in failures:
            print("#   " + f)
        return 1
    if not a.workdir and not a.keep:          # only a directory this run created
        shutil.rmtree(work, ignore_errors=True)
    if not have_c:
        print("SKIP: Python round trips and error cases passed, but the C round trip did not run: "
              "tb_ckpt_copy is not built (--ckpt-copy empty)")
        return SKIP
    print("# test_convert: PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
