"""tables.py: the markdown tables the stage scripts wrote into the run
(resnet50.md, feed.md, nccl.md, psnr_*.md, scaling_*.md: each made from its
logs by a script). Each numeric cell of a measurement column becomes a row;
the cells left of the first measurement column name the table row.

Keys: table/<file>/<n>/<row label>/<column header>, n counting the file's
tables from 1; units from the column header (img/s, GB/s, ms, MiB, %, x
for ratios, dB)."""
import re

from _util import files, number, read, rel, row, slug

MEASURE = re.compile(r"img/s|GB/s|TFLOP/s|\bms\b|ms/|MiB|%|\bx\b|\bx |dB|wall|util|idle|busbw|algbw|time|speed|"
                     r"psnr|eff", re.I)
UNITS = (("img/s", "img/s"), ("GB/s", "GB/s"), ("TFLOP/s", "TFLOP/s"), ("MiB", "MiB"), ("dB", "dB"),
         ("%", "%"), ("ms", "ms"), ("wall", "s"))


def unit_of(header):
    h = header.strip()
    if re.match(r"x\b|x ", h) or h.endswith(" x") or h.startswith("x "):
        return "x"
    for needle, unit in UNITS:
        if needle.lower() in h.lower():
            return unit
    return "-"


def _cells(line):
    return [c.strip() for c in line.strip().strip("|").split("|")]


def extract(run_dir):
    out = []
    for path in files(run_dir, r".*\.md"):
        lines = read(path).splitlines()
        n, i = 0, 0
        src = rel(run_dir, path)
        while i + 1 < len(lines):
            if not (lines[i].lstrip().startswith("|") and re.match(r"^\s*\|[\s:|-]+\|\s*$", lines[i + 1])):
                i += 1
                continue
            n += 1
            header = _cells(lines[i])
            first = next((j for j, h in enumerate(header) if MEASURE.search(h)), len(header))
            first = max(first, 1)
            i += 2
            seen = {}
            while i < len(lines) and lines[i].lstrip().startswith("|"):
                cells = _cells(lines[i])
                label = "|".join(slug(re.sub(r"[*`]", "", c)) for c in cells[:first])
                seen[label] = seen.get(label, 0) + 1
                if seen[label] > 1:
                    label += "#%d" % seen[label]
                for j in range(first, min(len(cells), len(header))):
                    v = number(re.sub(r"[*`]", "", cells[j]).split(" ")[0])
                    if v is not None:
                        out.append(row("table/%s/%d/%s/%s" % (src, n, label, slug(header[j])), v,
                                       unit_of(header[j]), src))
                i += 1
    return out
