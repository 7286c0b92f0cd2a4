#!/usr/bin/env python3
"""check_report_convs.py: `trainbench report A B`'s list of the convolutions
that ran another engine or algorithm, against results files of real GPU runs.

  check_report_convs.py --trainbench TB --results DIR

DIR is the repository's results/ folder. The files (ResNet-50, bf16, NHWC,
batch 256 on an H200, 53 convolutions each):
  r1, r2   two repeats of one bench call, the second reading its plans from
           the plan cache: every convolution ran the same way;
  nov27    the same row on another day, its plans timed afresh: the engines
           and knobs differ in most convolutions;
  fused    --fuse graph: each convolution has its fused op's parts too.
For each pair the (convolution, part) rows `report A B --format csv` lists
must be exactly those an independent reading of the two /conv_algorithms
tables finds differing (times, the alternative not chosen and how the choice
was made left out), and its note must count the convolutions. Then planted
in a copy of r1: one direction's engine changed (exactly that row), only
times changed (nothing), a second batch size with a filter+ part (its
three parts), a convolution only B has, a convolution's line dropped (its
parts, each '(absent)' in B). And `report RUN` on a copy of r1 whose table
is given four ranks (rank 1 as rank 0, rank 2 with one engine changed,
rank 3 with a line dropped) lists exactly ranks 2 and 3's parts, each
under its own note, and with no rank 0 row says so; r1 alone (one rank)
gets no such list; and on a stored 2-rank H100 run (two ranks on one GPU)
it lists rank 1's differing parts.
Exit 0 when all hold, 1 otherwise, 77 without h5py.
"""
import argparse
import csv
import io
import os
import re
import shutil
import subprocess
import sys
import tempfile

try:
    import h5py
except ImportError:
    print("SKIP: h5py is not installed")
    sys.exit(77)

FILES = {"r1": "gpu_h200_2026-12-04c/call1/resnet50/tb_bf16_nhwc_256_graph_r1.h5",
         "r2": "gpu_h200_2026-12-04c/call1/resnet50/tb_bf16_nhwc_256_graph_r2.h5",
         "nov27": "gpu_h200_2026-11-27/tb_bf16_nhwc_256_graph.h5",
         "fused": "gpu_h200_2026-12-04b/call4/resnet50/tb_bf16_nhwc_256_fused_r1.h5",
         "two_ranks": "gpu_h100_2026-11-27/wire_bf16.h5"}
NUM = r"[0-9.]+"
DROP = [rf" vs legacy \S+ {NUM} ms", rf"; graph engine {NUM} {NUM} ms", rf", {NUM} ms", ", measured", ", heuristic",
        ", from the plan cache", rf" \({NUM} ms with pads {NUM} ms, against {NUM} ms on {NUM}\)"]
DIRS = {"fwd", "data", "data+", "filter", "filter+", "conv+stats", "finalize", "wgrad", "dgrad+dbn"}


def table(path, rank=0):
    """A rank's /conv_algorithms text as {conv: description}, in order."""
    with h5py.File(path, "r") as f:
        ranks = list(f["conv_algorithms/rank"][()])
        text = f["conv_algorithms/algorithms"][ranks.index(rank)]
    text = text.decode() if isinstance(text, bytes) else text
    return dict(line.split(": ", 1) for line in text.splitlines() if ": " in line)


def parts(desc):
    """{part key: what ran}, e.g. 'n=256 fwd' -> 'graph-api engine 62 [k2=4] (0.0 MiB)'."""
    for d in DROP:
        desc = re.sub(d, "", desc)
    main, _, fused = desc.partition(" | ")
    out = {}
    for section, text in (("", main), ("fused ", re.sub(r"^[^:]*: ", "", fused) if fused else "")):
        for entry in filter(None, text.split("; n=")):
            m = re.match(r"(?:(.*?) )?(?:n=)?(\d+): (.*)$", entry)
            if not m:  # words before the first batch size only
                out[section + "input"] = entry
                continue
            if m.group(1):
                out[section + "input"] = m.group(1)
            key = None
            for w in m.group(3).split(" "):
                if w in DIRS:
                    key = f"{section}n={m.group(2)} {w}"
                    out[key] = ""
                elif key:
                    out[key] = (out[key] + " " + w).strip()
    return out


def expected(a, b):
    """The (conv, part) pairs that differ, and the number of A's convolutions that do."""
    rows, convs = set(), 0
    for name in list(a) + [n for n in b if n not in a]:
        pa, pb = parts(a.get(name, "")), parts(b.get(name, ""))
        diff = {(name, k) for k in set(pa) | set(pb) if pa.get(k) != pb.get(k)}
        rows |= diff
        convs += bool(diff)
    return rows, convs


def reported(tb, pa, pb):
    """(the (conv, part) rows report A B listed, its /conv_algorithms note)."""
    p = subprocess.run([tb, "report", pa, pb, "--format", "csv"], capture_output=True, text=True)
    rows, note, header = set(), None, None
    for line in p.stdout.splitlines():
        if line.startswith("# /conv_algorithms:") and ("convolutions ran" in line or "every convolution" in line):
            note = line
        if line.startswith("convolution,part,"):
            header = True
            continue
        if header and line and not line.startswith("#"):
            r = next(csv.reader(io.StringIO(line)))
            rows.add((r[0], r[1]))
        elif header and (not line or line.startswith("#")):
            header = None
    return rows, note


def check_pair(tb, name, pa, pb, errs, min_rows=0):
    want, convs = expected(table(pa), table(pb))
    got, note = reported(tb, pa, pb)
    print(f"# {name}: report lists {len(got)} parts; the tables differ in {len(want)} parts of {convs} "
          f"convolutions; note: {note}")
    if got != want:
        errs.append(f"{name}: listed but not differing {sorted(got - want)[:4]}, differing but not listed "
                    f"{sorted(want - got)[:4]}")
    n = len(set(table(pa)) | set(table(pb)))
    want_note = (f"{convs} of {n} convolutions ran another engine or algorithm in B" if convs else
                 f"every convolution ran the same engines and algorithms in A and B ({n}, rank 0)")
    if not note or want_note not in note:
        errs.append(f"{name}: the note '{note}' lacks '{want_note}'")
    if len(want) < min_rows:
        errs.append(f"{name}: only {len(want)} parts differ, the pair was chosen for at least {min_rows}")
    return got


def plant(tb, src, tmp, edit, errs, what, want):
    """Edits rank 0's table in a copy of src and checks report src copy lists exactly want (and counts
    the convolutions of both files in its note)."""
    path = os.path.join(tmp, "planted.h5")
    shutil.copy(src, path)
    with h5py.File(path, "r+") as f:
        ranks = list(f["conv_algorithms/rank"][()])
        text = f["conv_algorithms/algorithms"][ranks.index(0)]
        text = text.decode() if isinstance(text, bytes) else text
        f["conv_algorithms/algorithms"][ranks.index(0)] = edit(text)
    got, note = reported(tb, src, path)
    print(f"# planted, {what}: report lists {sorted(got)}; {note}")
    if got != want:
        errs.append(f"planted {what}: report listed {sorted(got)}, expected {sorted(want)}")
    convs = len(set(table(src)) | set(table(path)))
    if want and f"{len({c for c, _ in want})} of {convs} convolutions" not in (note or ""):
        errs.append(f"planted {what}: the note '{note}' does not count {len({c for c, _ in want})} of {convs}")


def rank_lists(tb, path):
    """report RUN's per-rank lists: {rank: set of (conv, part)}, and its notes on /conv_algorithms ranks."""
    out = subprocess.run([tb, "report", path, "--format", "csv"], capture_output=True, text=True).stdout
    lists, notes, rank, header = {}, [], None, False
    for line in out.splitlines():
        m = re.match(r"# /conv_algorithms: the parts that ran another engine or algorithm \(rank (\d+) against rank 0;",
                     line)
        if m:
            rank, header = int(m.group(1)), False
            lists[rank] = set()
            continue
        if line.startswith("# /conv_algorithms:") and "rank" in line:
            notes.append(line)
        if rank is not None and line.startswith("convolution,part,"):
            header = True
        elif rank is not None and header and line and not line.startswith("#"):
            r = next(csv.reader(io.StringIO(line)))
            lists[rank].add((r[0], r[1]))
        elif header:
            rank, header = None, False
    return lists, notes


def check_ranks(tb, r1, tmp, errs):
    """A four-rank copy of r1's table: ranks 2 and 3 listed, each with exactly its planted parts."""
    text = table(r1)
    base = "".join(f"{k}: {v}\n" for k, v in text.items())
    r2 = base.replace("layer3.0.conv2: n=256: fwd graph-api engine ", "layer3.0.conv2: n=256: fwd graph-api engine 7", 1)
    r3 = "".join(f"{k}: {v}\n" for k, v in text.items() if k != "conv1")
    path = os.path.join(tmp, "ranks.h5")
    shutil.copy(r1, path)
    with h5py.File(path, "r+") as f:
        g = f["conv_algorithms"]
        del g["rank"], g["algorithms"]
        g["rank"] = [0, 1, 2, 3]
        g.create_dataset("algorithms", data=[base, base, r2, r3], dtype=h5py.string_dtype())
    lists, notes = rank_lists(tb, path)
    want = {2: {("layer3.0.conv2", "n=256 fwd")}, 3: {("conv1", k) for k in parts(text["conv1"])}}
    print(f"# four ranks planted: report RUN lists {lists}; notes {notes}")
    if lists != want:
        errs.append(f"report RUN on four ranks listed {lists}, expected {want}")
    for rank in (2, 3):
        if not any(f"rank {rank} ran another engine or algorithm than rank 0 in 1 of 53 convolutions" in x
                   for x in notes):
            errs.append(f"no note 'rank {rank} ran ... in 1 of 53 convolutions': {notes}")
    if not any("2 of the 3 ranks besides rank 0 ran another engine or algorithm than rank 0" in x for x in notes):
        errs.append(f"no note '2 of the 3 ranks besides rank 0 ...': {notes}")
    with h5py.File(path, "r+") as f:  # the same rows, none of them rank 0's
        del f["conv_algorithms/rank"]
        f["conv_algorithms/rank"] = [1, 2, 3, 4]
    lists, notes = rank_lists(tb, path)
    if lists or not any("no row for rank 0: the ranks are not compared" in x for x in notes):
        errs.append(f"report RUN on a file without rank 0's row: {lists} {notes}")
    lists, notes = rank_lists(tb, r1)
    if lists or notes:
        errs.append(f"report RUN on a one-rank file printed rank lists {lists} {notes}")


def check_two_ranks(tb, path, errs):
    """A stored 2-rank H100 run (two ranks on one GPU, each timing its own plans): report RUN's list of rank 1
    equals the parts its row differs in from rank 0's; docs/results.md quotes the count."""
    want, convs = expected(table(path, 0), table(path, 1))
    lists, notes = rank_lists(tb, path)
    print(f"# two ranks, one H100: report RUN lists {len(lists.get(1, ()))} parts of rank 1 "
          f"(the rows differ in {len(want)} parts of {convs} convolutions); {notes}")
    if lists.get(1, set()) != want or set(lists) - {1}:
        errs.append(f"two ranks: listed {lists}, the rows differ in {sorted(want)}")
    if convs != 13 or not any("rank 1 ran another engine or algorithm than rank 0 in 13 of 53" in x for x in notes):
        errs.append(f"two ranks: {convs} convolutions differ; docs/results.md says 13 of 53 ({notes})")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--trainbench", required=True)
    ap.add_argument("--results", required=True)
    a = ap.parse_args()
    f = {k: os.path.join(a.results, v) for k, v in FILES.items()}
    errs = []
    check_pair(a.trainbench, "r1 r2 (plans from the cache)", f["r1"], f["r2"], errs)
    if expected(table(f["r1"]), table(f["r2"]))[0]:
        errs.append("r1 and r2 ran different engines: the pair no longer tests the 'same way' note")
    got = check_pair(a.trainbench, "nov27 r1 (timed afresh)", f["nov27"], f["r1"], errs, min_rows=40)
    convs = len({c for c, _ in got})
    if (len(got), convs) != (75, 43):  # the figures docs/cuda.md quotes
        errs.append(f"nov27 r1: {len(got)} parts in {convs} convolutions listed; docs/cuda.md says 75 in 43")
    ta, tb = table(f["nov27"]), table(f["r1"])
    head = re.compile(r"graph-api engine \d+|legacy \S+")
    same = sum(head.match(parts(ta[c])[k]).group(0) == head.match(parts(tb[c])[k]).group(0) for c, k in got)
    print(f"# nov27 r1: {same} of the {len(got)} parts run the same engine or algorithm with other knobs")
    if same != 60:
        errs.append(f"nov27 r1: {same} parts keep their engine; docs/cuda.md says 60 of the 75")
    got = check_pair(a.trainbench, "nov27 fused", f["nov27"], f["fused"], errs, min_rows=53)
    if not any(k.startswith("fused n=256 conv+stats") for _, k in got):
        errs.append("nov27 fused: no 'fused n=256 conv+stats' part listed")
    with tempfile.TemporaryDirectory() as tmp:
        plant(a.trainbench, f["r1"], tmp,
              lambda t: t.replace("layer2.1.conv2: n=256: fwd graph-api engine ", "layer2.1.conv2: n=256: fwd "
                                  "graph-api engine 9", 1), errs, "layer2.1.conv2's fwd engine",
              {("layer2.1.conv2", "n=256 fwd")})
        plant(a.trainbench, f["r1"], tmp, lambda t: re.sub(r"(\d)\.(\d\d\d) ms", r"\2.\1 ms", t), errs,
              "every time changed", set())
        # a second batch size (a last, partial batch): "; n=64: ..." after the line, and a filter+ part
        plant(a.trainbench, f["r1"], tmp,
              lambda t: t.replace(
                  "\nlayer4.1.conv1: ", "; n=64: fwd legacy IMPLICIT_GEMM (fma, 0.0 MiB, 0.321 ms) filter graph-api "
                  "engine 9 [] (0.0 MiB, 0.1 ms) filter+ legacy ALGO_1 (fma, 0.0 MiB, 0.2 ms)\nlayer4.1.conv1: ", 1),
              errs, "a batch size 64 added to layer4.0.downsample.0 (the line before layer4.1.conv1)",
              {("layer4.0.downsample.0", k) for k in ("n=64 fwd", "n=64 filter", "n=64 filter+")})
        plant(a.trainbench, f["r1"], tmp, lambda t: t + "extra.conv: n=256: fwd graph-api engine 1 [] (0.0 MiB, 1.0 ms)\n",
              errs, "a convolution only B has", {("extra.conv", "n=256 fwd")})
        check_ranks(a.trainbench, f["r1"], tmp, errs)
        check_two_ranks(a.trainbench, f["two_ranks"], errs)
        drop = "layer3.2.conv1"
        plant(a.trainbench, f["r1"], tmp,
              lambda t: "\n".join(ln for ln in t.splitlines() if not ln.startswith(drop + ": ")) + "\n", errs,
              f"{drop}'s line dropped", {(drop, k) for k in parts(table(f["r1"])[drop])})
    for e in errs:
        print("FAIL: " + e)
    print("# check_report_convs: " + ("ok" if not errs else f"{len(errs)} failed"))
    return 1 if errs else 0


if __name__ == "__main__":
    sys.exit(main())
