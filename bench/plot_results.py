#!/usr/bin/python3
"""plot_results.py - trainbench results files (DESIGN.md "Results file") as PNGs.

  plot_results.py RUN.h5 [RUN2.h5 ...] --out DIR [--prefix NAME] [--label LABEL ...]

Writes, into DIR (PREFIX: the file's stem for one file, "compare" for several):

  PREFIX_throughput.png  img/s against ranks from /scaling, one series per
                         file, with the ideal line (img/s of the smallest
                         row x ranks / its ranks)
  PREFIX_efficiency.png  weak-scaling efficiency T1 / (N x TN) against ranks,
                         with the ideal 100 % line
  STEM_breakdown.png     per file: ms per step stacked by phase; per rank
                         count when /scaling has <phase>_ms_median columns,
                         else per rank of the training run (/ranks); STEM:
                         the file's name without .h5, or where two files
                         share it, their --label or folder's name before it
  PREFIX_loss.png        training loss against step (/steps)
  PREFIX_loader.png      loader img/s against threads, with the ideal line,
                         for the files that have a /loader table (columns
                         threads, img_per_s: `trainbench loader-bench
                         --results`)
  PREFIX_projection.png  for files with a /projection table (`trainbench
                         project --out`): projected efficiency against ranks
                         on a log axis out to thousands, the measured (or
                         published) efficiencies as points, and each what-if
                         column (if_<key>_efficiency) dashed for one file

A plot whose data no file has (e.g. /scaling of an aborted run) is left out
with a line saying so, as is a table without its key columns (/scaling
without ranks) and every point that is nan or inf; the files of
allreduce-bench, probe and loader-bench --feed have no plot here (one line
each: `trainbench report` prints their tables). Needs Debian's python3-matplotlib and python3-h5py;
exits 77 without them, 1 when nothing could be plotted or a file is
unreadable."""
import argparse
import os
import re
import sys

try:
    import h5py
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np
except ImportError as e:
    print(f"SKIP: {e} (install python3-matplotlib python3-h5py)")
    sys.exit(77)

PHASES = ["data", "h2d", "forward", "backward", "allreduce", "optimizer"]
PHASE_LABEL = {"allreduce": "allreduce (exposed)"}
PHASE_COLOR = {"data": "#8c564b", "h2d": "#e377c2", "forward": "#1f77b4", "backward": "#ff7f0e",
               "allreduce": "#d62728", "optimizer": "#2ca02c"}


def attr(f, key, default="?"):
    v = f.attrs.get(key, default)
    return v.decode() if isinstance(v, bytes) else v


# the columns a plot cannot do without, per table
NEEDS = {"scaling": ("ranks", "img_per_s", "efficiency"), "ranks": ("rank",), "steps": ("step", "loss")}
# kinds of results file (root attribute `kind`) without a plot here, and what prints them
NO_PLOT = {"allreduce-bench": "trainbench allreduce-bench", "probe": "trainbench probe",
           "loader-feed": "trainbench loader-bench --feed"}


def table(f, group, path=""):
    """{column: numpy array} of a results table, or None when absent, empty or
    without the columns NEEDS names (said in one line)."""
    if group not in f or not isinstance(f[group], h5py.Group):
        return None
    cols = {k: f[group][k][()] for k in f[group] if isinstance(f[group][k], h5py.Dataset)}
    if not cols or min(len(np.atleast_1d(v)) for v in cols.values()) == 0:
        return None
    lacks = [c for c in NEEDS.get(group, ()) if c not in cols]
    if lacks:
        print(f"{path}: /{group} has no {', '.join(lacks)} column: left out as if absent")
        return None
    return cols


def finite(*arrays):
    """The mask of the points where every array is finite."""
    ok = np.ones(len(arrays[0]), bool)
    for a in arrays:
        ok &= np.isfinite(np.asarray(a, float))
    return ok


class Run:
    def __init__(self, path, label):
        self.path = path
        self.stem = os.path.splitext(os.path.basename(path))[0]
        self.given_label = label
        if os.path.isdir(path):
            raise ValueError("is a directory; name a results file in it (a run's --results FILE)")
        if not os.path.exists(path):
            raise ValueError("no such file; name a results file (a run's --results FILE)")
        if not h5py.is_hdf5(path):
            raise ValueError("not an HDF5 file, so not a trainbench results file")
        with h5py.File(path, "r") as f:
            if "status" not in f.attrs and not any(g in f for g in ("steps", "ranks", "scaling")):
                raise ValueError("not a trainbench results file (no status attribute, "
                                 f"no /steps, /ranks or /scaling)")
            self.kind = attr(f, "kind", "train")
            self.model = attr(f, "model")
            self.image = attr(f, "image_size")
            self.batch = attr(f, "batch_size")
            self.precision = attr(f, "precision")
            self.world = attr(f, "world_size")
            self.backend = attr(f, "backend")
            self.device = attr(f, "device_names")
            self.status = attr(f, "status")
            self.hosts = attr(f, "hostnames")
            self.data = attr(f, "data")
            self.scaling = table(f, "scaling", path)
            self.ranks = table(f, "ranks", path)
            self.steps = table(f, "steps", path)
            self.loader = table(f, "loader")
            self.projection = table(f, "projection")
            self.fabric = attr(f, "projection_fabric", "")
        self.label = label or self.stem

    def describe(self):
        """Which run: model, input, precision, batch, ranks, device."""
        return (f"{self.model}, {self.image} px, {self.precision}, batch {self.batch}/rank; "
                f"{self.world} rank{'s' if self.world != 1 else ''}, {self.backend}: {self.device}")

    def describe_loader(self):
        """Which loader run: output size, batch, data, host."""
        return f"{self.image} px output, batch {self.batch}, data {self.data}; {self.hosts}"

    def short(self):
        return f"{self.model} {self.image} px {self.precision}, {self.backend}: {self.device}"


def subtitle(runs):
    """Second title line: the run's description, or the shared part of several."""
    if len(runs) == 1:
        return runs[0].describe()
    shorts = {r.short() for r in runs}
    return shorts.pop() if len(shorts) == 1 else f"{len(runs)} runs, see the legend"


def series_label(r, runs):
    if len(runs) == 1:
        return f"measured ({r.label})"
    if len({x.short() for x in runs}) == 1:
        return r.label
    return f"{r.label} ({r.short()})"


def save(fig, out, name, written):
    path = os.path.join(out, name)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    written.append(path)
    print(f"wrote {path}")


def rank_ticks(ax, values):
    vals = sorted({int(v) for v in values})
    ax.set_xticks(vals)
    ax.set_xlim(0, max(vals) * 1.15 + 0.1)


def scaling_points(r, col):
    """ranks and a /scaling column where both are finite (a nan or inf point left out)."""
    n, v = r.scaling["ranks"].astype(float), r.scaling[col].astype(float)
    ok = finite(n, v)
    if not ok.all():
        print(f"{r.path}: /scaling {col}: {int((~ok).sum())} row(s) of nan or inf left out of the plot")
    return n[ok], v[ok]


def plot_throughput(runs, out, prefix, written):
    have = [r for r in runs if r.scaling is not None and finite(r.scaling["ranks"], r.scaling["img_per_s"]).any()]
    if not have:
        print("no /scaling rows in any file: no throughput or efficiency plot")
        return
    fig, ax = plt.subplots(figsize=(7, 4.6))
    allx = []
    for i, r in enumerate(have):
        n, ips = scaling_points(r, "img_per_s")
        c = f"C{i}"
        ideal = ips[0] / n[0] * np.array([0] + list(n))
        ax.plot([0] + list(n), ideal, "--", color=c, alpha=0.6)
        ax.plot(n, ips, "o-", color=c, label=f"{series_label(r, have)}")
        for x, y in zip(n, ips):
            ax.annotate(f"{y:.1f}", (x, y), textcoords="offset points", xytext=(6, -12), fontsize=8, color=c)
        allx += list(n)
    if len(have) == 1:
        ok = finite(have[0].scaling["ranks"], have[0].scaling["img_per_s"])
        n, ips = have[0].scaling["ranks"][ok], have[0].scaling["img_per_s"][ok]
        ideal = (f"ideal: {ips[0] / n[0]:.1f} img/s per rank x ranks "
                 f"({ips[0] / n[0] * n[-1]:.1f} at {int(n[-1])})")
    else:
        ideal = "ideal: img/s of each series' first row x ranks / its ranks"
    ax.plot([], [], "--", color="C0" if len(have) == 1 else "gray", alpha=0.6, label=ideal)
    rank_ticks(ax, allx)
    ax.set_ylim(bottom=0)
    ax.set_xlabel("ranks (one per device)")
    ax.set_ylabel("throughput (images/s, all ranks)")
    ax.set_title(f"Training throughput against ranks (weak scaling)\n{subtitle(have)}", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="upper left")
    save(fig, out, f"{prefix}_throughput.png", written)

    fig, ax = plt.subplots(figsize=(7, 4.6))
    ax.axhline(100, color="gray", ls="--", label="ideal (100 %)")
    top = 110
    for i, r in enumerate(have):
        n, eff = scaling_points(r, "efficiency")
        eff = 100 * eff
        ax.plot(n, eff, "o-", color=f"C{i}", label=series_label(r, have))
        for x, y in zip(n, eff):
            ax.annotate(f"{y:.1f} %", (x, y), textcoords="offset points", xytext=(6, -12), fontsize=8,
                        color=f"C{i}")
        if len(eff):
            top = max(top, float(np.max(eff)) + 10)
    rank_ticks(ax, allx)
    ax.set_ylim(0, top)
    ax.set_xlabel("ranks (one per device)")
    ax.set_ylabel("scaling efficiency T1 / (N x TN) (%)")
    ax.set_title(f"Weak-scaling efficiency against ranks\n{subtitle(have)}", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="lower left")
    save(fig, out, f"{prefix}_efficiency.png", written)


def plot_breakdown(r, out, written):
    s = r.scaling
    per_count = s is not None and all(f"{p}_ms_median" in s for p in PHASES)
    if per_count:
        xs = [str(int(n)) for n in s["ranks"]]
        parts = {p: s[f"{p}_ms_median"] for p in PHASES}
        step = s.get("step_ms_median")
        xlabel = "ranks in the scaling row"
        what = "per rank count (scaling rows; median over ranks)"
    elif r.ranks is not None and ("steps" not in r.ranks or np.any(r.ranks["steps"] > 0)):
        keep = r.ranks["steps"] > 0 if "steps" in r.ranks else np.ones(len(r.ranks["rank"]), bool)
        xs = [str(int(n)) for n in r.ranks["rank"][keep]]
        parts = {p: r.ranks[f"{p}_ms"][keep] for p in PHASES if f"{p}_ms" in r.ranks}
        step = r.ranks["step_ms"][keep] if "step_ms" in r.ranks else None
        xlabel = f"rank (training run with {r.world} rank{'s' if r.world != 1 else ''})"
        what = ("per rank of the training run ("
                + ("no /scaling rows" if s is None else "/scaling has no per-phase columns") + ")")
    else:
        print(f"{r.path}: no timed /ranks rows and no per-phase /scaling columns: no breakdown plot")
        return
    if not parts and step is None:
        print(f"{r.path}: /ranks has no phase or step_ms columns: no breakdown plot")
        return
    ok = finite(*parts.values(), *([] if step is None else [step]))  # a bar of nan or inf: left out
    if not ok.all():
        print(f"{r.path}: {int((~ok).sum())} bar(s) with a phase or step of nan or inf left out of the breakdown")
        xs = [x for x, k in zip(xs, ok) if k]
        parts = {p: v[ok] for p, v in parts.items()}
        step = None if step is None else step[ok]
    if not xs:
        print(f"{r.path}: no bar of finite phases: no breakdown plot")
        return
    fig, ax = plt.subplots(figsize=(9, 4.6))
    bottom = np.zeros(len(xs))
    for p, v in parts.items():
        ax.bar(xs, v, bottom=bottom, color=PHASE_COLOR[p], label=PHASE_LABEL.get(p, p), width=0.6)
        bottom += v
    if step is not None:
        ax.scatter(xs, step, marker="_", s=900, color="black", zorder=3, label="whole step (measured)")
        for x, y in zip(xs, step):
            ax.annotate(f"{y:.0f} ms", (x, y), textcoords="offset points", xytext=(0, 6), ha="center",
                        fontsize=8)
        top = max(float(np.max(step)), float(np.max(bottom)))
    else:
        top = float(np.max(bottom))
    ax.set_ylim(0, top * 1.12)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("time per step (ms)")
    ax.set_title(f"Step time by phase, {what}\n{r.describe()}", fontsize=10)
    handles, labels = ax.get_legend_handles_labels()  # top of the stack first, as drawn
    ax.legend(handles[::-1], labels[::-1], fontsize=8, loc="center left", bbox_to_anchor=(1.01, 0.5))
    ax.grid(axis="y", alpha=0.3)
    save(fig, out, f"{r.stem}_breakdown.png", written)  # r.stem: unique among the files (unique_stems)


def plot_loss(runs, out, prefix, written):
    have = [r for r in runs if r.steps is not None and "loss" in r.steps]
    if not have:
        print("no /steps rows in any file: no loss plot")
        return
    fig, ax = plt.subplots(figsize=(7, 4.6))
    lo, hi = np.inf, 0
    for i, r in enumerate(have):
        loss = r.steps["loss"]
        ok = np.isfinite(loss)
        ax.plot(r.steps["step"][ok], loss[ok], "-", color=f"C{i}", lw=1.2, label=series_label(r, have))
        if ok.any():
            lo, hi = min(lo, float(np.min(loss[ok]))), max(hi, float(np.max(loss[ok])))
    if lo > 0 and hi / lo > 50:
        ax.set_yscale("log")
        ax.set_ylabel("training loss, cross-entropy (log scale)")
    else:
        ax.set_ylabel("training loss, cross-entropy")
    ax.set_xlabel("training step")
    ax.set_title(f"Training loss against step\n{subtitle(have)}", fontsize=10)
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8)
    save(fig, out, f"{prefix}_loss.png", written)


def plot_loader(runs, out, prefix, written):
    have = [r for r in runs if r.loader is not None and "threads" in r.loader and "img_per_s" in r.loader]
    if not have:
        return
    fig, ax = plt.subplots(figsize=(7, 4.6))
    allx = []
    for i, r in enumerate(have):
        t = r.loader["threads"].astype(float)
        ips = r.loader["img_per_s"].astype(float)
        ok = finite(t, ips)
        order = np.argsort(t[ok])
        t, ips = t[ok][order], ips[ok][order]
        if not len(t):
            continue
        ax.plot([0] + list(t), ips[0] / t[0] * np.array([0] + list(t)), "--", color=f"C{i}", alpha=0.6)
        ax.plot(t, ips, "o-", color=f"C{i}", label=series_label(r, have))
        for x, y in zip(t, ips):
            ax.annotate(f"{y:.0f}", (x, y), textcoords="offset points", xytext=(6, -12), fontsize=8,
                        color=f"C{i}")
        allx += list(t)
    ax.plot([], [], "--", color="gray", label="ideal: img/s of the fewest threads x threads / their count")
    rank_ticks(ax, allx)
    ax.set_ylim(bottom=0)
    ax.set_xlabel("loader threads")
    ax.set_ylabel("loader throughput (images/s)")
    sub = have[0].describe_loader() if len({r.describe_loader() for r in have}) == 1 else "see the legend"
    ax.set_title(f"JPEG loader throughput against threads\n{sub}", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="upper left")
    save(fig, out, f"{prefix}_loader.png", written)


def plot_projection(runs, out, prefix, written):
    have = [r for r in runs if r.projection is not None and "ranks" in r.projection
            and "efficiency" in r.projection]
    if not have:
        return
    fig, ax = plt.subplots(figsize=(8, 4.8))
    ax.axhline(100, color="gray", ls=":", lw=1, label="ideal (100 %)")
    allx = []
    for i, r in enumerate(have):
        p = {k: v for k, v in r.projection.items() if v.dtype.kind in "iuf"}
        keep = np.isfinite(p["ranks"].astype(float))  # a row of nan or inf ranks: left out
        p = {k: np.where(np.isfinite(v[keep]), v[keep], np.nan) for k, v in p.items()}
        n = p["ranks"].astype(float)
        order = np.argsort(n)
        n = n[order]
        if not len(n):
            continue
        c = f"C{i}"
        fab = r.fabric.split(":")[0] if r.fabric else "?"
        ax.plot(n, 100 * p["efficiency"][order], "-", color=c, lw=1.8,
                label=f"projected, {fab}" + ("" if len(have) == 1 else f" ({r.label})"))
        if "measured_efficiency" in p:
            m = 100 * p["measured_efficiency"][order]
            ok = np.isfinite(m)
            if ok.any():
                what = "measured" if r.model != "?" else "published"
                ax.plot(n[ok], m[ok], "o", color=c, ms=7, mfc="none", mew=1.8,
                        label=what + ("" if len(have) == 1 else f" ({r.label})"))
                for x, y in zip(n[ok], m[ok]):
                    ax.annotate(f"{y:.1f} %", (x, y), textcoords="offset points", xytext=(6, -12), fontsize=8,
                                color=c)
        if len(have) == 1:
            keys = [k for k in p if k.startswith("if_") and k.endswith("_efficiency")]
            styles = ["--", "-.", ":", (0, (5, 1, 1, 1)), (0, (3, 3))]
            for j, k in enumerate(sorted(keys)):
                what = k[3:-len("_efficiency")].replace("_", " ")
                ax.plot(n, 100 * p[k][order], ls=styles[j % len(styles)], color=f"C{j + 1}", lw=1.2,
                        label=f"if {what}")
        allx += list(n)
    if not allx:
        plt.close(fig)
        print("no /projection row of finite ranks in any file: no projection plot")
        return
    ax.set_xscale("log", base=2)
    lo, hi = min(allx), max(allx)
    ax.set_xlim(max(0.7, lo * 0.7), max(hi * 1.25, 4096))
    ticks = [2 ** k for k in range(0, 16) if lo * 0.7 <= 2 ** k <= max(hi * 1.25, 4096)]
    ax.set_xticks(ticks)
    ax.set_xticklabels([str(t) for t in ticks], fontsize=8)
    ax.set_ylim(0, 110)
    ax.set_xlabel("ranks (log scale)")
    ax.set_ylabel("weak-scaling efficiency T1 / (N x TN) (%)")
    if len(have) == 1:
        sub = have[0].fabric or have[0].describe()
    elif all(r.model != "?" for r in have):
        sub = subtitle(have)
    else:  # published profiles: no run attributes, the legend names them
        sub = f"{len(have)} projections, see the legend"
    ax.set_title(f"Projected and measured efficiency against ranks\n{sub[:110]}", fontsize=9)
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=7, loc="lower left")
    save(fig, out, f"{prefix}_projection.png", written)


def unique_stems(runs):
    """Files of one name from two folders wrote one STEM_breakdown.png, the
    second over the first: such files are told apart by their --label, else
    their folder's name (then a count)."""
    names = [r.stem for r in runs]
    for r in runs:
        if names.count(r.stem) > 1:
            folder = os.path.basename(os.path.dirname(os.path.abspath(r.path))) or "root"
            base = r.given_label or f"{folder}_{r.stem}"
            r.stem = re.sub(r"[^A-Za-z0-9._+-]+", "_", base).strip("_") or r.stem
    seen = {}
    for r in runs:
        seen[r.stem] = seen.get(r.stem, 0) + 1
        if seen[r.stem] > 1:
            r.stem = f"{r.stem}_{seen[r.stem]}"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="+", metavar="RUN.h5")
    ap.add_argument("--out", required=True, help="directory for the PNGs (created)")
    ap.add_argument("--prefix", help="name of the combined plots (default: the stem of a single file, "
                                     "'compare' for several)")
    ap.add_argument("--label", action="append", default=[], help="legend label per file, in order")
    a = ap.parse_args()
    runs = []
    for i, p in enumerate(a.files):
        try:
            runs.append(Run(p, a.label[i] if i < len(a.label) else None))
        except (OSError, ValueError) as e:
            print(f"plot_results.py: {p}: {e}", file=sys.stderr)
            sys.exit(1)
    os.makedirs(a.out, exist_ok=True)
    prefix = a.prefix or (runs[0].stem if len(runs) == 1 else "compare")
    unique_stems(runs)
    written = []
    for r in runs:
        if r.kind in NO_PLOT:
            print(f"{r.path}: kind '{r.kind}' ({NO_PLOT[r.kind]}): plot_results.py has no plot of its kind; "
                  f"'trainbench report {r.path}' prints its tables")
    train = [r for r in runs if r.kind == "train"]  # loader-bench: /loader; projection: /projection
    if train:
        plot_throughput(train, a.out, prefix, written)
        for r in train:
            plot_breakdown(r, a.out, written)
        plot_loss(train, a.out, prefix, written)
    plot_loader(runs, a.out, prefix, written)
    plot_projection(runs, a.out, prefix, written)
    if not written:
        print("plot_results.py: nothing to plot", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
