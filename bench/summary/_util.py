"""_util.py: what the extractors of bench/summary share (not an extractor:
make_summary.py imports every module here whose name has no leading
underscore)."""
import os
import re

NUM = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"


def files(run_dir, pattern):
    """Files under run_dir (recursively, sorted) whose base name matches the
    regular expression `pattern` (whole name)."""
    rx = re.compile(pattern + r"\Z")
    out = []
    for root, dirs, names in os.walk(run_dir):
        dirs.sort()
        out += [os.path.join(root, n) for n in sorted(names) if rx.match(n)]
    return out


def rel(run_dir, path):
    """path relative to run_dir (the summary's `source log` column)."""
    return os.path.relpath(path, run_dir)


def read(path):
    with open(path, errors="replace") as f:
        return f.read()


def slug(text):
    """A key component: lower case, runs of other characters as one '_'."""
    return re.sub(r"[^a-z0-9.+-]+", "_", text.lower()).strip("_") or "_"


def number(text):
    """int of '7182', float of '7,182.1'; None for anything else."""
    t = text.strip().replace(",", "")
    if re.fullmatch(r"[-+]?\d+", t):
        return int(t)
    try:
        return float(t)
    except ValueError:
        return None


def row(key, value, unit, source):
    """One summary row; floats keep the digits their log printed (repr of a
    float parsed from text gives them back)."""
    return (key, value, unit, source)
