#!/usr/bin/env python3
"""check_batchnorms.py: the results file's /batchnorms table against the run.

  check_batchnorms.py --trainbench TB [--mpiexec M] [--ranks N]

Trains ResNet-18 on the CPU twice (2 steps, batch 2, 32 px, N ranks):
  fastest  --fuse fastest: every rank's row names each BatchNorm of the
           model once (one per conv of /conv_algorithms: convK -> bnK,
           downsample.0 -> downsample.1); rank 0's modes add up to the run's
           '# fuse graph: ...' line; the 8 folds' times and the BatchNorms'
           times are there as the '# fuse fastest:' lines count them; each
           timed line's mode is the one its times choose under the 2 % rule
           (the second way kept only where it is more than 2 % faster:
           model/graph_fused_time.c); every line ends with the backend's
           kernels ('kernels cpu');
  off      --fuse off: every BatchNorm unfused, nothing timed.
Then each check must fail on a planted error in a copy of the fastest
table: a mode changed, a line dropped, a timed pair swapped, a rank's row
missing. And `trainbench report A B` (csv) lists exactly the BatchNorms
whose mode or kernels differ between the two runs, none for a file against
itself, and exactly the one a copy of the file has edited (its kernels
word). `trainbench report RUN` lists, rank by rank, the BatchNorms whose
choice differs from rank 0's (each rank times for itself on the CPU): its
lists equal the file's rows' differences, and a copy with one BatchNorm of
rank 1 edited lists that one too. Exit 0 when all hold, 1 otherwise, 77 when h5py is missing.
"""
import csv
import io
import shutil
import argparse
import os
import re
import subprocess
import sys
import tempfile

try:
    import h5py
except ImportError:
    print("SKIP: h5py is not installed")
    sys.exit(77)

MARGIN = 0.02
MODES = ("unfused", "applied", "folded into the block end", "folded")
LINE = re.compile(r"^(?P<name>[\w.]+): (?P<mode>folded into the block end|folded|applied|unfused)"
                  r"(?: into (?P<into>[\w.]+)| (?P<end>[\w.]+))?(?:, statistics from (?P<stats>[\w.]+))?"
                  r"(?:; timed folded (?P<fa>[\d.]+) ms, applied (?P<fb>[\d.]+) ms)?"
                  r"(?:; timed fused (?P<sa>[\d.]+) ms, unfused (?P<sb>[\d.]+) ms)?"
                  r"; kernels (?P<kernels>cpu|none \(the fused ops\))$")


def run(cmd):
    print("+ " + " ".join(cmd), flush=True)
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        print(r.stdout[-3000:] + r.stderr[-3000:])
        print(f"FAIL: exit {r.returncode}")
        sys.exit(1)
    return r.stdout + r.stderr


def read(path):
    with h5py.File(path, "r") as f:
        def rows(group, col):
            g = f[group]
            return {int(r): (t.decode() if isinstance(t, bytes) else t) for r, t in zip(g["rank"][()], g[col][()])}
        return rows("batchnorms", "choices"), rows("conv_algorithms", "algorithms")


def bn_names(convs_text):
    """The BatchNorm after each conv, from /conv_algorithms' names."""
    names = []
    for line in convs_text.splitlines():
        conv = line.split(":", 1)[0]
        if conv.endswith("downsample.0"):
            names.append(conv[:-1] + "1")
        elif conv.rsplit(".", 1)[-1].startswith("conv"):
            head, last = conv.rsplit(".", 1) if "." in conv else ("", conv)
            names.append((head + "." if head else "") + last.replace("conv", "bn"))
    return names


def conv_of(bn):
    """The conv whose output BN bn normalises: bnK -> convK, downsample.1 -> downsample.0."""
    if bn.endswith("downsample.1"):
        return bn[:-1] + "0"
    head, _, last = bn.rpartition(".")
    return (head + "." if head else "") + last.replace("bn", "conv")


def peers_ok(d, names):
    """A line's named convs and BatchNorms as its mode says: statistics from
    its own conv (fused modes only), folded into the next conv of its block,
    folded into its block's last BatchNorm."""
    n, mode = d["name"], d["mode"]
    if (d["stats"] is not None) != (mode != "unfused") or (d["stats"] and d["stats"] != conv_of(n)):
        return False
    if mode == "folded":
        head, _, last = n.rpartition(".")
        nxt = f"{head}.conv{int(last[2:]) + 1}" if last.startswith("bn") and last[2:].isdigit() else None
        return d["into"] == nxt and d["kernels"] == "none (the fused ops)"
    if d["kernels"] != "cpu" or d["into"] is not None:
        return False
    if mode == "folded into the block end":
        block = n.rsplit(".", 2)[0]  # layerL.B of layerL.B.downsample.1
        last = max((b for b in names if b.startswith(block + ".bn")), default=None)
        return n.endswith("downsample.1") and d["end"] == last
    return d["end"] is None


def parse(text):
    out = []
    for line in text.splitlines():
        m = LINE.match(line)
        if not m:
            return None, f"a line does not parse: {line!r}"
        out.append(m.groupdict())
    return out, ""


def check(bns, convs, world, summary=None, fastest=None):
    """Every problem found, as lines (empty: all hold)."""
    errs = []
    if sorted(bns) != list(range(world)):
        errs.append(f"/batchnorms has rows for ranks {sorted(bns)}, expected 0..{world - 1}")
    for rank in sorted(bns):
        lines, why = parse(bns[rank])
        if lines is None:
            errs.append(f"rank {rank}: {why}")
            continue
        want = bn_names(convs.get(rank, ""))
        got = [d["name"] for d in lines]
        if sorted(got) != sorted(want) or len(got) != len(set(got)):
            errs.append(f"rank {rank}: BatchNorms {got} are not the model's {want}")
        for d in lines:
            if not peers_ok(d, got):
                errs.append(f"rank {rank}: {d['name']}: {d['mode']} with statistics from {d['stats']}, into "
                            f"{d['into'] or d['end']}, kernels {d['kernels']!r}: not as its mode says")
            if fastest is None and (d["fa"] or d["sa"] or d["mode"] != "unfused"):
                errs.append(f"rank {rank}: {d['name']}: {d['mode']}, timed, under --fuse off")
            if d["fa"]:  # the fold: applied kept only where more than 2 % faster than folded
                applied = float(d["fb"]) < float(d["fa"]) * (1 - MARGIN)
                if not (d["mode"] in ("applied", "unfused") if applied else d["mode"] == "folded"):
                    errs.append(f"rank {rank}: {d['name']}: {d['mode']} against its fold's times {d['fa']}, {d['fb']}")
            if d["sa"]:  # the statistics: unfused kept only where more than 2 % faster than fused
                unfused = float(d["sb"]) < float(d["sa"]) * (1 - MARGIN)
                if unfused != (d["mode"] == "unfused"):
                    errs.append(f"rank {rank}: {d['name']}: {d['mode']} against its statistics' times {d['sa']}, {d['sb']}")
        if rank == 0 and summary is not None:
            counts = {m: sum(1 for d in lines if d["mode"] == m) for m in MODES}
            if counts != summary:
                errs.append(f"rank 0: modes {counts} against the run's line {summary}")
        if rank == 0 and fastest is not None:
            timed = (sum(1 for d in lines if d["fa"]), sum(1 for d in lines if d["sa"]))
            if timed != fastest:
                errs.append(f"rank 0: {timed[0]} folds and {timed[1]} BatchNorms timed in the table, "
                            f"the '# fuse fastest:' lines say {fastest}")
    return errs


def summary_of(out):
    m = re.search(r"^# fuse graph: \d+ of \d+ BatchNorms on conv statistics: (\d+) folded into the next conv, "
                  r"(\d+) into the block end, (\d+) applied; (\d+) unfused", out, re.M)
    if not m:
        return None
    f, z, a, u = (int(x) for x in m.groups())
    return {"unfused": u, "applied": a, "folded into the block end": z, "folded": f}


def fastest_of(out):
    """(folds timed, BatchNorms timed) as the '# fuse fastest:' lines say; None: no line."""
    f = re.search(r"^# fuse fastest: (\d+) folds? timed", out, re.M)
    b = re.search(r"^# fuse fastest: (\d+) BatchNorms? timed on their conv's statistics", out, re.M)
    return (int(f.group(1)) if f else 0, int(b.group(1)) if b else 0) if f or b else None


def choice(line):
    """A /batchnorms line's mode and kernels, times left out (what report A B compares)."""
    d = LINE.match(line).groupdict()
    mode = line.split(": ", 1)[1].split(";", 1)[0]
    return f"{mode}, kernels {d['kernels'].split(' ', 1)[0]}"


def differing(text_a, text_b):
    """The BatchNorms whose choice differs, from the two files' rank-0 texts."""
    a = {l.split(": ", 1)[0]: choice(l) for l in text_a.splitlines()}
    b = {l.split(": ", 1)[0]: choice(l) for l in text_b.splitlines()}
    return sorted(n for n in set(a) | set(b) if a.get(n) != b.get(n))


def reported(tb, path_a, path_b):
    """(names listed by `report A B`'s /batchnorms table, its 'same way' note printed)."""
    out = subprocess.run([tb, "report", path_a, path_b, "--format", "csv"], capture_output=True, text=True).stdout
    lines = out.splitlines()
    same = any(l.startswith("# /batchnorms: every BatchNorm ran the same way") for l in lines)
    at = next((i for i, l in enumerate(lines) if l.startswith("# /batchnorms: the BatchNorms that ran")), None)
    if at is None:
        return [], same
    rows = []
    for row in csv.reader(io.StringIO("\n".join(lines[at + 1:]))):
        if not row:
            break
        rows.append(row)
    return sorted(r[0] for r in rows[1:]), same


def rank_listed(tb, path):
    """report RUN's per-rank /batchnorms lists: {rank: sorted names}, and whether it said every rank ran alike."""
    out = subprocess.run([tb, "report", path, "--format", "csv"], capture_output=True, text=True).stdout
    lists, rank, alike = {}, None, False
    for line in out.splitlines():
        m = re.match(r"# /batchnorms: the BatchNorms that ran another way \(rank (\d+) against rank 0;", line)
        alike |= line.startswith("# /batchnorms: every rank ran the same way as rank 0")
        if m:
            rank = int(m.group(1))
            lists[rank] = []
        elif rank is not None and line and not line.startswith("#") and not line.startswith("batchnorm,"):
            lists[rank].append(line.split(",", 1)[0])
        elif rank is not None and not line:
            rank = None
    return {r: sorted(v) for r, v in lists.items()}, alike


def check_ranks(tb, tmp, fast, bns):
    """report RUN's rank lists against the rows; one BatchNorm of rank 1 edited in a copy."""
    errs = []
    want = {r: differing(bns[0], bns[r]) for r in bns if r != 0 and differing(bns[0], bns[r])}
    got, alike = rank_listed(tb, fast)
    print(f"# report RUN: ranks listed against rank 0 {got} (the rows differ in {want}; 'every rank' note: {alike})")
    if got != want or alike != (not want):
        errs.append(f"report RUN listed {got} (note {alike}), the rows differ in {want}")
    if 1 not in bns:
        return errs
    edited = os.path.join(tmp, "edited_rank1.h5")
    shutil.copy(fast, edited)
    lines = bns[1].splitlines()
    at = next(i for i, l in enumerate(lines) if l.endswith("; kernels cpu"))
    name = lines[at].split(": ", 1)[0]
    lines[at] = lines[at].replace("; kernels cpu", "; kernels own")
    with h5py.File(edited, "r+") as f:
        ranks = list(f["batchnorms/rank"][()])
        f["batchnorms/choices"][ranks.index(1)] = "\n".join(lines) + "\n"
    got, _ = rank_listed(tb, edited)
    print(f"# planted: rank 1's {name} edited in a copy: report RUN lists {got}")
    if got.get(1) != sorted(set(want.get(1, [])) | {name}):
        errs.append(f"report RUN on the edited copy listed {got}, expected rank 1: {name} (and {want.get(1, [])})")
    return errs


def check_report(tb, tmp, fast, off, bns, bns_off):
    """report A B against the tables; the edit plant. Returns the failures."""
    errs = []
    want = differing(bns[0], bns_off[0])
    got, _ = reported(tb, fast, off)
    print(f"# report fastest off: {len(got)} BatchNorms ran another way (the tables say {len(want)})")
    if got != want or not want:
        errs.append(f"report A B listed {got}, the tables differ in {want}")
    got, same = reported(tb, fast, fast)
    if got or not same:
        errs.append(f"report A A listed {got} (same-way note: {same})")
    edited = os.path.join(tmp, "edited.h5")
    shutil.copy(fast, edited)
    lines = bns[0].splitlines()
    at = next(i for i, l in enumerate(lines) if l.endswith("; kernels cpu"))
    target = lines[at]
    with h5py.File(edited, "r+") as f:
        ranks = list(f["batchnorms/rank"][()])
        lines[at] = target.replace("; kernels cpu", "; kernels own")
        f["batchnorms/choices"][ranks.index(0)] = "\n".join(lines) + "\n"
    got, _ = reported(tb, fast, edited)
    name = target.split(": ", 1)[0]
    print(f"# planted: {name}'s kernels edited in a copy: report lists {got}")
    if got != [name]:
        errs.append(f"report A edited-A listed {got}, expected [{name!r}]")
    return errs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--trainbench", required=True)
    ap.add_argument("--mpiexec", default="")
    ap.add_argument("--ranks", type=int, default=1)
    a = ap.parse_args()
    launch = [a.mpiexec, "-np", str(a.ranks)] if a.ranks > 1 else []
    common = ["train", "--backend", "cpu", "--synthetic", "--steps", "2", "--batch-size", "2", "--image-size", "32",
              "--threads", "1", "--scaling-steps", "0"]
    bad = 0
    with tempfile.TemporaryDirectory() as tmp:
        fast = os.path.join(tmp, "fastest.h5")
        out = run(launch + [a.trainbench] + common + ["--results", fast, "--fuse", "fastest"])
        summary, timed = summary_of(out), fastest_of(out)
        if summary is None or timed is None:
            print(out[-3000:])
            print("FAIL: the run printed no '# fuse graph:' summary or no '# fuse fastest:' line")
            return 1
        bns, convs = read(fast)
        print(f"# fastest: {summary}; timed (folds, BatchNorms) {timed}; rank 0's table:")
        print(bns.get(0, ""))
        errs = check(bns, convs, a.ranks, summary, timed)
        for e in errs:
            print("FAIL: " + e)
        bad += bool(errs)
        off = os.path.join(tmp, "off.h5")
        run(launch + [a.trainbench] + common + ["--results", off, "--fuse", "off"])
        bns_off, convs_off = read(off)
        errs = check(bns_off, convs_off, a.ranks)
        for e in errs:
            print("FAIL (--fuse off): " + e)
        bad += bool(errs)
        print(f"# off: {len(bns_off.get(0, '').splitlines())} BatchNorms, all unfused and untimed: "
              f"{'ok' if not errs else 'no'}")
        errs = check_report(a.trainbench, tmp, fast, off, bns, bns_off)
        for e in errs:
            print("FAIL (report A B): " + e)
        bad += bool(errs)
        errs = check_ranks(a.trainbench, tmp, fast, bns)
        for e in errs:
            print("FAIL (report RUN, ranks): " + e)
        bad += bool(errs)

        # planted errors, each in a copy of the fastest table: each must be caught
        r0 = bns.get(0, "").splitlines()
        timed_line = next((i for i, l in enumerate(r0) if "; timed " in l), None)
        applied_line = next((i for i, l in enumerate(r0) if ": applied" in l), None)
        plants = {}
        if applied_line is not None:
            plants["a mode changed"] = r0[:applied_line] + [r0[applied_line].replace(": applied", ": unfused", 1)] \
                + r0[applied_line + 1:]
        plants["a line dropped"] = r0[1:]
        stats_line = next((i for i, l in enumerate(r0) if ", statistics from " in l), None)
        if stats_line is not None:
            plants["a statistics conv misnamed"] = r0[:stats_line] + [re.sub(r"statistics from ([\w.]+?)(\d)(\b)",
                                                                              lambda m: f"statistics from {m.group(1)}"
                                                                              f"{int(m.group(2)) % 3 + 1}",
                                                                              r0[stats_line], count=1)] \
                + r0[stats_line + 1:]
        if timed_line is not None:
            m = re.search(r"timed (\w+) ([\d.]+) ms, (\w+) ([\d.]+) ms", r0[timed_line])
            x, y = float(m.group(2)), float(m.group(4))
            lo, hi = min(x, y), max(x, y) * 1.5 + 1.0
            keep_second = y < x * (1 - MARGIN)
            new_x, new_y = (lo, hi) if keep_second else (hi, lo)  # times that choose the other way
            swapped = r0[timed_line].replace(m.group(0), f"timed {m.group(1)} {new_x:.4f} ms, {m.group(3)} "
                                                         f"{new_y:.4f} ms", 1)
            plants["a timed pair swapped"] = r0[:timed_line] + [swapped] + r0[timed_line + 1:]
        for what, lines in plants.items():
            planted = dict(bns)
            planted[0] = "\n".join(lines) + "\n"
            caught = check(planted, convs, a.ranks, summary, timed)
            print(f"# planted: {what}: {'caught: ' + caught[0] if caught else 'NOT caught'}")
            bad += not caught
        missing = {r: t for r, t in bns.items() if r != a.ranks - 1}
        caught = check(missing, convs, a.ranks, summary, timed)
        print(f"# planted: rank {a.ranks - 1}'s row missing: {'caught: ' + caught[0] if caught else 'NOT caught'}")
        bad += not caught
        if len(plants) < 4:
            print(f"FAIL: only {len(plants)} of 4 table plants could be made (no applied, timed or fused line)")
            bad += 1
    print("PASS" if not bad else "FAIL")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
