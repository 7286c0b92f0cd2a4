"""train.py: every training log of a run (`trainbench train` output: the
bench rows, the NCCL stage's scaling and wire runs): the closing
`# training:` line (steps, loss at start and end, img/s), what was trained
(`# trainbench train:` header: model, classes; `# N parameters`), and the
scaling rows (`# scaling row i of n: R rank(s), X img/s over N timed steps`).

Keys: train/<log, its path in the run without .log>/<what>;
train/<log>/scaling/<R>ranks/img_per_s."""
import os
import re

from _util import NUM, files, read, rel, row

LOSS = r"%s|nan|-?inf" % NUM  # printf's %.4f of a loss that went non-finite
TRAINING = re.compile(r"^# training: (\d+) steps, loss (%s) -> (%s), (%s) img/s" % (LOSS, LOSS, NUM), re.M)
HEADER = re.compile(r"^# trainbench train: (\w+), (\d+) classes", re.M)
PARAMS = re.compile(r"^# (\d+) parameters", re.M)
SCALING = re.compile(r"^# scaling row \d+ of \d+: (\d+) ranks?, (%s) img/s over (\d+) timed steps? \((%s) s\)"
                     % (NUM, NUM), re.M)


def _one(run_dir, path, text, k):
    m = TRAINING.search(text)
    src = rel(run_dir, path)
    out = [row(k + "steps", int(m.group(1)), "steps", src), row(k + "loss_start", float(m.group(2)), "loss", src),
           row(k + "loss_end", float(m.group(3)), "loss", src), row(k + "img_per_s", float(m.group(4)), "img/s", src)]
    h = HEADER.search(text)
    if h:
        out += [row(k + "model", h.group(1), "-", src), row(k + "classes", int(h.group(2)), "classes", src)]
    p = PARAMS.search(text)
    if p:
        out.append(row(k + "parameters", int(p.group(1)), "parameters", src))
    for s in SCALING.finditer(text):
        kk = k + "scaling/%sranks/" % s.group(1)
        out += [row(kk + "img_per_s", float(s.group(2)), "img/s", src),
                row(kk + "timed_steps", int(s.group(3)), "steps", src),
                row(kk + "seconds", float(s.group(4)), "s", src)]
    return out


def extract(run_dir):
    """One training run per log (ctest's logs hold many tests' runs: tests.py reads them)."""
    out = []
    for path in files(run_dir, r"(?!ctest).*\.(log|txt)"):
        text = read(path)
        if TRAINING.search(text):
            out += _one(run_dir, path, text, "train/%s/" % os.path.splitext(rel(run_dir, path))[0])
    return out
