#!/usr/bin/python3
"""test_report.py - `trainbench report` and bench/plot_results.py checked
against results files that trainbench wrote in the test (tests/report.cmake).
The numbers in the report are compared with the file read by h5py, to the
rounding of the printed digits.

Modes (one ctest each):
  md RUN.h5         --format md: every table's numbers equal the file's
                    (scaling, per-rank phases, steps summary recomputed
                    here, every root attribute); exit 0
  csv RUN.h5        --format csv: each block parses with the csv module, has
                    one field count, and its numbers equal the file's
  text RUN.h5 LOG   text: the scaling tables are the lines the live run
                    printed (same code; the per-phase table too once /scaling
                    holds its columns), the per-rank rows the same numbers
  compare A B KEY   two files: the provenance-difference rows are exactly
                    the root attributes whose values differ (KEY among them),
                    every scaling row present in both with B/A = the ratio of
                    the files' img/s, phases A vs B = means over /ranks
  aborted RUN.h5    an aborted run: status and reason printed, provenance and
                    steps still printed, the missing tables named, exit 1
  errors RUN.h5     a missing file, a non-HDF5 file, an HDF5 file that is not a
                    results file, a checkpoint, a directory: one line each,
                    exit 1; a copy without /scaling: printed, "/scaling is
                    missing", exit 1; bad flags rejected
  generic RUN.h5    extra groups (/loader with a `columns` order attribute,
                    /probe without) printed as tables with their values, in
                    the writer's order (or integer columns first)
  plot A B          bench/plot_results.py: the expected PNGs, valid and
                    non-empty, for one file, for two, and with a /loader
                    table; 77 without matplotlib
Exit 0 when every check holds, 1 otherwise, 77 without h5py."""
import argparse
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
    print(f"SKIP: {e} (install python3-h5py)")
    sys.exit(77)

from report_parse import BAD, close_to, csv_tables, fail, find, md_tables, run

PHASES = ["data", "h2d", "forward", "backward", "allreduce", "optimizer"]


def steps_summary(f):
    s = f["steps"]
    timed = s["timed"][()] != 0 if "timed" in s else np.ones(len(s["step"]), bool)
    ms = s["step_ms"][()][timed]
    n, ips = s["samples"][()][timed], s["img_per_s"][()][timed]
    ok = ips > 0
    out = {"steps": len(s["step"]), "timed": int(timed.sum()), "mean": float(np.mean(ms)),
           "median": float(np.median(ms)), "img_per_s": float(n[ok].sum() / (n[ok] / ips[ok]).sum()),
           "loss_first": float(s["loss"][0]), "loss_last": float(s["loss"][-1])}
    # the run's own figure where /ranks has it (train's '# training:' line): every rank's samples over the
    # slowest rank's timed seconds
    if "ranks" in f and "samples" in f["ranks"] and "img_per_s" in f["ranks"]:
        rn, rips = f["ranks"]["samples"][()], f["ranks"]["img_per_s"][()]
        ok = rips > 0
        if ok.any():
            out["img_per_s"] = float(rn[ok].sum() / (rn[ok] / rips[ok]).max())
    return out


def attr_text(v):
    if isinstance(v, bytes):
        return v.decode()
    if isinstance(v, str):
        return v
    if isinstance(v, (np.integer, int)):
        return str(int(v))
    return None  # a float: compared numerically


# ---- modes ----------------------------------------------------------------------------------------

def mode_md(a):
    p = run([a.trainbench, "report", a.files[0], "--format", "md"], expect_rc=0)
    t = md_tables(p.stdout)
    with h5py.File(a.files[0], "r") as f:
        sc = f["scaling"]
        head, rows = find(t, "scaling, every row")
        if len(rows) != len(sc["ranks"]):
            fail(f"full scaling table has {len(rows)} rows, /scaling {len(sc['ranks'])}")
        for i, r in enumerate(rows[:len(sc["ranks"])]):
            cells = dict(zip(head, r))
            for h, key, scale in [("ranks", "ranks", 1), ("gbatch", "global_batch", 1), ("img/s", "img_per_s", 1),
                                  ("img/s/rk", "img_per_s_per_rank", 1), ("speedup", "speedup", 1),
                                  ("eff %", "efficiency", 100), ("epoch s", "epoch_time_s", 1),
                                  ("util %", "device_util_pct", 1), ("busbw (GB/s)", "allreduce_busbw_GBps", 1),
                                  ("comm %", "comm_share_pct", 1)]:
                close_to(cells.get(h, "?"), scale * float(sc[key][i]), f"scaling row {i} {h}")
        # the seed-shaped table: epoch times and the efficiency formula's inputs
        head, rows = find(t, "scaling (weak:")
        n = len(sc["ranks"]) - 1
        epoch = dict(zip(head, rows[0]))
        close_to(epoch[head[1]].removesuffix(" s"), float(sc["epoch_time_s"][0]), "seed table epoch time, first row")
        if n == 0:  # one rank: no efficiency, the note says what gives one
            if "needs 2 or more ranks" not in epoch["note"]:
                fail(f"one-rank seed table note does not say efficiency needs 2 ranks: {epoch['note']!r}")
        else:
            close_to(epoch[head[2]].removesuffix(" s"), float(sc["epoch_time_s"][n]), "seed table epoch time, last row")
            m = re.search(r"scaling efficiency ([\d.]+) %", epoch["note"])
            if not m:
                fail(f"seed table note lacks the efficiency: {epoch['note']!r}")
            else:
                close_to(m.group(1), 100 * float(sc["efficiency"][n]), "seed table efficiency")
        # per-rank phases
        rk = f["ranks"]
        head, rows = find(t, "training run, ms per step by rank")
        timed = [i for i in range(len(rk["rank"])) if rk["steps"][i] > 0]
        if len(rows) != len(timed):
            fail(f"rank table has {len(rows)} rows, /ranks has {len(timed)} ranks with timed steps")
        for r, i in zip(rows, timed):
            cells = dict(zip(head, r))
            close_to(cells["rank"], int(rk["rank"][i]), f"rank row {i} rank")
            close_to(cells["step"], float(rk["step_ms"][i]), f"rank {i} step ms")
            close_to(cells["img/s"], float(rk["img_per_s"][i]), f"rank {i} img/s")
            for ph in PHASES:
                close_to(cells[ph], float(rk[f"{ph}_ms"][i]), f"rank {i} {ph} ms")
            if cells.get("host") != rk["host"][i].decode():
                fail(f"rank {i} host {cells.get('host')!r}, file {rk['host'][i]!r}")
        # steps summary, recomputed here
        want = steps_summary(f)
        head, rows = find(t, "training steps (/steps)")
        cells = dict(zip(head, rows[0]))
        close_to(cells["steps"], want["steps"], "steps")
        close_to(cells["timed"], want["timed"], "timed steps")
        close_to(cells["step mean (ms)"], want["mean"], "step mean")
        close_to(cells["step median (ms)"], want["median"], "step median")
        close_to(cells["img/s"], want["img_per_s"], "steps img/s")
        close_to(cells["loss first"], want["loss_first"], "first loss", sig=6)
        close_to(cells["loss last"], want["loss_last"], "last loss", sig=6)
        # every root attribute, with its value
        head, rows = find(t, "provenance and settings")
        shown = {r[0]: r[1] for r in rows}
        for k, v in f.attrs.items():
            if k not in shown:
                fail(f"root attribute {k} not in the provenance table")
            elif attr_text(v) is not None:
                if shown[k] != attr_text(v):
                    fail(f"attribute {k}: printed {shown[k]!r}, file {attr_text(v)!r}")
            else:
                close_to(shown[k], float(v), f"attribute {k}", sig=6)
        if len(shown) != len(f.attrs):
            fail(f"provenance table has {len(shown)} rows, the file {len(f.attrs)} attributes")


def mode_csv(a):
    p = run([a.trainbench, "report", a.files[0], "--format", "csv"], expect_rc=0)
    t = csv_tables(p.stdout)
    with h5py.File(a.files[0], "r") as f:
        sc = f["scaling"]
        rows = find(t, "scaling, every row") or []
        if len(rows) != len(sc["ranks"]):
            fail(f"csv scaling table has {len(rows)} rows, /scaling {len(sc['ranks'])}")
        for i, r in enumerate(rows[:len(sc["ranks"])]):
            for key in ["ranks", "global_batch", "img_per_s", "img_per_s_per_rank", "speedup", "epoch_time_s",
                        "device_util_pct", "allreduce_busbw_GBps", "comm_share_pct"]:
                close_to(r.get(key, "?"), float(sc[key][i]), f"csv scaling row {i} {key}")
            close_to(r.get("efficiency_pct", "?"), 100 * float(sc["efficiency"][i]), f"csv scaling row {i} efficiency")
        phases = find(t, "step time by phase") or []
        for i, r in enumerate(phases):
            for s in ("min", "median", "max"):
                close_to(r.get(f"step_ms_{s}", "?"), float(sc[f"step_ms_{s}"][i]), f"csv phase row {i} step_ms_{s}")
        ranks = find(t, "training run, ms per step by rank") or []
        if [int(r["rank"]) for r in ranks] != [int(x) for x, n in zip(f["ranks/rank"], f["ranks/steps"]) if n > 0]:
            fail(f"csv rank rows {[r['rank'] for r in ranks]}, /ranks {f['ranks/rank'][()].tolist()}")
        for r in ranks:
            i = int(r["rank"])
            for ph in PHASES:
                close_to(r[f"{ph}_ms"], float(f["ranks"][f"{ph}_ms"][i]), f"csv rank {i} {ph}")
        prov = find(t, "provenance and settings") or []
        got = {r["attribute"]: r["value"] for r in prov}
        cmd = f.attrs["command_line"]
        if got.get("command_line") != (cmd.decode() if isinstance(cmd, bytes) else cmd):
            fail(f"csv command_line {got.get('command_line')!r}")


def block(lines, start, stop):
    """Lines from the one starting with `start` up to (not including) the
    next one that matches the regular expression `stop`."""
    out, on = [], False
    for l in lines:
        if l.startswith(start):
            on = True
        elif on and re.match(stop, l):
            break
        if on:
            out.append(l.rstrip())
    return out


def mode_text(a):
    p = run([a.trainbench, "report", a.files[0]], expect_rc=0)
    rep = p.stdout.splitlines()
    live = open(a.files[1]).read().splitlines()
    # seed table and full table: printed by the same code from the same numbers
    want = block(live, "# scaling (weak", "# step time by phase")
    got = block(rep, "# scaling (weak", "# step time by phase")
    if not want:
        fail(f"the live run's log {a.files[1]} has no scaling table")
    if got != want:
        fail("report's scaling tables differ from the live run's:\n" + "\n".join(
            f"live:   {w}\nreport: {g}" for w, g in zip(want + [""] * len(got), got + [""] * len(want)) if w != g))
    # the per-phase spreads, once /scaling holds them (<phase>_ms_min/median/max)
    with h5py.File(a.files[0], "r") as f:
        phases = all(f"{ph}_ms_median" in f["scaling"] for ph in PHASES)
    if phases:
        # the table ends at the first line after it that is not a table row:
        # '#' alone in the report, "# results written ..." in the live log
        want = block(live, "# step time by phase", r"#$|# (results|trace|checkpoint|replicas) ")
        got = block(rep, "# step time by phase", r"#$|# (results|trace|checkpoint|replicas) ")
        if got != want:
            fail(f"per-phase scaling table differs: live {want}, report {got}")
    # per-rank rows: the same numbers (the report adds the host column)
    want = [l.split() for l in block(live, "# training run, ms per step by rank", "#$")
            if l.startswith("  ")]
    got = [l.split() for l in block(rep, "# training run, ms per step by rank", "#$") if l.startswith("  ")]
    want = [w for w in want if w and w[0].isdigit()]
    got = [g for g in got if g and g[0].isdigit()]
    if not want or [w[:9] for w in want] != [g[:9] for g in got]:
        fail(f"per-rank rows differ: live {want}, report {got}")
    for needle in ["# provenance and settings", "# training steps (/steps)", "command_line"]:
        if needle not in p.stdout:
            fail(f"text report lacks '{needle}'")
    # the img/s the run printed is the report's (it differed in the last digits: samples over the summed step
    # times, where the run divides by the slowest rank's timed seconds)
    said = [re.search(r" ([0-9.]+) img/s \(", l) for l in live if l.startswith("# training: ")]
    row = block(rep, "# training steps (/steps)", "#$")
    cells = [l.split() for l in row if l.strip() and l.strip()[0].isdigit()]
    if not said or not said[0] or not cells:
        fail("no '# training: ... img/s' line in the live log, or no /steps row in the report")
    elif cells[0][4] != said[0].group(1):
        fail(f"the run printed {said[0].group(1)} img/s, its report {cells[0][4]}")


def mode_compare(a):
    fa, fb, key = a.files
    p = run([a.trainbench, "report", fa, fb, "--format", "md"], expect_rc=0)
    t = md_tables(p.stdout)
    with h5py.File(fa, "r") as A, h5py.File(fb, "r") as B:
        differ = set()
        for k in set(A.attrs) | set(B.attrs):
            va, vb = A.attrs.get(k), B.attrs.get(k)
            if va is None or vb is None or (attr_text(va) or repr(float(va))) != (attr_text(vb) or repr(float(vb))):
                differ.add(k)
        head, rows = find(t, "provenance differences")
        shown = {r[0]: (r[1], r[2]) for r in rows}
        if set(shown) != differ:
            fail(f"difference lines for {sorted(shown)}, the files differ in {sorted(differ)}")
        if key not in shown:
            fail(f"no difference line for {key}")
        else:
            for side, f in ((0, A), (1, B)):
                v = f.attrs[key]
                if attr_text(v) is not None and shown[key][side] != attr_text(v):
                    fail(f"{key}: printed {shown[key][side]!r}, file {attr_text(v)!r}")
        head, rows = find(t, "scaling rows measured in both")
        both = sorted(set(A["scaling/ranks"][()].tolist()) & set(B["scaling/ranks"][()].tolist()))
        if [int(r[0]) for r in rows] != both:
            fail(f"compared scaling rows {[r[0] for r in rows]}, present in both: {both}")
        for r in rows:
            cells = dict(zip(head, r))
            n = int(cells["ranks"])
            ia = list(A["scaling/ranks"][()]).index(n)
            ib = list(B["scaling/ranks"][()]).index(n)
            xa, xb = float(A["scaling/img_per_s"][ia]), float(B["scaling/img_per_s"][ib])
            close_to(cells["img/s A"], xa, f"{n} ranks img/s A")
            close_to(cells["img/s B"], xb, f"{n} ranks img/s B")
            close_to(cells["B/A"], xb / xa, f"{n} ranks B/A")
            close_to(cells["eff % A"], 100 * float(A["scaling/efficiency"][ia]), f"{n} ranks eff A")
            close_to(cells["eff % B"], 100 * float(B["scaling/efficiency"][ib]), f"{n} ranks eff B")
        head, rows = find(t, "training run: ms per timed step by phase")
        cells = {r[0]: r[1:] for r in rows}
        for ph in ["step"] + PHASES:
            ma = float(np.mean(A[f"ranks/{ph}_ms"][()][A["ranks/steps"][()] > 0]))
            mb = float(np.mean(B[f"ranks/{ph}_ms"][()][B["ranks/steps"][()] > 0]))
            row = cells.get(f"{ph} ms")
            if row is None:
                fail(f"compare lacks the '{ph} ms' row")
                continue
            close_to(row[0], ma, f"{ph} ms A")
            close_to(row[1], mb, f"{ph} ms B")
            if round(ma, 2) != 0 and round(mb, 2) != 0:
                close_to(row[2], mb / ma, f"{ph} ms B/A")
            elif row[2].strip() != "-":  # a value printed as 0.00 has no ratio (it printed B/A 4006.355)
                fail(f"{ph} ms B/A: '{row[2]}' beside a value printed as 0.00, not '-'")
        ips = cells.get("img/s (timed steps)")
        if ips:
            close_to(ips[0], steps_summary(A)["img_per_s"], "img/s A")
            close_to(ips[1], steps_summary(B)["img_per_s"], "img/s B")
        else:
            fail("compare lacks the img/s row")
    p = run([a.trainbench, "report", fa, fb], expect_rc=0)
    if not re.search(rf"^\s+{re.escape(key)}\s", p.stdout, re.M):
        fail(f"text compare has no line for {key}")


def mode_aborted(a):
    path = a.files[0]
    with h5py.File(path, "r") as f:
        status = f.attrs["status"]
        reason = f.attrs.get("abort_reason", "")
        nsteps = len(f["steps/step"])
    if status != "aborted" or not reason:
        fail(f"the fixture is not an aborted run: status {status!r}, reason {reason!r}")
    p = run([a.trainbench, "report", path], expect_rc=1)
    if "status aborted" not in p.stdout:
        fail("report does not say 'status aborted'")
    if f"abort reason: {reason}" not in p.stdout:
        fail(f"report does not give the reason {reason!r}")
    for needle in ["# provenance and settings", "# training steps (/steps)"]:
        if needle not in p.stdout:
            fail(f"aborted report lacks '{needle}' (what is there must be printed)")
    if not re.search(rf"^\s+{nsteps}\s", p.stdout, re.M):
        fail(f"the steps summary does not count the {nsteps} steps run")
    for needle in ["/scaling has no rows", "status is 'aborted'"]:
        if needle not in p.stderr:
            fail(f"stderr lacks '{needle}': {p.stderr!r}")
    run([a.trainbench, "report", path, "--format", "md"], expect_rc=1)


def one_error_line(cmd, pattern):
    p = run(cmd)
    lines = [l for l in p.stderr.splitlines() if l.strip()]
    if p.returncode == 0:
        fail(f"{cmd}: exit 0, expected an error")
    if len(lines) != 1 or not re.search(pattern, lines[0]):
        fail(f"{cmd}: expected one line matching /{pattern}/, got {lines}")
    return p


def mode_errors(a):
    with tempfile.TemporaryDirectory() as d:
        one_error_line([a.trainbench, "report", os.path.join(d, "absent.h5")], r"cannot read .*absent\.h5")
        txt = os.path.join(d, "notes.txt")
        open(txt, "w").write("not a results file\n")
        one_error_line([a.trainbench, "report", txt], r"not a results file: not HDF5")
        other = os.path.join(d, "other.h5")
        with h5py.File(other, "w") as f:
            f.attrs["trainbench_version"] = "0.1.0"
            f.create_group("params")["fc.weight"] = np.zeros((2, 2), np.float32)
        one_error_line([a.trainbench, "report", other], r"not a trainbench results file")
        with h5py.File(other, "a") as f:  # a checkpoint: its model attribute and /params
            f.attrs["model"] = "resnet18"
        one_error_line([a.trainbench, "report", other], r"is a trainbench checkpoint \(--ckpt/--save\), not a results")
        one_error_line([a.trainbench, "report", d], r"is a directory; name a results file in it")
        partial = os.path.join(d, "partial.h5")
        shutil.copy(a.files[0], partial)
        with h5py.File(partial, "a") as f:
            del f["scaling"]
        p = run([a.trainbench, "report", partial], expect_rc=1)
        if "group /scaling is missing" not in p.stderr:
            fail(f"partial file: stderr lacks 'group /scaling is missing': {p.stderr!r}")
        if "# training run, ms per step by rank" not in p.stdout or "# provenance and settings" not in p.stdout:
            fail("partial file: what is there is not printed")
        one_error_line([a.trainbench, "report", a.files[0], "--format", "xml"], r"--format")
        one_error_line([a.trainbench, "report", a.files[0], a.files[0], a.files[0]], r"at most two")
        one_error_line([a.trainbench, "report"], r"name a results file")


def mode_generic(a):
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "extra.h5")
        shutil.copy(a.files[0], path)
        loader = {"threads": np.array([1, 2, 4], np.int64), "img_per_s": np.array([101.25, 198.5, 371.125]),
                  "decode_ms": np.array([7.5, 7.625, 8.0])}
        with h5py.File(path, "a") as f:
            g = f.create_group("loader")
            for k, v in loader.items():
                g[k] = v
            g.attrs["columns"] = "threads,img_per_s,decode_ms"
            p = f.create_group("probe")
            p["check"] = np.array(["h2d 4 MB", "gemm 4096"], dtype=h5py.string_dtype())
            p["ms"] = np.array([0.125, 1.85])
            p["ok"] = np.array([1, 1], np.int64)
            f.attrs["two_lines"] = "a/first.jpg: empty file\nb/second.jpg: not a JPEG file"
        out = run([a.trainbench, "report", path, "--format", "md"], expect_rc=0)
        t = md_tables(out.stdout)
        head, rows = find(t, "/loader (3 rows)") or ([], [])
        if head != ["threads", "img_per_s", "decode_ms"]:
            fail(f"/loader columns {head}, the writer's order is threads,img_per_s,decode_ms")
        for i, r in enumerate(rows):
            for h, c in zip(head, r):
                close_to(c, float(loader[h][i]), f"/loader row {i} {h}", sig=6)
        head, rows = find(t, "/probe (2 rows)") or ([], [])
        if head != ["ok", "check", "ms"]:
            fail(f"/probe columns {head}: without an order attribute, integers, strings, then the rest")
        if [r[1] for r in rows] != ["h2d 4 MB", "gemm 4096"]:
            fail(f"/probe strings {rows}")
        csvt = csv_tables(run([a.trainbench, "report", path, "--format", "csv"], expect_rc=0).stdout)
        rows = find(csvt, "/loader") or []
        if [int(r["threads"]) for r in rows] != [1, 2, 4]:
            fail(f"csv /loader threads {rows}")
        txt = run([a.trainbench, "report", path], expect_rc=0).stdout
        if "# /loader (3 rows)" not in txt or "# /probe (2 rows)" not in txt:
            fail("text report lacks the /loader or /probe table")
        # a value of several lines stays in its column: every line of the
        # text report is a '#' line or an indented row, none at the margin
        margin = [l for l in txt.splitlines() if l and l[0] not in "# "]
        if margin:
            fail(f"text report lines at the left margin (a multi-line value out of its table): {margin[:3]}")
        # a run asked for no scaling table (--scaling-steps 0) is complete
        # without one: exit 0 and a note; asked for one, the empty table is
        # a missing part (exit 1)
        empty = os.path.join(d, "noscaling.h5")
        shutil.copy(a.files[0], empty)
        with h5py.File(empty, "a") as f:
            g = f["scaling"]
            for k in list(g.keys()):
                dt = g[k].dtype
                del g[k]
                g.create_dataset(k, shape=(0,), dtype=dt)
            f.attrs["scaling_steps"] = 0
        p = run([a.trainbench, "report", empty], expect_rc=0)
        if "no scaling table: the run was asked for none (--scaling-steps 0)" not in p.stdout:
            fail("report of a --scaling-steps 0 run does not say why it has no scaling table")
        with h5py.File(empty, "a") as f:
            f.attrs["scaling_steps"] = 2
        p = run([a.trainbench, "report", empty], expect_rc=1)
        if "/scaling has no rows" not in p.stderr:
            fail(f"an empty /scaling of a run that asked for one is not reported: {p.stderr!r}")
        with h5py.File(empty, "a") as f:  # a file from before the attribute: its command line says it
            del f.attrs["scaling_steps"]
            f.attrs["command_line"] = "trainbench train --steps 5 --scaling-steps 0 --results x.h5"
        run([a.trainbench, "report", empty], expect_rc=0)
        # another command's file (probe; without a GPU its /probe has no
        # rows, the CPU's facts are attributes) is read as what it is
        probe = os.path.join(d, "probe.h5")
        run([a.trainbench, "probe", "--quick", "--results", probe], expect_rc=0)
        p = run([a.trainbench, "report", probe], expect_rc=0)
        if f"# {probe}: trainbench probe on " not in p.stdout or "nan" in p.stdout.splitlines()[1]:
            fail(f"report of a probe file: first lines {p.stdout.splitlines()[:2]}, stderr {p.stderr!r}")
        lines = txt.splitlines()
        first = [l for l in lines if "a/first.jpg" in l]
        second = [l for l in lines if "b/second.jpg" in l]
        if len(first) != 1 or len(second) != 1 or first[0].index("a/first") != second[0].index("b/second"):
            fail(f"the two lines of a value are not one under the other: {first} {second}")


def png_size(path):
    with open(path, "rb") as fh:
        head = fh.read(24)
    if head[:8] != b"\x89PNG\r\n\x1a\n":
        return None
    return struct.unpack(">II", head[16:24])


def mode_plot(a):
    script = a.plot
    with tempfile.TemporaryDirectory() as d:
        def plot(args, names):
            out = os.path.join(d, f"out{len(os.listdir(d))}")
            p = subprocess.run([sys.executable, script, *args, "--out", out], stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)
            if p.returncode == 77:
                print(p.stdout)
                sys.exit(77)
            if p.returncode != 0:
                fail(f"plot_results.py {args}: exit {p.returncode}\n{p.stdout}")
                return
            got = sorted(os.listdir(out))
            if got != sorted(names):
                fail(f"plot_results.py {args}: wrote {got}, expected {sorted(names)}")
            for n in names:
                path = os.path.join(out, n)
                if not os.path.exists(path):
                    continue
                size = png_size(path)
                if size is None or os.path.getsize(path) < 10000 or size[0] < 400 or size[1] < 300:
                    fail(f"{n}: not a PNG of a plot ({os.path.getsize(path)} bytes, {size})")
        one = a.files[0]
        stem = os.path.splitext(os.path.basename(one))[0]
        plot([one], [f"{stem}_{k}.png" for k in ("throughput", "efficiency", "breakdown", "loss")])
        stems = [os.path.splitext(os.path.basename(p))[0] for p in a.files]
        plot(a.files, ["compare_throughput.png", "compare_efficiency.png", "compare_loss.png"] +
             [f"{s}_breakdown.png" for s in stems])
        extra = os.path.join(d, "withloader.h5")
        shutil.copy(one, extra)
        with h5py.File(extra, "a") as f:
            g = f.create_group("loader")
            g["threads"] = np.array([1, 2], np.int64)
            g["img_per_s"] = np.array([100.0, 190.0])
            for ph in PHASES:  # per-phase scaling columns: the per-rank-count breakdown
                for s in ("min", "median", "max"):
                    if f"{ph}_ms_{s}" not in f["scaling"]:  # older files lack them
                        f["scaling"][f"{ph}_ms_{s}"] = np.full(len(f["scaling/ranks"]), 10.0)
        plot([extra, "--prefix", "x"], ["x_throughput.png", "x_efficiency.png", "withloader_breakdown.png",
                                        "x_loss.png", "x_loader.png"])
        # an aborted-style file without scaling rows: the scaling plots are left out, the rest drawn
        noscale = os.path.join(d, "noscale.h5")
        shutil.copy(one, noscale)
        with h5py.File(noscale, "a") as f:
            del f["scaling"]
        plot([noscale], ["noscale_breakdown.png", "noscale_loss.png"])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["md", "csv", "text", "compare", "aborted", "errors", "generic", "plot"])
    ap.add_argument("files", nargs="+")
    ap.add_argument("--trainbench", required=True)
    ap.add_argument("--plot", help="bench/plot_results.py")
    a = ap.parse_args()
    globals()["mode_" + a.mode](a)
    print(f"# test_report {a.mode}: {len(BAD)} problem(s)")
    sys.exit(1 if BAD else 0)


if __name__ == "__main__":
    main()
