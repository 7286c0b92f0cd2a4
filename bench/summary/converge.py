"""converge.py: trainbench and PyTorch trained side by side
(bench/convergence.py's output directories: summary.txt, curves.tsv): each
side's loss over the first and the last window, the worst window difference
over its bound, whether the curves agree, the schedule's peak lr, and each
side's loss at the first and the last step.

Keys: convergence/<dir>/<what>; trainbench|pytorch/loss_first_window,
loss_last_window, loss_step1, loss_last_step."""
import os
import re

from _util import NUM, files, read, rel, row

SIDE = re.compile(r"^# (trainbench|PyTorch): loss (%s) -> (%s) \(first and last window\)" % (NUM, NUM), re.M)
WORST = re.compile(r"^# windows: worst \|diff\| / bound (%s); curves (agree|DIFFER)" % NUM, re.M)
PEAK = re.compile(r"^# schedule: .*; peak (%s) at step (\d+)" % NUM, re.M)


def extract(run_dir):
    out = []
    for path in files(run_dir, r"summary\.txt"):
        here = os.path.dirname(path)
        curves = os.path.join(here, "curves.tsv")
        text = read(path)
        if not os.path.isfile(curves) or not WORST.search(text):
            continue
        k = "convergence/%s/" % os.path.basename(here)
        src = rel(run_dir, path)
        for m in SIDE.finditer(text):
            side = m.group(1).lower()
            out += [row(k + side + "/loss_first_window", float(m.group(2)), "loss", src),
                    row(k + side + "/loss_last_window", float(m.group(3)), "loss", src)]
        w = WORST.search(text)
        out += [row(k + "worst_diff_over_bound", float(w.group(1)), "x", src),
                row(k + "verdict", "agree" if w.group(2) == "agree" else "differ", "-", src)]
        p = PEAK.search(text)
        if p:
            out.append(row(k + "peak_lr", float(p.group(1)), "lr", src))
        lines = [ln.split("\t") for ln in read(curves).splitlines()[1:] if ln.strip()]
        if lines:
            src = rel(run_dir, curves)
            out += [row(k + "steps", len(lines), "steps", src),
                    row(k + "trainbench/loss_step1", float(lines[0][2]), "loss", src),
                    row(k + "trainbench/loss_last_step", float(lines[-1][2]), "loss", src),
                    row(k + "pytorch/loss_step1", float(lines[0][4]), "loss", src),
                    row(k + "pytorch/loss_last_step", float(lines[-1][4]), "loss", src)]
    return out
