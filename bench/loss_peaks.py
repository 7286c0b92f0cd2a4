#!/usr/bin/env python3
"""loss_peaks.py: where each training run's loss peaked, from its results
files' /steps table (loss and lr per step): the loss at the first step, the
peak with its step and lr, the loss at the last step. A table for reading a
loss spike off stored runs (docs/loss_spike.md).

  loss_peaks.py results/gpu_h200_2026-11-27/*.h5 results/gpu_h200_2026-11-27_rerun/**/*.h5
"""
import sys

import h5py
import numpy as np


def main(paths):
    print("# %-58s %9s %7s %5s %8s %9s" % ("results file", "loss[1]", "peak", "step", "lr there", "loss[end]"))
    for p in paths:
        with h5py.File(p, "r") as f:
            if "steps" not in f or "loss" not in f["steps"]:
                continue
            loss = np.asarray(f["steps/loss"][()], np.float64)
            lr = np.asarray(f["steps/lr"][()], np.float64)
            precision = f.attrs.get("precision", b"?")
        precision = precision.decode() if isinstance(precision, bytes) else str(precision)
        k = int(np.argmax(loss))
        print("  %-58s %9.4f %7.2f %5d %8.4g %9.4f" % (p[-58:], loss[0], loss[k], k + 1, lr[k], loss[-1]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
