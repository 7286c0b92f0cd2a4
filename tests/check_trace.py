#!/usr/bin/python3
"""check_trace.py TRACE.json --ranks N --steps S: the --trace file is valid
JSON in Chrome trace format with one process (track group) per rank, named,
a "compute" and a "communication" thread in each, and for every rank and
step every phase (data, BN broadcast, h2d, forward, backward, allreduce,
optimizer) in order without overlap; with more than one rank, all-reduce
bucket events on the communication thread inside their step."""
import argparse
import json
import sys

PHASES = ["data", "BN broadcast", "h2d", "forward", "backward", "allreduce", "optimizer"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("path")
    ap.add_argument("--ranks", type=int, required=True)
    ap.add_argument("--steps", type=int, required=True)
    a = ap.parse_args()
    bad = []
    with open(a.path) as f:
        d = json.load(f)
    ev = d["traceEvents"]
    names = {e["pid"]: e["args"]["name"] for e in ev if e["ph"] == "M" and e["name"] == "process_name"}
    threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in ev if e["ph"] == "M" and e["name"] == "thread_name"}
    if sorted(names) != list(range(a.ranks)):
        bad.append(f"processes {sorted(names)}, expected one per rank 0..{a.ranks - 1}")
    for r in range(a.ranks):
        if not names.get(r, "").startswith(f"rank {r} ("):
            bad.append(f"process {r} is named {names.get(r)!r}")
        if threads.get((r, 0)) != "compute" or threads.get((r, 1)) != "communication":
            bad.append(f"rank {r}'s threads are {threads.get((r, 0))!r}, {threads.get((r, 1))!r}")
        for s in range(a.steps):
            mine = {e["name"]: e for e in ev if e["ph"] == "X" and e["pid"] == r and e["tid"] == 0
                    and e["args"]["step"] == s}
            missing = [p for p in PHASES if p not in mine]
            if missing:
                bad.append(f"rank {r} step {s} lacks {missing}")
                continue
            for p, q in zip(PHASES, PHASES[1:]):  # each phase ends before the next starts (1 us slack)
                if mine[p]["ts"] + mine[p]["dur"] > mine[q]["ts"] + 1.0:
                    bad.append(f"rank {r} step {s}: {p} overlaps {q}")
            if a.ranks > 1:
                buckets = [e for e in ev if e["ph"] == "X" and e["pid"] == r and e["tid"] == 1
                           and e["args"]["step"] == s]
                if not buckets:
                    bad.append(f"rank {r} step {s}: no all-reduce bucket on the communication thread")
                t0 = mine["BN broadcast"]["ts"]
                t1 = mine["allreduce"]["ts"] + mine["allreduce"]["dur"]
                for e in buckets:
                    if e["ts"] < t0 - 1.0 or e["ts"] + e["dur"] > t1 + 1.0:
                        bad.append(f"rank {r} step {s}: bucket {e['args']['bucket']} outside its step")
                        break
    for b in bad[:20]:
        print("FAIL " + b)
    print(f"# check_trace {a.path}: {len(ev)} events, {a.ranks} ranks, {a.steps} steps, {len(bad)} problem(s)")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
