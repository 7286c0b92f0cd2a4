#!/usr/bin/env python3
"""layout_check.py - the include graph runs one way, floor by floor.

Floors, bottom to top (docs/DESIGN.md, "Layout"):

  0  core/                         the basics (messages, clocks, CLI parsing, check macros)
  1  model/  data/  comm/          the model and its backends, the loader, the collectives
  2  src/device/                   facts about the machine
  3  src/results/                  results and checkpoint files, provenance, tables
  4  src/feed/  src/project/       batches to the device; the N-rank projection
  5  src/train/                    the training run and its step
  6  src/cmd/                      one file per subcommand

A file may include its own room and any room on a lower floor; never a
higher floor, never a sideways room on its own floor. Each room of src/
shows one header to the rooms above it, its public face (FACES below: the
face includes the room's headers that others may use); its other headers
are for its own files. Below src/, a header named *_internal.h is its
folder's private state, for its own files (and tests) only. tests/ and bench/
stand above everything and are not checked.

  layout_check.py [ROOT]            exit 1 and one line per violation
  layout_check.py --table [ROOT]    the rooms with their files and lines (markdown)
  layout_check.py --doc FILE [ROOT] the rooms table in FILE (docs/DESIGN.md) against
                                    the tree: every room, its file count, its lines
                                    within 15 %
  layout_check.py --selftest        plants violations in a copy of the rules and
                                    checks that each is caught
"""
import os
import re
import sys

FLOORS = [
    ("core",),
    ("model", "data", "comm"),
    ("src/device",),
    ("src/results",),
    ("src/feed", "src/project"),
    ("src/train",),
    ("src/cmd",),
]
FACES = {
    "src/cmd": "commands.h",
    "src/train": "train.h",
    "src/feed": "feed.h",
    "src/project": "project.h",
    "src/results": "results.h",
    "src/device": "device.h",
}
SOURCE = re.compile(r"\.(c|h|cu|cuh)$")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def room_of(path):
    """The room a repository path belongs to, or None (tests, bench, generated)."""
    for floor in FLOORS:
        for room in floor:
            if path == room or path.startswith(room + "/"):
                return room
    return None


def floor_of(room):
    for i, floor in enumerate(FLOORS):
        if room in floor:
            return i
    raise KeyError(room)


def violation(src_path, inc_path):
    """A one-line reason when src_path may not include inc_path, else None."""
    a, b = room_of(src_path), room_of(inc_path)
    if a is None or b is None:
        return None
    if a != b and inc_path.endswith("_internal.h"):
        return f"{src_path} includes {inc_path}: {b}/'s private header (only {b}/ itself may)"
    if a == b:
        return None
    if b in FACES and inc_path != f"{b}/{FACES[b]}":
        return f"{src_path} includes {inc_path}: from outside {b}/ include its face, {b}/{FACES[b]}"
    fa, fb = floor_of(a), floor_of(b)
    if fb > fa:
        return f"{src_path} includes {inc_path}: {a}/ (floor {fa}) may not include the higher {b}/ (floor {fb})"
    if fb == fa:
        return f"{src_path} includes {inc_path}: {a}/ and {b}/ share floor {fa} (no sideways includes)"
    return None


def sources(root):
    for top in ("core", "model", "data", "comm", "src"):
        for dirpath, _, files in os.walk(os.path.join(root, top)):
            for f in sorted(files):
                if SOURCE.search(f):
                    full = os.path.join(dirpath, f)
                    yield os.path.relpath(full, root), full


def check(root):
    bad = []
    for rel, full in sources(root):
        if room_of(rel) is None:
            if rel.startswith("src/") and SOURCE.search(rel):
                bad.append(f"{rel}: in src/ but in no room (move it into one of {', '.join(r for f in FLOORS for r in f if r.startswith('src/'))})")
            continue
        with open(full, encoding="utf-8", errors="replace") as fh:
            for inc in INCLUDE.findall(fh.read()):
                why = violation(rel, inc)
                if why:
                    bad.append(why)
    return bad


def count(root):
    counts = {}
    for rel, full in sources(root):
        room = room_of(rel)
        if room is None:
            continue
        with open(full, encoding="utf-8", errors="replace") as fh:
            n = sum(1 for _ in fh)
        c = counts.setdefault(room, [0, 0])
        c[0] += 1
        c[1] += n
    return counts


def table(root):
    counts = count(root)
    print("| floor | room | files | lines |")
    print("| ---: | --- | ---: | ---: |")
    for i in reversed(range(len(FLOORS))):
        for room in FLOORS[i]:
            files, lines = counts.get(room, [0, 0])
            print(f"| {i} | {room}/ | {files} | {lines} |")


DOC_ROW = re.compile(r"^\|\s*(\d+)\s*\|\s*(\S+?)/\s*\|\s*(\d+)\s*\|\s*(\d+)\s*\|\s*$", re.M)


def doc_stale(doc_text, counts):
    """Lines saying where the rooms table of a document disagrees with counts."""
    rows = {m.group(2): (int(m.group(1)), int(m.group(3)), int(m.group(4))) for m in DOC_ROW.finditer(doc_text)}
    bad = []
    for i, floor in enumerate(FLOORS):
        for room in floor:
            files, lines = counts.get(room, [0, 0])
            if room not in rows:
                bad.append(f"{room}/: not in the rooms table")
                continue
            f, nf, nl = rows.pop(room)
            if f != i or nf != files or abs(nl - lines) > 0.15 * lines:
                bad.append(f"{room}/: the table says floor {f}, {nf} files, {nl} lines; the tree has floor {i}, "
                           f"{files} files, {lines} lines (tests/layout_check.py --table)")
    bad += [f"{r}/: in the rooms table but not a room" for r in rows]
    return bad


def selftest():
    planted = [
        ("core/log.c", "comm/comm.h"),                  # the bottom floor reaching up
        ("model/resnet.c", "data/loader.h"),            # sideways on floor 1
        ("comm/grad_sync.c", "src/train/trainer.h"),    # a lower floor into src/
        ("src/results/scaling.h", "src/train/trainer.h"),
        ("src/feed/batch_source.c", "src/project/fabric.h"),
        ("src/train/trainer.c", "src/cmd/commands.h"),
        ("src/device/nvml.c", "src/results/results.h"),
        ("src/cmd/cmd_train.c", "src/train/trainer_internal.h"),  # another room's private state
        ("src/cmd/cmd_train.c", "src/train/train_setup.h"),       # past the room's face
    ]
    allowed = [
        ("src/cmd/cmd_train.c", "src/train/train.h"),
        ("src/train/trainer.c", "comm/grad_sync.h"),
        ("src/results/provenance.c", "src/device/device.h"),
        ("src/train/trainer.c", "src/train/trainer_step.h"),
        ("model/cpu/cpu_conv.c", "model/model.h"),
        ("data/loader.c", "core/log.h"),
        ("tests/test_data.c", "src/cmd/commands.h"),
        ("src/train/trainer_graph.c", "src/train/trainer_internal.h"),
        ("tests/test_cpu_ops.c", "model/cpu/cpu_internal.h"),
    ]
    fails = 0
    for src, inc in planted:
        if violation(src, inc) is None:
            print(f"selftest: NOT caught: {src} -> {inc}")
            fails += 1
    for src, inc in allowed:
        why = violation(src, inc)
        if why:
            print(f"selftest: wrongly refused: {why}")
            fails += 1
    counts = {r: [3, 100] for f in FLOORS for r in f}
    good = "\n".join(f"| {i} | {r}/ | 3 | 100 |" for i, f in enumerate(FLOORS) for r in f)
    stale = [good.replace("| 3 | src/cmd/ | 3 | 100 |", "| 3 | src/cmd/ | 3 | 100 |").replace(
                 "| 6 | src/cmd/ | 3 | 100 |", "| 6 | src/cmd/ | 4 | 100 |"),       # a file more
             good.replace("| 5 | src/train/ | 3 | 100 |", "| 5 | src/train/ | 3 | 130 |"),  # 30 % more lines
             good.replace("| 2 | src/device/ | 3 | 100 |\n", ""),                     # a room left out
             good + "\n| 4 | src/extra/ | 1 | 10 |"]                                   # a room that is not one
    if doc_stale(good, counts):
        print("selftest: a right rooms table refused")
        fails += 1
    for k, doc in enumerate(stale):
        if not doc_stale(doc, counts):
            print(f"selftest: stale rooms table {k} NOT caught")
            fails += 1
    print(f"selftest: {len(planted)} planted violations and {len(stale)} stale tables, "
          f"{len(planted) + len(allowed) + len(stale) + 1 - fails} of {len(planted) + len(allowed) + len(stale) + 1} "
          "verdicts right")
    return 1 if fails else 0


def main(argv):
    doc = argv[argv.index("--doc") + 1] if "--doc" in argv and argv.index("--doc") + 1 < len(argv) else None
    args = [a for a in argv if not a.startswith("--") and a != doc]
    root = args[0] if args else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    if "--selftest" in argv:
        return selftest()
    if "--table" in argv:
        table(root)
        return 0
    if doc:
        with open(doc, encoding="utf-8") as fh:
            bad = doc_stale(fh.read(), count(root))
        for line in bad:
            print(f"{doc}: {line}")
        print(f"layout: {len(bad)} stale row(s) in {doc}'s rooms table")
        return 1 if bad else 0
    bad = check(root)
    for line in bad:
        print(line)
    print(f"layout: {len(bad)} include(s) against the floors")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
