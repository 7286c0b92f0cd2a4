"""probe.py: `trainbench probe` (probe.txt, or the suite log's probe stage):
each measured rate and its share of the datasheet.

Keys: probe/<measurement>/<size>/rate (GB/s or TFLOP/s) and /pct_of_peak."""
import re

from _util import NUM, files, read, rel, row, slug

LINE = re.compile(r"^  (\S+(?: \S+)*?) +(\d+(?: [KMG]iB)?) +(%s) +(%s) (GB/s|TFLOP/s) +(%s) +(%s)\s*$"
                  % (NUM, NUM, NUM, NUM), re.M)


def extract(run_dir):
    out, seen = [], set()
    for path in files(run_dir, r"probe\.txt") + files(run_dir, r"suite\.log"):
        for m in LINE.finditer(read(path)):
            k = "probe/%s/%s/" % (slug(m.group(1)), slug(m.group(2)))
            if k in seen:
                continue
            seen.add(k)
            src = rel(run_dir, path)
            out += [row(k + "rate", float(m.group(4)), m.group(5), src),
                    row(k + "ms", float(m.group(3)), "ms", src),
                    row(k + "pct_of_peak", float(m.group(7)), "%", src)]
    return out
