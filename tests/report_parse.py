#!/usr/bin/python3
"""report_parse.py - reading `trainbench report`'s output back for
tests/test_report.py: the failure list, running a command, printed digits
against a value, and the markdown and csv tables parsed into rows."""
import csv
import io
import math
import re
import subprocess

BAD = []


def fail(msg):
    BAD.append(msg)
    print("FAIL " + msg)


def run(cmd, expect_rc=None):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if expect_rc is not None and p.returncode != expect_rc:
        fail(f"{' '.join(cmd)}: exit {p.returncode}, expected {expect_rc}\n{p.stderr}")
    return p


def decimals(cell):
    m = re.fullmatch(r"-?\d+(?:\.(\d+))?", cell.strip())
    if not m:
        return None
    return len(m.group(1)) if m.group(1) else 0


def close_to(cell, value, what, sig=None):
    """The printed cell equals value to the rounding of its digits (sig:
    printed with that many significant digits)."""
    cell = cell.strip()
    try:
        got = float(cell)
    except ValueError:
        fail(f"{what}: '{cell}' is not a number (expected {value!r})")
        return
    if sig is not None:
        tol = abs(value) * 0.5 * 10 ** (1 - sig) + 1e-300
    else:
        d = decimals(cell)
        tol = 0.5 * 10 ** -(d if d is not None else 6)
    if not abs(got - value) <= tol * (1 + 1e-9) + 1e-12:
        fail(f"{what}: printed {cell}, file holds {value!r} (tolerance {tol:g})")


# ---- parsing the three renderings -----------------------------------------------------------------

def md_tables(text):
    """{title: (header, [row cells])} of a markdown report."""
    lines = text.splitlines()
    out = {}
    i = 0
    while i < len(lines):
        m = re.fullmatch(r"\*\*(.*)\*\*", lines[i])
        if m and i + 3 < len(lines) and lines[i + 2].startswith("|"):
            head = split_md(lines[i + 2])
            if not re.fullmatch(r"\|(?:-+:?\|)+", lines[i + 3]):
                fail(f"markdown table '{m.group(1)}' lacks its alignment row: {lines[i + 3]!r}")
            rows = []
            j = i + 4
            while j < len(lines) and lines[j].startswith("|"):
                cells = split_md(lines[j])
                if len(cells) != len(head):
                    fail(f"markdown table '{m.group(1)}': row has {len(cells)} cells, header {len(head)}")
                rows.append(cells)
                j += 1
            out[m.group(1)] = (head, rows)
            i = j
        else:
            i += 1
    return out


def split_md(line):
    cells = re.split(r"(?<!\\)\|", line.strip())[1:-1]
    return [c.strip().replace("\\|", "|") for c in cells]


def csv_tables(text):
    """{title: [dict rows]} of a csv report: blocks '# title', header, rows."""
    out = {}
    for block in text.split("\n\n"):
        lines = [l for l in block.splitlines() if l]
        titles = [l for l in lines if l.startswith("# ")]
        body = [l for l in lines if not l.startswith("# ")]
        if not body:
            continue
        rows = list(csv.reader(io.StringIO("\n".join(body) + "\n")))
        widths = {len(r) for r in rows}
        if len(widths) != 1:
            fail(f"csv block '{titles[-1] if titles else '?'}' has rows of {sorted(widths)} fields")
        out[titles[-1][2:] if titles else "?"] = [dict(zip(rows[0], r)) for r in rows[1:]]
    return out


def find(tables, prefix):
    for k, v in tables.items():
        if k.startswith(prefix):
            return v
    fail(f"no table titled '{prefix}...' in the report; tables: {list(tables)}")
    return None


def col(head, rows, name):
    if name not in head:
        fail(f"column '{name}' missing from {head}")
        return [""] * len(rows)
    k = head.index(name)
    return [r[k] for r in rows]


# ---- what the numbers must be, from the file -----------------------------------------------------
