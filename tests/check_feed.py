#!/usr/bin/python3
"""check_feed.py FEED.h5 --rows N [--device-measured 0|1]: the results file of
`trainbench loader-bench --feed` holds the data-loading table of SEEDS.md
section 2 as /feed columns, one row per loader configuration (or the
resident data), with the provenance attributes, each row's CPU budget
(cores used, img/s per core: consistent with img/s) and its loader stages
(ms per batch; none on a resident row); on a machine without a GPU the
device columns are NaN and the file says why. Exit 0 when every check
holds, 1 otherwise, 77 without h5py."""
import argparse
import math
import sys

try:
    import h5py
except ImportError as e:
    print(f"SKIP: {e} (install python3-h5py)")
    sys.exit(77)

COLS = ["threads", "prefetch", "pinned", "gpu_decode", "img_per_s", "ms_per_batch", "wait_pct", "h2d_ms", "step_ms",
        "gpu_util_pct", "gpu_idle_pct", "sm_active_pct", "decode_ms_per_img", "lookahead_pct", "images", "skipped", "gpu_decoded",
        "gpu_to_cpu", "gpu_stage_ms_per_batch", "gpu_stage_busy_pct", "gpu_stages", "timed_steps", "row_s",
        "resident", "cpu_cores", "loader_cores", "img_per_s_per_core", "gpu_cpu_share"]
STAGES = ["read", "check", "decode", "resize", "gpu_plan", "gpu_submit", "gpu_wait", "gpu_fallback", "dev_upload",
          "dev_decode", "dev_resize", "next_wait"]
COLS += [f"stage_{s}_ms" for s in STAGES]
ATTRS = ["kind", "trainbench_version", "command_line", "status", "backend", "device_names", "device_columns",
         "model", "precision", "batch_size", "image_size", "decode", "steps", "warmup_steps", "min_row_seconds"]


def check_budget(cols, i):
    """The row's CPU budget and stages: cores > 0, the loader's own no more
    than the process's (+0.1 for samples that straddle the row's edges),
    img/s per core = img/s / cores; stages NaN on a resident row, else
    numbers >= 0 (NaN for a stage that never ran is a 0 here: the columns
    are ms per batch over the row)."""
    bad = []
    cores, ldr, ipc = cols["cpu_cores"][i], cols["loader_cores"][i], cols["img_per_s_per_core"][i]
    if not (cores > 0 and math.isfinite(cores)):
        bad.append(f"row {i}: {cores} cores used")
    elif not (0 <= ldr <= cores + 0.1):
        bad.append(f"row {i}: the loader used {ldr} cores of the process's {cores}")
    elif abs(ipc * cores - cols["img_per_s"][i]) > 1e-6 * cols["img_per_s"][i]:
        bad.append(f"row {i}: {ipc} img/s per core x {cores} cores != {cols['img_per_s'][i]} img/s")
    stages = [cols[f"stage_{s}_ms"][i] for s in STAGES]
    if cols["resident"][i]:
        if not all(math.isnan(v) for v in stages) or ldr != 0:
            bad.append(f"row {i}: a resident row with loader stages {stages} or loader cores {ldr}")
    elif not all(v >= 0 for v in stages) or not any(v > 0 for v in stages):
        bad.append(f"row {i}: loader stages {stages}")
    return bad


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("path")
    ap.add_argument("--rows", type=int, required=True)
    ap.add_argument("--device-measured", type=int, default=0)
    a = ap.parse_args()
    bad = []
    with h5py.File(a.path, "r") as f:
        for k in ATTRS:
            if k not in f.attrs:
                bad.append(f"attribute {k} missing")
        if f.attrs.get("kind") not in ("loader-feed", b"loader-feed"):
            bad.append(f"kind is {f.attrs.get('kind')!r}, not loader-feed")
        if "feed" not in f:
            bad.append("no /feed table")
        else:
            g = f["feed"]
            cols = {c: g[c][()] for c in COLS if c in g}
            bad += [f"/feed/{c} missing" for c in COLS if c not in g]
            lens = {len(v) for v in cols.values()}
            if lens != {a.rows}:
                bad.append(f"/feed columns have lengths {sorted(lens)}, want {a.rows}")
            elif len(cols) == len(COLS):
                steps = int(f.attrs["steps"])
                batch = int(f.attrs["batch_size"])
                min_row = float(f.attrs.get("min_row_seconds", 0))  # missing: reported with ATTRS above
                for i in range(a.rows):
                    # --steps timed steps, more until the row lasted --min-row-seconds
                    timed, row_s = int(cols["timed_steps"][i]), float(cols["row_s"][i])
                    if timed < steps or (timed > steps and min_row <= 0):
                        bad.append(f"row {i}: {timed} timed steps for --steps {steps}, --min-row-seconds {min_row}")
                    if row_s < min_row:
                        bad.append(f"row {i}: lasted {row_s:.3f} s, under --min-row-seconds {min_row}")
                    if abs(row_s * 1e3 / timed - cols["ms_per_batch"][i]) > 1e-6 * cols["ms_per_batch"][i]:
                        bad.append(f"row {i}: {row_s} s over {timed} steps but {cols['ms_per_batch'][i]} ms per batch")
                    if not cols["img_per_s"][i] > 0 or not cols["ms_per_batch"][i] > 0:
                        bad.append(f"row {i}: img/s {cols['img_per_s'][i]}, ms/batch {cols['ms_per_batch'][i]}")
                    if not 0 <= cols["wait_pct"][i] <= 100:
                        bad.append(f"row {i}: wait {cols['wait_pct'][i]} % outside [0, 100]")
                    if cols["images"][i] != timed * batch:
                        bad.append(f"row {i}: {cols['images'][i]} images trained, want {timed} x {batch}")
                    # img/s and ms/batch describe the same wall time
                    implied = batch * 1e3 / cols["ms_per_batch"][i]
                    if abs(implied - cols["img_per_s"][i]) > 1e-6 * implied + 1e-9:
                        bad.append(f"row {i}: img/s {cols['img_per_s'][i]} but batch / ms per batch gives {implied}")
                    # the GPU stage's columns: numbers on --decode gpu rows, NaN on CPU decode rows
                    stage = cols["gpu_stage_ms_per_batch"][i], cols["gpu_stage_busy_pct"][i], cols["gpu_stages"][i]
                    if cols["gpu_decode"][i]:
                        if not (stage[0] > 0 and stage[1] > 0 and stage[2] >= 1):
                            bad.append(f"row {i}: --decode gpu row with GPU stage {stage[0]} ms, {stage[1]} % busy, "
                                       f"{stage[2]} stages")
                    elif not (math.isnan(stage[0]) and math.isnan(stage[1]) and stage[2] == 0):
                        bad.append(f"row {i}: CPU decode row with GPU stage columns {stage}, want NaN, NaN, 0")
                    bad += check_budget(cols, i)
                    measured = not math.isnan(cols["gpu_util_pct"][i])
                    if measured != bool(a.device_measured):
                        bad.append(f"row {i}: GPU-Util {cols['gpu_util_pct'][i]}: device columns "
                                   f"{'measured' if measured else 'not measured'}")
                    if measured and abs(cols["gpu_util_pct"][i] + cols["gpu_idle_pct"][i] - 100) > 1e-9:
                        bad.append(f"row {i}: util + idle != 100")
                if not a.device_measured:
                    note = f.attrs["device_columns"]
                    note = note.decode() if isinstance(note, bytes) else str(note)
                    if not note.startswith("not measured"):
                        bad.append(f"device_columns says '{note}' on a run without a GPU")
    for b in bad:
        print("FAIL:", b)
    print(f"# check_feed: {a.path}: {len(bad)} problems")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
