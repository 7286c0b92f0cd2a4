"""allreduce.py: `trainbench allreduce-bench` tables (nccl-tests' layout)
in any log of the run (the NCCL stage's .txt files, nccl.md's code blocks):
time, algbw, busbw and #wrong per size, and the path line.

Keys: allreduce/<file>/<table n>/<size B>/time_us|algbw|busbw|wrong (a file
may hold several tables: n counts them from 1)."""
import os
import re

from _util import NUM, files, read, rel, row

HEAD = re.compile(r"^# trainbench allreduce-bench: (\d+) ranks?, path (\S+)", re.M)
# size count type redop [root] time algbw busbw #wrong: the root column (-1) since
# allreduce-bench keeps nccl-tests' column places; the stored runs' tables lack it
ROW = re.compile(r"^ +(\d+) +(\d+) +(\w+) +(\w+) +(?:-?\d+ +)?(%s) +(%s) +(%s) +(\d+)\s*$" % (NUM, NUM, NUM), re.M)


def extract(run_dir):
    out = []
    for path in files(run_dir, r".*\.(txt|log|md)"):
        text = read(path)
        heads = list(HEAD.finditer(text))
        if not heads:
            continue
        name = os.path.splitext(os.path.basename(path))[0]
        src = rel(run_dir, path)
        for i, h in enumerate(heads):
            end = heads[i + 1].start() if i + 1 < len(heads) else len(text)
            k0 = "allreduce/%s/%d/" % (name, i + 1)
            out += [row(k0 + "ranks", int(h.group(1)), "ranks", src), row(k0 + "path", h.group(2), "-", src)]
            for m in ROW.finditer(text, h.end(), end):
                k = k0 + "%s/" % m.group(1)
                out += [row(k + "time_us", float(m.group(5)), "us", src),
                        row(k + "algbw", float(m.group(6)), "GB/s", src),
                        row(k + "busbw", float(m.group(7)), "GB/s", src),
                        row(k + "wrong", int(m.group(8)), "elements", src)]
    return out
