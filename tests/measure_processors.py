#!/usr/bin/env python3
"""measure_processors.py BUILD [REGEX]: how many cores each test keeps busy.

ctest -j N starts a test only when its PROCESSORS property fits in the free
slots, so a test that reserves more cores than it uses holds the others
back (a 2-rank test whose ranks wait out a deadline), and one that reserves
fewer than it uses slows its neighbours. This runs each test matching REGEX
(default: every test with PROCESSORS over 1 or an MPI launcher in its
command) alone, through ctest,
and prints its wall time, its CPU time (user + system of every process it
started and waited for) and their ratio, the cores it kept busy, next to
its PROCESSORS. A line ends in "<-" where PROCESSORS is not those cores
rounded (at least 1): a test that reserves slots it leaves idle, or one
that crowds its neighbours. Some keep more on purpose (preflight's 3 s
deadlines: tests/launch_checks.cmake says why).

Run it on an otherwise idle machine: the numbers are what the tests use
there. The PROCESSORS in tests/*.cmake were set from its output on a
2-core machine (docs/testing.md, "Running it").
"""
import json
import re
import resource
import subprocess
import sys
import time


def tests_of(build):
    out = subprocess.run(["ctest", "--test-dir", build, "--show-only=json-v1"], check=True,
                         capture_output=True, text=True).stdout
    for t in json.loads(out)["tests"]:
        procs = 1
        for p in t.get("properties", []):
            if p["name"] == "PROCESSORS":
                procs = int(p["value"])
        mpi = any(re.search(r"(^|/)(mpiexec|mpirun)$", str(a)) for a in t.get("command", []))
        yield t["name"], procs, mpi


def run_alone(build, name):
    """(wall s, cpu s, passed) of `ctest -R ^name$`, alone."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    rc = subprocess.run(["ctest", "--test-dir", build, "-R", "^%s$" % re.escape(name)],
                        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                        stderr=subprocess.DEVNULL).returncode
    wall = time.monotonic() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, rc == 0


def main(argv):
    if len(argv) not in (2, 3):
        print(__doc__.strip().splitlines()[0])
        return 2
    build = argv[1]
    pick = re.compile(argv[2]) if len(argv) == 3 else None
    print("%-44s %10s %8s %8s %6s" % ("# test", "PROCESSORS", "wall s", "cpu s", "cores"))
    for name, procs, mpi in tests_of(build):
        if (pick.search(name) is None) if pick else (procs < 2 and not mpi):
            continue
        wall, cpu, ok = run_alone(build, name)
        cores = cpu / wall if wall > 0 else 0.0
        off = procs != max(1, round(cores))
        print("%-44s %10d %8.2f %8.2f %6.2f%s%s" % (name, procs, wall, cpu, cores,
                                                   "" if ok else "  (failed)", "  <-" if off else ""),
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
