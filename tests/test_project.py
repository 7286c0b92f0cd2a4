#!/usr/bin/python3
"""test_project.py - `trainbench project` checked against files trainbench
wrote in the test (tests/project.cmake) and against an independent
re-implementation of its arithmetic here (numpy), so a wrong formula in
src/project/projection.c or src/project/fabric.c cannot pass by agreeing with itself.

Modes (one ctest each):
  fit AR.h5 AR.txt     a real `allreduce-bench` run under mpirun -np 2: its
                       --results file passes `trainbench report` (exit 0,
                       /allreduce printed) and holds the console table's
                       rows; the alpha and bandwidth that `project --fabric
                       fit:...` prints for the .h5 and for the console text
                       equal a weighted least-squares fit done here
  run RUN.h5 NP1.h5    RUN.h5 from `mpirun -np 2 trainbench` (report.cmake):
                       /grad_ready and /buckets hold a consistent timeline;
                       `project --fabric emu-1gbit` prints (md, csv) and
                       stores (/projection, --out) the numbers recomputed
                       here from the file and the preset; the measured
                       columns equal /scaling; the differences by phase add
                       up; RUN.h5 is left byte for byte as it was; --out onto
                       its own input replaces it atomically; the plot is
                       drawn; bad input gets one line and exit 1 (NP1.h5:
                       one rank, no bucket timings to fit)
  profile PROFILE      a published profile (no results file): the published
                       efficiency beside the projection, a kind=projection
                       file that `report` accepts, and its plot
Exit 0 when every check holds, 1 otherwise, 77 without h5py/numpy."""
import argparse
import csv
import hashlib
import io
import math
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile

try:
    import h5py
    import numpy as np
except ImportError as e:
    print(f"SKIP: {e} (install python3-h5py python3-numpy)")
    sys.exit(77)

BAD = []
PHASES = ["data", "h2d", "forward", "backward", "allreduce", "optimizer"]


def fail(msg):
    BAD.append(msg)
    print("FAIL " + msg)


def run(cmd, expect_rc=None):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if expect_rc is not None and p.returncode != expect_rc:
        fail(f"{' '.join(cmd)}: exit {p.returncode}, expected {expect_rc}\n{p.stdout[-2000:]}\n{p.stderr}")
    return p


def close(got, want, rel, what, atol=0.0):
    if not (abs(got - want) <= atol + rel * abs(want)):
        fail(f"{what}: got {got!r}, want {want!r} (rel {rel}, atol {atol})")


def cell_close(cell, value, what):
    """A printed number equals value to the rounding of its digits."""
    cell = cell.strip()
    if cell in ("-", ""):
        if not (value is None or (isinstance(value, float) and math.isnan(value))):
            fail(f"{what}: printed '{cell}', expected {value!r}")
        return
    try:
        got = float(cell)
    except ValueError:
        fail(f"{what}: '{cell}' is not a number")
        return
    m = re.fullmatch(r"[-+]?\d+(?:\.(\d+))?", cell)
    d = len(m.group(1)) if m and m.group(1) else 0
    if value is None or math.isnan(value) or abs(got - value) > 0.5 * 10 ** -d * (1 + 1e-9) + 1e-12:
        fail(f"{what}: printed {cell}, expected {value!r}")


def md_tables(text):
    """{title: (header, rows)} of a markdown rendering."""
    lines = text.splitlines()
    out = {}
    for i, line in enumerate(lines):
        m = re.fullmatch(r"\*\*(.*)\*\*", line)
        if m and i + 3 < len(lines) and lines[i + 2].startswith("|"):
            split = lambda l: [c.strip() for c in re.split(r"(?<!\\)\|", l.strip())[1:-1]]
            head, rows, j = split(lines[i + 2]), [], i + 4
            while j < len(lines) and lines[j].startswith("|"):
                rows.append(split(lines[j]))
                j += 1
            out[m.group(1)] = (head, rows)
    return out


def find(tables, prefix):
    for k, v in tables.items():
        if k.startswith(prefix):
            return v
    fail(f"no table titled '{prefix}...'; tables: {list(tables)}")
    return [], []


def sha(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def png_ok(path):
    if not os.path.exists(path):
        return False
    with open(path, "rb") as fh:
        head = fh.read(24)
    if head[:8] != b"\x89PNG\r\n\x1a\n":
        return False
    w, h = struct.unpack(">II", head[16:24])
    return os.path.getsize(path) > 10000 and w >= 400 and h >= 300


def one_error_line(cmd, pattern):
    p = run(cmd, expect_rc=1)
    lines = [l for l in p.stderr.splitlines() if l.strip()]
    if len(lines) != 1 or not re.search(pattern, lines[0]):
        fail(f"{' '.join(cmd[1:])}: expected one error line matching /{pattern}/, got {lines}")


# ---- the independent model ---------------------------------------------------------------------

def ls_fit(samples):
    """Weighted (1/t^2) least squares of t = 2(n-1) a + 2(n-1)/n S b; a >= 0."""
    x1 = np.array([2.0 * (n - 1) for n, _, _ in samples])
    x2 = np.array([2.0 * (n - 1) / n * s for n, s, _ in samples])
    t = np.array([t for _, _, t in samples])
    w = 1 / t ** 2
    A = np.array([[np.sum(w * x1 * x1), np.sum(w * x1 * x2)], [np.sum(w * x1 * x2), np.sum(w * x2 * x2)]])
    rhs = np.array([np.sum(w * x1 * t), np.sum(w * x2 * t)])
    a, b = np.linalg.solve(A, rhs)
    if len(samples) <= 2 or not (a > 0 and b > 0):
        a, b = 0.0, np.sum(w * x2 * t) / np.sum(w * x2 * x2)
    return a, b


def ring_tree(n, nbytes, bw, alpha):
    """One rank per node (emulated hosts): every ring step crosses the network."""
    ring = 2.0 * (n - 1) / n * nbytes / bw + 2 * (n - 1) * alpha
    tree = 2.0 * nbytes / bw + 2 * math.ceil(math.log2(n)) * alpha
    return min(ring, tree), ("ring" if ring <= tree else "tree")


def cut_buckets(ranges, cap, first, wire=1.0):
    """The buckets as comm/grad_sync.c cuts them: whole ranges from the end of
    the buffer until the cap, the first one (launched first) at its own cap
    (0: the cap), as PyTorch DDP's 1 MiB first bucket. (ready, offset, bytes)
    in launch order; wire: bytes moved per gradient byte (bf16: 0.5), which
    does not change the cut (comm/grad_sync_dev.c cuts the float32 buffer)."""
    first = first if 0 < first < cap else cap
    rs = sorted(ranges, key=lambda r: -r[0])
    buckets, acc, ready = [], 0.0, 0.0
    for i, (off, nb, rd) in enumerate(rs):
        acc += nb
        ready = max(ready, rd)
        if acc >= (first if not buckets else cap) or i == len(rs) - 1:
            buckets.append((ready, off * wire, acc * wire))
            acc, ready = 0.0, 0.0
    buckets.sort(key=lambda b: -b[1])  # one fixed order: last layers first
    return buckets


def project_here(ranges, phases, step_ms, batch, n, bw, alpha, cap, state_bytes, first=0.0, wire=1.0):
    """The projection of n ranks, computed here: ranges (offset, bytes, ready_s)."""
    compute = step_ms / 1e3
    bwd = phases["backward"] / 1e3
    if n == 1:
        return {"step": compute, "eff": 1.0, "exposed": 0.0, "comm": 0.0}
    buckets = cut_buckets(ranges, cap, first, wire)
    free, comm = 0.0, 0.0
    for rd, _, nb in buckets:
        c, _ = ring_tree(n, nb, bw, alpha)
        comm += c
        free = max(rd, free) + c
    exposed = max(0.0, free - bwd)
    bcast = (n - 1) * alpha + state_bytes / bw  # NCCL's ring broadcast: a pipelined chain of n - 1 hops
    step = compute + exposed + bcast
    return {"step": step, "eff": compute / step, "exposed": exposed + bcast, "comm": comm}


# ---- modes --------------------------------------------------------------------------------------

PROFILE_TEXT = """model = resnet18
classes = 10
image_size = 32
batch_size = 4
step_ms = 50
forward_ms = 15
backward_ms = 30
optimizer_ms = 5
"""


def fitted_from(out):
    m = re.search(r"alpha ([0-9.]+) us, B ([0-9.eE+-]+) GB/s", out)
    if not m:
        fail(f"no 'alpha ... us, B ... GB/s' in the projection's fabric source:\n{out[:2000]}")
        return float("nan"), float("nan")
    return float(m.group(1)) * 1e-6, float(m.group(2))


def mode_fit(a):
    h5, txt = a.files
    rep = run([a.trainbench, "report", h5], expect_rc=0)
    if "/allreduce (" not in rep.stdout:
        fail("report of the allreduce-bench file lacks its /allreduce table")
    with h5py.File(h5, "r") as f:
        if f.attrs.get("kind") not in ("allreduce-bench", b"allreduce-bench"):
            fail(f"kind attribute {f.attrs.get('kind')!r}")
        n = int(f.attrs["world_size"])
        g = f["allreduce"]
        rows = [(n, float(b), float(t) * 1e-6) for b, t in zip(g["bytes"][()], g["time_us"][()])]
        wrong = g["wrong"][()]
    if n != 2 or len(rows) < 5:
        fail(f"expected >= 5 sizes on 2 ranks, got {len(rows)} on {n}")
    if np.any(wrong != 0):
        fail(f"allreduce-bench counted wrong elements: {wrong}")
    # report names the sweep (not a model's "batch nan per rank, nan px") and, for two sweeps, sets
    # the sizes side by side (not the empty training tables): the file against itself, B/A 1 at every size
    head = rep.stdout.splitlines()[1]
    if "allreduce-bench, 2 ranks on" not in head or "nan" in head:
        fail(f"report's run line for an allreduce-bench file: {head!r}")
    two = run([a.trainbench, "report", h5, h5, "--format", "csv"], expect_rc=0).stdout
    if "# all-reduce sizes measured in both" not in two or "# training run" in two:
        fail(f"report A B of two allreduce-bench files lacks the sizes table or shows a training one:\n{two}")
    cmp_rows = [l.split(",") for l in two.split("# all-reduce sizes measured in both", 1)[1].splitlines()[2:] if l]
    if [float(r[0]) for r in cmp_rows] != [r[1] for r in rows] or any(r[5] != "1.000" for r in cmp_rows):
        fail(f"report A B: expected every size {[r[1] for r in rows]} with B/A 1.000, got {cmp_rows}")
    # the console table holds the same rows (time printed to 0.01 us)
    text_rows = []
    for line in open(txt):
        parts = line.split()
        if len(parts) >= 9 and not line.startswith("#") and parts[0].isdigit():  # nccl-tests' columns: time 6th
            text_rows.append((2, float(parts[0]), float(parts[5]) * 1e-6))
    if [r[1] for r in text_rows] != [r[1] for r in rows]:
        fail(f"console sizes {[r[1] for r in text_rows]} differ from the file's {[r[1] for r in rows]}")
    for (_, _, t1), (_, _, t2) in zip(text_rows, rows):
        close(t1, t2, 0, "console time vs file time", atol=0.006e-6)
    with tempfile.TemporaryDirectory() as d:
        prof = os.path.join(d, "p.txt")
        with open(prof, "w") as f:
            f.write(PROFILE_TEXT)
        # a sweep whose sums were wrong (status "aborted", as allreduce-bench writes it) is no fabric to fit
        bad = os.path.join(d, "wrong.h5")
        shutil.copyfile(h5, bad)
        with h5py.File(bad, "r+") as f:
            f.attrs["status"] = "aborted"
            w = f["allreduce/wrong"][()]
            w[0] = 3
            f["allreduce/wrong"][...] = w
        one_error_line([a.trainbench, "project", "--profile", prof, "--fabric", f"fit:{bad}", "--ranks", "1,2"],
                       r"status 'aborted'.*fit a run that reports 0 wrong elements")
        for src, samples in ((h5, rows), (txt, text_rows)):
            p = run([a.trainbench, "project", "--profile", prof, "--fabric", f"fit:{src}", "--ranks", "1,2",
                     "--what-if", ""], expect_rc=0)
            alpha, bw = fitted_from(p.stdout)
            wa, wb = ls_fit(samples)
            close(alpha, wa, 0, f"alpha fitted from {os.path.basename(src)}", atol=0.006e-6)
            close(bw, 1e-9 / wb, 5e-4, f"bandwidth fitted from {os.path.basename(src)}")
            if not (bw > 0 and alpha >= 0):
                fail(f"fit from {src}: alpha {alpha}, bandwidth {bw}")
            print(f"# fit of {os.path.basename(src)}: alpha {alpha * 1e6:.2f} us, bus bandwidth {bw:.4g} GB/s "
                  f"(numpy: {wa * 1e6:.2f} us, {1e-9 / wb:.4g} GB/s)")


def check_timeline(f):
    gr, bk = f["grad_ready"], f["buckets"]
    for t, cols in ((gr, ["ranks", "range", "offset", "bytes", "ready_ms", "backward_ms", "bucket_bytes",
                          "overlap", "steps", "first_bucket_bytes"]),
                    (bk, ["ranks", "bucket", "offset", "bytes", "ready_ms", "start_ms", "end_ms", "backward_ms",
                          "exposed_ms", "steps"])):
        for c in cols:
            if c not in t:
                fail(f"/{t.name} lacks column {c}")
    ranks = gr["ranks"][()]
    if sorted(set(ranks.tolist())) != [1, 2]:
        fail(f"/grad_ready rank counts {sorted(set(ranks.tolist()))}, expected [1, 2]")
    for n in (1, 2):
        sel = ranks == n
        off, nb, rd = gr["offset"][()][sel], gr["bytes"][()][sel], gr["ready_ms"][()][sel]
        order = np.argsort(off)
        if off[order][0] != 0 or np.any(off[order][1:] != (off[order] + nb[order])[:-1]):
            fail(f"/grad_ready ranks {n}: ranges do not tile the gradient buffer")
        if np.any(np.diff(rd) < -1e-6):
            fail(f"/grad_ready ranks {n}: ready times fall in backward order: {rd}")
        if rd[-1] > gr["backward_ms"][()][sel][0] + 1e-6:
            fail(f"/grad_ready ranks {n}: last range ready after backward ended")
    total = gr["bytes"][()][ranks == 1].sum()
    bsel = bk["ranks"][()] == 2
    if bk["bytes"][()][bsel].sum() != total:
        fail(f"/buckets bytes {bk['bytes'][()][bsel].sum()} != /grad_ready bytes {total}")
    st, en, rd = bk["start_ms"][()][bsel], bk["end_ms"][()][bsel], bk["ready_ms"][()][bsel]
    if np.any(en < st) or np.any(np.diff(st) < 0):
        fail(f"/buckets: ends before starts, or not in launch order: {st} {en}")
    if np.any(st < rd - 0.5):  # overlap on: a bucket starts once its last range is ready (medians: 0.5 ms slack)
        fail(f"/buckets: a bucket started before it was ready: start {st}, ready {rd}")
    # the buckets the run used are the cut computed here from the ranges and the recorded caps
    sel = ranks == 1
    ranges = list(zip(gr["offset"][()][sel].astype(float), gr["bytes"][()][sel].astype(float),
                      gr["ready_ms"][()][sel] / 1e3))
    want = cut_buckets(ranges, float(gr["bucket_bytes"][()][sel][0]), float(gr["first_bucket_bytes"][()][sel][0]))
    got = list(zip(bk["offset"][()][bsel].astype(float), bk["bytes"][()][bsel].astype(float)))
    if got != [(o, b) for _, o, b in want]:
        fail(f"/buckets (offset, bytes) {got} are not the cut of /grad_ready's ranges at the recorded caps: "
             f"{[(o, b) for _, o, b in want]}")
    return total


def check_overlap_report(a, path):
    """`trainbench report`'s overlap table for 2 ranks is /buckets' 2-rank rows: each bucket's times, the
    wait (start - gradients done), the all-reduce (end - start), the part after backward; and the sentence
    with the summed all-reduce, the exposed median and the hidden share."""
    with h5py.File(path, "r") as f:
        bk = {k: f["buckets"][k][()] for k in f["buckets"]}
    sel = bk["ranks"] == 2
    p = run([a.trainbench, "report", path, "--format", "md"], expect_rc=0)
    head, rows = find(md_tables(p.stdout), "gradient all-reduce overlap, 2 ranks")
    if len(rows) != int(sel.sum()):
        fail(f"overlap table: {len(rows)} rows for {int(sel.sum())} 2-rank buckets")
        return
    bwd = float(bk["backward_ms"][sel][0])
    for r, i in zip(rows, np.flatnonzero(sel)):
        c = dict(zip(head, r))
        rd, st, en = (float(bk[k][i]) for k in ("ready_ms", "start_ms", "end_ms"))
        for h, want in (("bucket", bk["bucket"][i]), ("size (MiB)", bk["bytes"][i] / 1048576), ("grads done (ms)", rd),
                        ("start (ms)", st), ("end (ms)", en), ("waited (ms)", st - rd), ("all-reduce (ms)", en - st),
                        ("after bwd (ms)", max(0.0, en - max(st, bwd)))):
            cell_close(c.get(h, "?"), float(want), f"overlap table bucket {bk['bucket'][i]}: '{h}'")
    busy = float((bk["end_ms"][sel] - bk["start_ms"][sel]).sum())
    exp = float(bk["exposed_ms"][sel][0])
    m = re.search(r"2 ranks: all-reduce busy ([0-9.]+) ms per step .* median per step\) ([0-9.-]+) ms: "
                  r"([0-9.]+) % of the all-reduce hidden", p.stdout)
    if not m:
        fail("no overlap sentence for 2 ranks in report's output")
        return
    cell_close(m.group(1), busy, "overlap sentence: busy = the buckets' summed all-reduce")
    cell_close(m.group(2), exp, "overlap sentence: exposed = /buckets exposed_ms")
    cell_close(m.group(3), 100 * (1 - min(busy, max(0.0, exp)) / busy), "overlap sentence: hidden share")


def mode_run(a):
    path, np1 = a.files
    before = sha(path)
    check_overlap_report(a, path)
    with h5py.File(path, "r") as f:
        total = check_timeline(f)
        sc = f["scaling"]
        one = {p: float(sc[f"{p}_ms_median"][list(sc["ranks"][()]).index(1)]) for p in PHASES}
        i1 = list(sc["ranks"][()]).index(1)
        step1 = float(sc["step_ms_median"][i1])
        batch = float(f.attrs["batch_size"])
        if f.attrs["model"] not in ("resnet18", b"resnet18"):
            fail("the test expects a resnet18 run")
        gr = f["grad_ready"]
        sel = gr["ranks"][()] == 1
        ranges = list(zip(gr["offset"][()][sel].astype(float), gr["bytes"][()][sel].astype(float),
                          gr["ready_ms"][()][sel] / 1e3))
        cap = float(gr["bucket_bytes"][()][sel][0])
        first = float(gr["first_bucket_bytes"][()][sel][0])
        meas = {int(n): i for i, n in enumerate(sc["ranks"][()])}
        scal = {k: sc[k][()] for k in sc}
    state_bytes = 4 * 2 * (64 + 4 * 64 + 4 * 128 + 128 + 4 * 256 + 256 + 4 * 512 + 512)  # resnet18 BN mean + var
    bw, alpha = 0.125e9, 37e-6  # the emu-1gbit preset
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "proj.h5")
        ranks = [1, 2, 4, 64]
        p = run([a.trainbench, "project", path, "--fabric", "emu-1gbit", "--ranks", "1,2,4,64", "--format", "md",
                 "--out", out], expect_rc=0)
        if sha(path) != before:
            fail("project changed its input file")
        t = md_tables(p.stdout)
        head, rows = find(t, "projection per rank count")
        with h5py.File(out, "r") as f:
            for g in ("steps", "ranks", "scaling", "grad_ready", "buckets", "projection"):
                if g not in f:
                    fail(f"--out file lacks /{g}")
            pr = {k: f["projection"][k][()] for k in f["projection"]}
            if "emu-1gbit" not in str(f.attrs.get("projection_fabric")):
                fail(f"projection_fabric attribute {f.attrs.get('projection_fabric')!r}")
        if list(pr["ranks"]) != ranks or len(rows) != len(ranks):
            fail(f"/projection ranks {list(pr['ranks'])}, table rows {len(rows)}")
        for i, n in enumerate(ranks):
            want = project_here(ranges, one, step1, batch, n, bw, alpha, cap, state_bytes, first)
            close(pr["step_ms"][i], 1e3 * want["step"], 1e-9, f"{n} ranks: step_ms vs the model here")
            close(pr["efficiency"][i], want["eff"], 1e-9, f"{n} ranks: efficiency vs the model here")
            close(pr["exposed_ms"][i], 1e3 * want["exposed"], 1e-9, f"{n} ranks: exposed_ms vs the model here",
                  atol=1e-9)
            close(pr["img_per_s"][i], n * batch / want["step"], 1e-9, f"{n} ranks: img/s vs the model here")
            if n > 1:
                close(pr["comm_ms"][i], 1e3 * want["comm"], 1e-9, f"{n} ranks: summed all-reduce vs the model here")
            cells = dict(zip(head, rows[i])) if i < len(rows) else {}
            for h, key, scale in (("ranks", "ranks", 1), ("step (ms)", "step_ms", 1), ("img/s", "img_per_s", 1),
                                  ("eff %", "efficiency", 100), ("exposed (ms)", "exposed_ms", 1),
                                  ("meas step (ms)", "measured_step_ms", 1), ("meas img/s", "measured_img_per_s", 1),
                                  ("meas eff %", "measured_efficiency", 100),
                                  ("meas exposed (ms)", "measured_exposed_ms", 1)):
                cell_close(cells.get(h, "?"), scale * float(pr[key][i]), f"{n} ranks: printed '{h}'")
            # the measured columns are /scaling's
            if n in meas:
                k = meas[n]
                for key, col in (("measured_step_ms", "step_ms_median"), ("measured_img_per_s", "img_per_s"),
                                 ("measured_efficiency", "efficiency"), ("measured_exposed_ms", "allreduce_ms_median")):
                    close(pr[key][i], float(scal[col][k]), 1e-12, f"{n} ranks: {key} vs /scaling {col}")
            elif not math.isnan(pr["measured_step_ms"][i]):
                fail(f"{n} ranks: a measured value where /scaling has no row")
        # the what-if columns: each one's efficiency, recomputed for bf16 and no overlap
        for key in ("if_bf16_efficiency", "if_no_overlap_efficiency", "if_bucket_5M_efficiency",
                    "if_batch_x2_efficiency"):
            if key not in pr:
                fail(f"/projection lacks {key}")
        close(pr["if_bf16_efficiency"][1],
              project_here(ranges, one, step1, batch, 2, bw, alpha, cap, state_bytes, first, wire=0.5)["eff"],
              1e-9, "2 ranks: bf16 what-if vs the model here")
        close(pr["if_bucket_5M_efficiency"][1],
              project_here(ranges, one, step1, batch, 2, bw, alpha, 5 * 1048576, state_bytes, first)["eff"], 1e-9,
              "2 ranks: 5 MiB buckets what-if vs the model here")
        # the first bucket: cut like the rest (first-bucket=0), and at 2 MiB
        out2 = os.path.join(d, "proj_first.h5")
        run([a.trainbench, "project", path, "--fabric", "emu-1gbit", "--ranks", "1,2", "--what-if",
             "first-bucket=0,first-bucket=2M", "--out", out2], expect_rc=0)
        with h5py.File(out2, "r") as f:
            p2 = {k: f["projection"][k][()] for k in f["projection"]}
        for key, fb in (("if_first_bucket_0_efficiency", 0.0), ("if_first_bucket_2M_efficiency", 2 * 1048576.0)):
            if key not in p2:
                fail(f"/projection of --what-if first-bucket=... lacks {key}: {sorted(p2)}")
            close(p2[key][1], project_here(ranges, one, step1, batch, 2, bw, alpha, cap, state_bytes, fb)["eff"],
                  1e-9, f"2 ranks: {key} vs the model here")
        # differences by phase: measured - predicted, for every phase of the 2-rank row
        head, rows = find(t, "where the measured rows differ")
        got = {r[1]: r for r in rows if r and r[0] == "2"}
        for ph in PHASES + ["step"]:
            r = got.get(ph)
            if not r:
                fail(f"no '{ph}' row for 2 ranks in the differences table")
                continue
            cells = dict(zip(head, r))
            if ph not in ("allreduce", "step"):
                mv = float(scal[f"{ph}_ms_median"][meas[2]])
                cell_close(cells["predicted (ms)"], one[ph], f"2 ranks {ph}: predicted = the 1-rank phase")
                cell_close(cells["measured (ms)"], mv, f"2 ranks {ph}: measured = /scaling")
                cell_close(cells["difference (ms)"], mv - one[ph], f"2 ranks {ph}: difference = measured - predicted")
            else:  # predicted from the model: the printed parts agree to their rounding
                m_, p_ = float(cells["measured (ms)"]), float(cells["predicted (ms)"])
                if abs(float(cells["difference (ms)"]) - (m_ - p_)) > 0.1 + 1e-9:
                    fail(f"2 ranks {ph}: difference {cells['difference (ms)']} != {m_} - {p_}")
        r = got.get("step")
        if r:
            cell_close(dict(zip(head, r))["measured (ms)"], float(scal["step_ms_median"][meas[2]]),
                       "2 ranks step: measured = /scaling")
            cell_close(dict(zip(head, r))["predicted (ms)"], float(pr["step_ms"][1]),
                       "2 ranks step: predicted = /projection")
        if "more than the fabric explains" not in p.stdout and "less than the fabric predicts" not in p.stdout:
            fail("the all-reduce difference is not named against the fabric")
        if not re.search(r"2 ranks: measured step [0-9.]+ ms, projected [0-9.]+ \([+-][0-9.]+\):", p.stdout):
            fail("no sentence naming the 2-rank difference by phase")
        # csv: one field count per block
        pc = run([a.trainbench, "project", path, "--fabric", "emu-1gbit", "--ranks", "1,2", "--format", "csv"],
                 expect_rc=0)
        for block in pc.stdout.split("\n\n"):
            body = [l for l in block.splitlines() if l and not l.startswith("#")]
            if body and len({len(r) for r in csv.reader(io.StringIO("\n".join(body)))}) != 1:
                fail(f"csv block with uneven rows: {body[:2]}")
        # report reads the output; the plot draws it
        rep = run([a.trainbench, "report", out], expect_rc=0)
        if "/projection (4 rows)" not in rep.stdout:
            fail("report of the --out file lacks '/projection (4 rows)'")
        plots = os.path.join(d, "plots")
        pp = subprocess.run([sys.executable, a.plot, out, "--out", plots], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
        if pp.returncode == 77:
            print(pp.stdout)
        elif pp.returncode != 0 or not png_ok(os.path.join(plots, "proj_projection.png")):
            fail(f"plot_results.py on the --out file: exit {pp.returncode}, {sorted(os.listdir(plots)) if os.path.isdir(plots) else []}\n{pp.stdout}")
        # --out onto its own input: replaced atomically, readable, the projection inside
        own = os.path.join(d, "own.h5")
        shutil.copy(path, own)
        run([a.trainbench, "project", own, "--fabric", "emu-100mbit", "--ranks", "1,2", "--out", own], expect_rc=0)
        with h5py.File(own, "r") as f:
            if "projection" not in f or list(f["projection/ranks"][()]) != [1, 2] or "scaling" not in f:
                fail("--out onto its input: /projection missing or /scaling lost")
        if [x for x in os.listdir(d) if ".tmp." in x]:
            fail(f"temporary files left: {os.listdir(d)}")
        # the default fabric: fitted to the run's own buckets
        pf = run([a.trainbench, "project", path, "--ranks", "1,2"], expect_rc=0)
        if "fit (this run's buckets)" not in pf.stdout:
            fail("without --fabric, a run with bucket timings is projected on their fit")
    # bad input: one line, exit 1
    one_error_line([a.trainbench, "project", np1], r"name a fabric")
    one_error_line([a.trainbench, "project", np1, "--fabric", "fit"], r"bucket timings of 2 or more ranks")
    one_error_line([a.trainbench, "project", path, "--fabric", "no-such-fabric"], r"--list-fabrics")
    one_error_line([a.trainbench, "project", path, "--fabric", "emu-1gbit", "--what-if", "faster"], r"not a change")
    for bad in ("share=0", "share=", "share=abc", "share=65", "share=2.5", "share=+3", "share= 2"):
        one_error_line([a.trainbench, "project", path, "--fabric", "emu-1gbit", "--set", bad], r"not a change")
    one_error_line([a.trainbench, "project", path, "--fabric", "emu-1gbit", "--ranks", "0,2"], r"--ranks")
    one_error_line([a.trainbench, "project", path, "--fabric", "nvlink4-h100", "--ranks", "16"], r"no network")
    one_error_line([a.trainbench, "project", "/nonexistent/run.h5", "--fabric", "emu-1gbit"], r"cannot read")
    one_error_line([a.trainbench, "project"], r"name one input")
    lst = run([a.trainbench, "project", "--list-fabrics"], expect_rc=0).stdout
    for name in ("pcie4", "pcie5", "nvlink4-h100", "ndr400x8", "roce200x2", "emu-1gbit", "emu-100mbit", "emu-unshaped"):
        if not re.search(rf"^#  {re.escape(name)} +\S", lst, re.M):
            fail(f"--list-fabrics: no source line for {name}")


def mode_profile(a):
    prof = a.files[0]
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "pub.h5")
        p = run([a.trainbench, "project", "--profile", prof, "--fabric", "nvlink4-h800", "--ranks", "1,4,8",
                 "--format", "md", "--out", out], expect_rc=0)
        head, rows = find(md_tables(p.stdout), "projection per rank count")
        cells = {r[0]: dict(zip(head, r)) for r in rows}
        if cells.get("4", {}).get("meas eff %") != "88.3":
            fail(f"the published 88.3 % is not beside the 4-rank projection: {cells.get('4')}")
        if "is what the projection gives at" not in p.stdout:
            fail("no implied bandwidth for the published point")
        run([a.trainbench, "report", out], expect_rc=0)
        with h5py.File(out, "r") as f:
            if f.attrs.get("kind") not in ("projection", b"projection"):
                fail(f"kind {f.attrs.get('kind')!r}")
            e = f["projection/measured_efficiency"][()]
            if not (abs(e[1] - 0.883) < 1e-12 and math.isnan(e[0])):
                fail(f"stored published efficiencies {e}")
        pp = subprocess.run([sys.executable, a.plot, out, "--out", os.path.join(d, "plots")], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
        if pp.returncode == 77:
            print(pp.stdout)
        elif pp.returncode != 0 or not png_ok(os.path.join(d, "plots", "pub_projection.png")):
            fail(f"plot of the profile projection: exit {pp.returncode}\n{pp.stdout}")
    # no --ranks on a fabric of one node and no network (docs/results.md's example): up to that node's
    # ranks (pcie5: 8), not the 2..4096 that the fabric cannot carry
    p = run([a.trainbench, "project", "--profile", prof, "--fabric", "pcie5", "--format", "md"], expect_rc=0)
    head, rows = find(md_tables(p.stdout), "projection per rank count")
    if [r[0] for r in rows] != ["1", "2", "4", "8"]:
        fail(f"default rank counts on pcie5 (8 ranks a node, no network): {[r[0] for r in rows]}, want 1,2,4,8")


def mode_timeline(a):
    """A 2-rank run's own timeline (the GPU suite's NCCL run): /grad_ready and /buckets consistent, the
    times from the clock named by --clock (the tables' `clock` attribute), report's overlap table."""
    path = a.files[0]
    check_overlap_report(a, path)
    with h5py.File(path, "r") as f:
        check_timeline(f)
        for t in ("grad_ready", "buckets"):
            clock = f[t].attrs.get("clock", b"")
            clock = clock.decode() if isinstance(clock, bytes) else str(clock)
            if a.clock and a.clock not in clock:
                fail(f"/{t} clock attribute {clock!r} lacks {a.clock!r}")
            else:
                print(f"# /{t}: {clock}")
    p = run([a.trainbench, "project", path, "--ranks", "1,2"], expect_rc=0)
    if "measured on 1 rank (/grad_ready" not in p.stdout or (a.clock and a.clock not in p.stdout):
        fail("project does not say that its ready times were measured, and by which clock")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["fit", "run", "profile", "timeline"])
    ap.add_argument("files", nargs="+")
    ap.add_argument("--trainbench", required=True)
    ap.add_argument("--plot", help="bench/plot_results.py")
    ap.add_argument("--clock", default="", help="timeline: a phrase the tables' clock attribute must hold")
    a = ap.parse_args()
    globals()["mode_" + a.mode](a)
    print(f"# test_project {a.mode}: {len(BAD)} problem(s)")
    sys.exit(1 if BAD else 0)


if __name__ == "__main__":
    main()
