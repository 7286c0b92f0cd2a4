"""resnet50.py: the ResNet-50 bench stage (bench/gpu_resnet50.sh): one row
per configuration of each rows.tsv, its repeats, img/s (the median where
repeated), ms/step, peak MiB, the loss at its start and end, each from the
row's own log where the run dir has it.

Keys: resnet50/<framework>/<precision>/<layout>/<batch>/<graph>/<what>, with
framework trainbench, pytorch_eager or pytorch_compile, graph `graph`,
`eager` or `-`, a `+fused` suffix for `--fuse graph`, `+fastest` for
`--fuse fastest`, `+ownbn` for every
BatchNorm on the own kernels (TB_BN_KERNELS=own), `+cudnnbn` for cuDNN's
BatchNorm untimed (TB_BN_KERNELS=cudnn), `+wgrad` for the weight
gradients on a second stream (TB_WGRAD_STREAM=on), `+stempad` for the
stem's input padded where faster (TB_STEM_PAD=auto, 4 or 8), `+profile` for an
op-profile row, and `#2`, `#3`
for a configuration measured again in the same run (the same file, or
another bench call's rows.tsv in the same run directory).

A row whose log has the stem's `# cuda conv:` line (TB_STEM_PAD) adds
stem_channels (what ran: 3, 4 or 8) and, where measured, stem_ms_<n> per
channel count tried (its conv's forward + filter gradient, pads included,
from the plan).

A row whose log has the BatchNorms' timing line (`# cuda bn: N BatchNorms
timed ...`, TB_BN_KERNELS=auto) adds bn_timed (nodes), bn_own (of them on
the own kernels) and a step's BatchNorms in ms, forward + backward as
timed at plan time: bn_ms_chosen, bn_ms_cudnn (all on cuDNN's path),
bn_ms_own (all on the own kernels)."""
import os
import re

from _util import NUM, files, number, read, rel, row, slug

OLD = ("framework", "precision", "layout", "batch", "graph", "img_per_s", "ms_per_step", "h2d_ms", "peak_mib",
       "wall_s", "command")
UNITS = {"img_per_s": "img/s", "img_per_s_min": "img/s", "img_per_s_max": "img/s", "ms_per_step": "ms",
         "h2d_ms": "ms", "peak_mib": "MiB", "wall_s": "s", "timed_s": "s", "repeats": "runs", "steps": "steps",
         "loss_start": "loss", "loss_end": "loss", "classes": "classes", "spread_pct": "%"}


def _log_of(run_dir, here, cmd):
    """The row's (first run's) log: tb_<name>[_r1].log beside its --results,
    torch_<name>[_r1].log beside its --json."""
    for pat, stem in ((r"/tb_([\w.-]+?)(_r\d+)?\.h5", "tb_"), (r"/torch_([\w.-]+?)(_r\d+)?\.jsonl", "torch_")):
        m = re.search(pat, cmd or "")
        if m:
            for name in (m.group(1) + (m.group(2) or ""), m.group(1)):
                log = os.path.join(here, stem + name + ".log")
                if os.path.isfile(log):
                    return rel(run_dir, log)
    return None


def _config(r):
    fw = r["framework"].strip()
    fw = "trainbench" if fw == "trainbench" else slug(fw.replace("pytorch ", "pytorch_"))
    graph = r["graph"].strip()
    g = "graph" if graph.startswith("on") else "eager" if graph.startswith("off") else "-"
    if "fuse graph" in graph:
        g += "+fused"
    elif "fuse fastest" in graph:
        g += "+fastest"
    if "TB_BN_KERNELS=own" in graph:
        g += "+ownbn"
    if "TB_BN_KERNELS=cudnn" in graph:
        g += "+cudnnbn"
    if "TB_WGRAD_STREAM=on" in graph:
        g += "+wgrad"
    if re.search(r"TB_STEM_PAD=(auto|4|8)\b", graph):
        g += "+stempad"
    if "op profile" in graph or r.get("profile"):
        g += "+profile"
    return "/".join((fw, r["precision"].strip(), r["layout"].strip(), r["batch"].strip(), g))


STEM = re.compile(r"^# cuda conv: the \d+x\d+/\d+ conv with (\d+) input channels (?:reads them padded to|stays on) "
                  r"(\d+) \(([^)]*)\)", re.M)


def _stem(run_dir, src, key):
    """The stem's padding line of a row's log: rows for what ran and each measured time."""
    path = os.path.join(run_dir, src)
    m = STEM.search(read(path)) if src.endswith(".log") and os.path.isfile(path) else None
    if not m:
        return []
    out = [row(key + "/stem_channels", m.group(2), "channels", src)]
    for c, ms in re.findall(r"(\d+): (" + NUM + r") ms", m.group(3)):
        out.append(row(key + "/stem_ms_" + c, ms, "ms", src))
    return out


BN = re.compile(r"^# cuda bn: (\d+) BatchNorms? timed on cuDNN's path and on the own kernels .*?: (\d+) run on the "
                r"own kernels; a step's BatchNorms (" + NUM + r") ms as chosen, (" + NUM + r") ms all on cuDNN's, (" +
                NUM + r") ms all on the own", re.M)


def _bn(run_dir, src, key):
    """The BatchNorms' timing line of a row's log: how many ran where, a step's BatchNorms each way."""
    path = os.path.join(run_dir, src)
    m = BN.search(read(path)) if src.endswith(".log") and os.path.isfile(path) else None
    if not m:
        return []
    names = (("bn_timed", "nodes"), ("bn_own", "nodes"), ("bn_ms_chosen", "ms"), ("bn_ms_cudnn", "ms"),
             ("bn_ms_own", "ms"))
    return [row(key + "/" + n, m.group(i + 1), u, src) for i, (n, u) in enumerate(names)]


def extract(run_dir):
    out = []
    seen = {}  # across the run's files too: two bench calls in one run (issue 30's plan) number theirs on
    for path in files(run_dir, r"rows\.tsv"):
        here = os.path.dirname(path)
        lines = [ln.rstrip("\n") for ln in open(path) if ln.strip()]
        header = OLD
        if lines and lines[0].startswith("framework\t"):
            header, lines = tuple(lines[0].split("\t")), lines[1:]
        for ln in lines:
            r = dict(zip(header, ln.split("\t")))
            cfg = _config(r)
            seen[cfg] = seen.get(cfg, 0) + 1
            key = "resnet50/" + cfg + ("#%d" % seen[cfg] if seen[cfg] > 1 else "")
            src = _log_of(run_dir, here, r.get("command", "")) or rel(run_dir, path)
            if "FAILED" in ln:
                out.append(row(key + "/status", "failed", "-", src))
                continue
            out.append(row(key + "/status", "ok", "-", src))
            for col, unit in UNITS.items():
                v = number(r.get(col, "-")) if r.get(col, "-") not in ("-", "") else None
                if v is not None:
                    out.append(row(key + "/" + col, v, unit, src))
            out += _stem(run_dir, src, key)
            out += _bn(run_dir, src, key)
    return out
