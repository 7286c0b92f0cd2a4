#!/usr/bin/env python3
"""feed.py - the feed stage's rows of results/<run>/summary.tsv (issue 31),
for bench/summary/make_summary.py: extract(run_dir) -> [(key, value, unit,
source_log)], read from the console log of `trainbench loader-bench --feed`
(bench/gpu_feed.sh keeps it as feed_trainbench.log):

  feed_batch                   images per step of the feed table
  feed_jpeg_img_s              the best row that read JPEG files (any loader)
  feed_jpeg_cpu_cores          its CPU cores used (process CPU s / wall s)
  feed_resident_img_s          the same model, precision and batch on data in
                               device memory, same call (the `resident` row)
  feed_resident_cpu_cores      its cores
  feed_jpeg_of_resident_pct    feed_jpeg_img_s / feed_resident_img_s, %
  feed_nvjpeg_4thr_img_s       the best nvJPEG row with 4 loader threads (on the default
                               --nvjpeg choices: not the A/B rows marked gpu*)
  feed_nvjpeg_4thr_cpu_cores   its cores
  feed_cpu_4thr_img_s          the best libjpeg-turbo row with 4 loader threads
  feed_cpu_4thr_cpu_cores      its cores

A key whose row the log does not hold is left out (logs from before the
resident row and the cores column have neither). The table's columns are
found by the names in its `# threads prefetch ...` header, so a log from
any version of the table reads alike. Where several feed logs lie under
run_dir, the one with the largest batch is read (the headline), the first
by name among equals.

  python3 bench/summary/feed.py results/gpu_h200_2026-11-27   # prints the rows
"""
import os
import re
import sys

LOG_NAMES = re.compile(r"^feed_trainbench.*\.log$")
BATCH = re.compile(r"^# loader-bench --feed: .*, batch (\d+) at (\d+),")


def find_logs(run_dir, depth=3):
    """Feed console logs under run_dir (a few levels down: keep/, resnet50/...)."""
    found = []
    base = os.path.abspath(run_dir)
    for root, dirs, files in os.walk(base):
        if root[len(base):].count(os.sep) >= depth:
            dirs[:] = []
        found += [os.path.join(root, f) for f in files if LOG_NAMES.match(f)]
    return sorted(found)


def parse_log(path):
    """(batch, rows): rows are dicts keyed by the header's column names
    (threads, decode, img/s, cores, ...) with numbers where they parse."""
    batch, header, rows = None, None, []
    with open(path, errors="replace") as fh:
        for line in fh:
            m = BATCH.match(line)
            if m:
                batch = int(m.group(1))
                continue
            if line.startswith("# ") and line.split()[1:3] == ["threads", "prefetch"]:
                header = line.split()[1:]
                continue
            if header is None or not line.startswith("  "):
                continue
            fields = line.split()
            if len(fields) != len(header):
                raise ValueError(f"{path}: a row with {len(fields)} fields under a header of {len(header)}: "
                                 f"{line.strip()}")
            row = {}
            for k, v in zip(header, fields):
                try:
                    row[k] = float(v)
                except ValueError:
                    row[k] = v.rstrip("*")  # "-", "on", "cpu", "gpu" ("gpu*": its own --nvjpeg), "resident"
                    if k == "decode":
                        row["own_nvjpeg"] = v.endswith("*")
            rows.append(row)
    return batch, rows


def best(rows, pick):
    c = [r for r in rows if pick(r) and isinstance(r.get("img/s"), float)]
    return max(c, key=lambda r: r["img/s"]) if c else None


def extract(run_dir):
    logs = find_logs(run_dir)
    parsed = []
    for path in logs:
        batch, rows = parse_log(path)
        if batch is not None and rows:
            parsed.append((batch, path, rows))
    if not parsed:
        return []
    top = max(b for b, _, _ in parsed)
    batch, path, rows = next(p for p in parsed if p[0] == top)
    src = os.path.relpath(path, run_dir)
    out = [("feed_batch", batch, "images", src)]

    def add(key, row, cores_key):
        if row is None:
            return
        out.append((key, row["img/s"], "img/s", src))
        if isinstance(row.get("cores"), float):
            out.append((cores_key, row["cores"], "cores", src))

    jpeg = best(rows, lambda r: r.get("decode") in ("cpu", "gpu"))
    resident = best(rows, lambda r: r.get("decode") == "resident")
    add("feed_jpeg_img_s", jpeg, "feed_jpeg_cpu_cores")
    add("feed_resident_img_s", resident, "feed_resident_cpu_cores")
    if jpeg and resident and resident["img/s"] > 0:
        out.append(("feed_jpeg_of_resident_pct", 100.0 * jpeg["img/s"] / resident["img/s"], "%", src))
    # nvJPEG on its defaults (any stage count): not the A/B rows with their own --nvjpeg (sync=on, hybrid,
    # cpu=PCT, whose batch is partly the CPU's)
    add("feed_nvjpeg_4thr_img_s", best(rows, lambda r: r.get("decode") == "gpu" and not r.get("own_nvjpeg")
                                       and r.get("threads") == 4.0),
        "feed_nvjpeg_4thr_cpu_cores")
    add("feed_cpu_4thr_img_s", best(rows, lambda r: r.get("decode") == "cpu" and r.get("threads") == 4.0),
        "feed_cpu_4thr_cpu_cores")
    return out


def main():
    if len(sys.argv) != 2:
        print("usage: feed.py RUN_DIR", file=sys.stderr)
        return 2
    rows = extract(sys.argv[1])
    for key, value, unit, src in rows:
        v = f"{value:.6g}" if isinstance(value, float) else str(value)
        print(f"{key}\t{v}\t{unit}\t{src}")
    if not rows:
        print(f"# no loader-bench --feed log (feed_trainbench*.log) under {sys.argv[1]}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
