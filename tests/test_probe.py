#!/usr/bin/env python3
"""test_probe.py TRAINBENCH [--gpu]: `trainbench probe` end to end.

Without --gpu (runs everywhere): the library table is printed (or the
'built without CUDA' line), the results file has kind 'probe', status
'complete' and one *_built_for / *_loaded / *_verdict triple per library,
and --expect-gpu exits 1 with one line when no GPU is usable (exit 0 when
one is). With --gpu (label gpu): skips (77) without a usable GPU; else every
measurement row is present with a positive rate below 1.5x its datasheet
ceiling, and GEMM bf16 beats GEMM fp32."""
import subprocess
import sys
import tempfile
import os

import h5py

def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)

def main():
    tb = sys.argv[1]
    gpu_mode = "--gpu" in sys.argv
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "probe.h5")
        args = [tb, "probe", "--results", out] + ([] if gpu_mode else ["--quick"])
        r = subprocess.run(args, capture_output=True, text=True, timeout=600)
        print(r.stdout + r.stderr)
        if r.returncode != 0:
            fail(f"probe exited {r.returncode}")
        with h5py.File(out, "r") as f:
            a = {k: (v.decode() if isinstance(v, bytes) else v) for k, v in f.attrs.items()}
            if a.get("kind") != "probe" or a.get("status") != "complete":
                fail(f"kind/status {a.get('kind')}/{a.get('status')}")
            built_cuda = "built without CUDA" not in r.stdout
            if built_cuda:
                for lib in ("cuda", "cudnn", "cublas"):
                    for suffix in ("built_for", "loaded", "verdict"):
                        if f"{lib}_{suffix}" not in a:
                            fail(f"attribute {lib}_{suffix} missing")
                if "cuDNN" not in r.stdout or "verdict" not in r.stdout:
                    fail("library table not printed")
            have_gpu = a.get("device_names", "none") != "none"
            rows = {}
            if "probe" in f:
                g = f["probe"]
                checks = [c.decode() if isinstance(c, bytes) else c for c in g["check"][()]]
                for i, c in enumerate(checks):
                    rows[c] = {k: float(g[k][i]) for k in ("size", "time_ms", "rate", "peak")}
        e = subprocess.run([tb, "probe", "--quick", "--expect-gpu"], capture_output=True, text=True, timeout=600)
        if have_gpu and e.returncode != 0:
            fail(f"--expect-gpu with a GPU exited {e.returncode}")
        if not have_gpu:
            lines = [l for l in e.stderr.splitlines() if "error" in l]
            if e.returncode != 1 or len(lines) != 1 or "--expect-gpu" not in lines[0]:
                fail(f"--expect-gpu without a GPU: exit {e.returncode}, error lines {lines}")
        if not gpu_mode:
            print("probe: OK (%s)" % ("GPU measured" if have_gpu else "no GPU here: versions only"))
            return
        if not have_gpu:
            print("SKIP: no usable GPU on this machine (probe --expect-gpu failed)")
            sys.exit(77)
        want = ["h2d pinned (GB/s)", "d2h pinned (GB/s)", "d2d (read+write) (GB/s)", "gemm fp32 (TFLOP/s)",
                "gemm tf32 (TFLOP/s)", "gemm bf16 (TFLOP/s)"]
        for w in want:
            if w not in rows:
                fail(f"row {w} missing ({sorted(rows)})")
        for c, v in rows.items():
            if not (v["rate"] > 0 and v["time_ms"] > 0):
                fail(f"{c}: rate {v['rate']} time {v['time_ms']}")
            if v["peak"] == v["peak"] and v["rate"] > 1.5 * v["peak"]:
                fail(f"{c}: {v['rate']} is above 1.5x the datasheet ceiling {v['peak']}: timing is wrong")
        if not rows["gemm bf16 (TFLOP/s)"]["rate"] > rows["gemm fp32 (TFLOP/s)"]["rate"]:
            fail("bf16 GEMM is not faster than fp32: tensor cores unused?")
        print("probe --gpu: OK")

if __name__ == "__main__":
    main()
