#!/usr/bin/python3
"""test_summary_feed.py SRC FEED_LOG FEED_H5: bench/summary/feed.py's rows
from the stored GPU runs' feed logs (results/gpu_h200_2026-11-27,
results/gpu_h100_2026-11-27: the table before the resident row and the cores
column) and from a log of today's table (FEED_LOG, the CPU run of
`loader-bench --feed --rows resident,4:2:off` with its results file FEED_H5,
whose numbers the log's must match); the largest batch's log is read where
there are several; a row that does not fit its header is refused, not
misread. Exit 0 when every check holds, 1 otherwise, 77 without h5py."""
import importlib.util
import os
import shutil
import sys
import tempfile

try:
    import h5py
except ImportError as e:
    print(f"SKIP: {e} (install python3-h5py)")
    sys.exit(77)


def load(src):
    spec = importlib.util.spec_from_file_location("summary_feed", os.path.join(src, "bench", "summary", "feed.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def as_dict(rows):
    return {k: (v, unit, src) for k, v, unit, src in rows}


def main():
    src, log, h5 = sys.argv[1], sys.argv[2], sys.argv[3]
    feed = load(src)
    bad = []

    def expect(got, want, where):
        for k, v in want.items():
            if k not in got:
                bad.append(f"{where}: {k} missing")
            elif v is not None and abs(got[k][0] - v) > 1e-6 * abs(v):
                bad.append(f"{where}: {k} = {got[k][0]}, want {v}")

    # the stored runs: what their logs say (the rows printed there)
    h200 = as_dict(feed.extract(os.path.join(src, "results", "gpu_h200_2026-11-27")))
    expect(h200, {"feed_batch": 128, "feed_jpeg_img_s": 6508.7, "feed_cpu_4thr_img_s": 2442.5}, "H200")
    for k in ("feed_resident_img_s", "feed_nvjpeg_4thr_img_s", "feed_jpeg_cpu_cores"):
        if k in h200:
            bad.append(f"H200: {k} = {h200[k][0]}, but that log has no such row or column")
    if h200.get("feed_batch", (0, "", ""))[2] != "feed_trainbench.log":
        bad.append(f"H200: source log {h200.get('feed_batch')}")
    h100 = as_dict(feed.extract(os.path.join(src, "results", "gpu_h100_2026-11-27")))
    expect(h100, {"feed_batch": 128, "feed_jpeg_img_s": 4179.7, "feed_nvjpeg_4thr_img_s": 3452.2,
                  "feed_cpu_4thr_img_s": 1973.3}, "H100")

    # today's table, from a CPU run: the log's numbers are the results file's
    with tempfile.TemporaryDirectory() as run:
        os.makedirs(os.path.join(run, "keep"))
        shutil.copy(log, os.path.join(run, "keep", "feed_trainbench.log"))
        got = as_dict(feed.extract(run))
        with h5py.File(h5, "r") as f:
            g = f["feed"]
            res = [i for i in range(len(g["resident"])) if g["resident"][i]]
            four = [i for i in range(len(g["threads"])) if g["threads"][i] == 4 and not g["resident"][i]]
            if not res or not four:
                bad.append(f"{h5}: the run lacks its resident or 4-thread row")
            else:
                r, c = res[0], four[0]
                want = {"feed_batch": int(f.attrs["batch_size"]), "feed_resident_img_s": None,
                        "feed_resident_cpu_cores": None, "feed_cpu_4thr_img_s": None, "feed_cpu_4thr_cpu_cores": None,
                        "feed_jpeg_img_s": None, "feed_jpeg_of_resident_pct": None}
                expect(got, want, "CPU run")
                close = [("feed_resident_img_s", g["img_per_s"][r], 0.051), ("feed_resident_cpu_cores",
                                                                             g["cpu_cores"][r], 0.0051),
                         ("feed_cpu_4thr_img_s", g["img_per_s"][c], 0.051),
                         ("feed_cpu_4thr_cpu_cores", g["cpu_cores"][c], 0.0051),
                         # the best real-JPEG row: the 4-thread row, the only one (not the resident row)
                         ("feed_jpeg_img_s", g["img_per_s"][c], 0.051)]
                for k, v, tol in close:
                    if k in got and not abs(got[k][0] - float(v)) <= tol:
                        bad.append(f"CPU run: {k} {got[k][0]} from the log, {float(v)} in the results file")
                if "feed_jpeg_of_resident_pct" in got:  # from the results file's rows, not feed.py's own numbers
                    rc, rr = float(g["img_per_s"][c]), float(g["img_per_s"][r])
                    pct = 100 * rc / rr
                    # feed.py divides the log's img/s, printed to 0.1: each off by up to 0.05, so the ratio by up
                    # to 100 (0.05 / r + 0.05 c / r^2) points (0.9 at 3 against 8 img/s on a loaded machine),
                    # and the percentage is printed to 0.01 of its own
                    tol = 100 * (0.05 / rr + 0.05 * rc / rr ** 2) + 0.005
                    if not abs(got["feed_jpeg_of_resident_pct"][0] - pct) <= tol:
                        bad.append(f"CPU run: {got['feed_jpeg_of_resident_pct'][0]} % of resident, the results "
                                   f"file's rows give {pct}")
                if got.get("feed_batch", (0, "", ""))[2] != os.path.join("keep", "feed_trainbench.log"):
                    bad.append(f"CPU run: source {got.get('feed_batch')}")
        # the best real-JPEG row is never the resident one, even where the resident row is the fastest
        text = open(log).read()
        fast = text.splitlines(keepends=True)
        for i, line in enumerate(fast):
            f = line.split()
            if line.startswith("  ") and len(f) > 4 and f[3] == "resident":
                fast[i] = line.replace(f" {f[4]} ", " " + f"{float(f[4]) * 50:.1f}".rjust(len(f[4])) + " ", 1)
        with open(os.path.join(run, "keep", "feed_trainbench.log"), "w") as fh:
            fh.writelines(fast)
        got_fast = as_dict(feed.extract(run))
        if "feed_jpeg_img_s" in got and got_fast.get("feed_jpeg_img_s", (None,))[0] != got["feed_jpeg_img_s"][0]:
            bad.append(f"with the resident row 50x faster, feed_jpeg_img_s became "
                       f"{got_fast.get('feed_jpeg_img_s')}: the resident row was taken for a JPEG row")
        shutil.copy(log, os.path.join(run, "keep", "feed_trainbench.log"))
        # several logs: the largest batch's is read
        b = str(got.get("feed_batch", (8,))[0])
        with open(os.path.join(run, "feed_trainbench_small.log"), "w") as fh:
            fh.write(text.replace(f", batch {b} at ", ", batch 1 at "))
        if as_dict(feed.extract(run)).get("feed_batch", (None,))[0] != int(b):
            bad.append("with a batch-1 log beside it, the batch-%s log was not the one read" % b)
        # the planted error: a row short of a field is refused
        lines = text.splitlines(keepends=True)
        cut = next(i for i, line in enumerate(lines) if line.startswith("  "))
        lines[cut] = lines[cut].rsplit(None, 1)[0] + "\n"
        with open(os.path.join(run, "keep", "feed_trainbench.log"), "w") as fh:
            fh.writelines(lines)
        os.remove(os.path.join(run, "feed_trainbench_small.log"))
        try:
            rows = feed.extract(run)
            bad.append(f"a row short of a field was read: {rows}")
        except ValueError as e:
            print(f"# refused as it should be: {e}")
    for line in bad:
        print("FAIL:", line)
    print(f"# test_summary_feed: {len(bad)} problems; H200 {sorted(h200)}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
