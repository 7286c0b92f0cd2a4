#!/usr/bin/env python3
"""run_fuzzer.py - runs one libFuzzer target for a bounded time and fails on
what it finds (the fuzz_* tests of tests/fuzz.cmake).

    run_fuzzer.py FUZZER CORPUS SECONDS WORKDIR [--third-party LIB] [-- libFuzzer flags]

The committed corpus is read, never written: new inputs go to WORKDIR/new,
inputs that fail to WORKDIR/artifacts (each named with the command that
replays it). Anything the target reports fails the run: a crash, a
sanitizer report (UB ends the program: -fno-sanitize-recover), a leak, an
input running over 10 s, an allocation over 2 GB or an RSS over 3 GB.

--third-party LIB (the raw-bytes HDF5 targets, LIB = libhdf5): libhdf5's
parser crashes on some malformed files, and a mutation of a valid file
finds one within seconds. Then the fuzzer runs in fork mode, keeps going
after a crash, and every failing input is replayed and classified by its
stack: when the first frame past the sanitizer runtime is in LIB and no
frame of trainbench's own code owns the memory involved (allocated it,
freed it, or has it on its stack), the finding is LIB's: it is listed (one
line per distinct site, with an example input under WORKDIR/third_party)
and does not fail the run. Everything else fails it, as without the flag.
"""
import argparse
import glob
import os
import re
import shutil
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUR_DIRS = tuple(os.path.join(REPO, d) + os.sep for d in ("src", "data", "model", "comm", "tests"))

FRAME = re.compile(r"^\s*#(\d+) 0x[0-9a-f]+ (?:in (\S.*?))?\s*(?:\(([^()]*?)\+0x[0-9a-f]+\)|(\S+?):\d+(?::\d+)?)?"
                   r"(?:\s+\(BuildId: [0-9a-f]+\))?\s*$")
RUNTIME_FUNC = re.compile(
    r"^(__asan|__lsan|__ubsan|__sanitizer|__interceptor_|__interception|__libc_|__GI_|_start\b|"
    r"fuzzer::|std::|(?:__)?(?:malloc|calloc|realloc|free|memcpy|memmove|memset|memcmp|bcmp|strlen|"
    r"strnlen|strcmp|strncmp|strdup|strndup|posix_memalign|aligned_alloc|abort|raise|main)\b|"
    r"operator new|operator delete)")

LIBFUZZER_FLAGS = ["-timeout=10", "-rss_limit_mb=3072", "-malloc_limit_mb=2048"]


def frame_kind(func, module, source, third_party):
    """'ours', 'runtime', 'third' (the tolerated library) or 'other'."""
    func = func or ""
    where = module or source or ""
    if source and source.startswith(OUR_DIRS) and not source.startswith(os.path.join(REPO, "tests", "fuzz") + os.sep):
        return "ours"
    if source and source.startswith(os.path.join(REPO, "tests", "fuzz") + os.sep):
        # the harness itself: ours, except its entry (fz_call, LLVMFuzzerTestOneInput)
        # which is on every stack
        return "harness"
    if third_party and third_party in os.path.basename(where):
        return "third"
    if RUNTIME_FUNC.match(func) or "compiler-rt" in where or "libsanitizer" in where or \
            "/libc.so" in where or "csu/" in where or "/sysdeps/" in where or "libio/" in where or \
            "stdlib/" in where or "string/" in where:
        return "runtime"
    if not func and module and not module.startswith("/lib") and not module.startswith("/usr"):
        return "runtime"  # the fuzzer binary itself, unsymbolised: its sanitizer runtime
    return "other"


def stacks(report):
    """The report's stack traces, each a list of (func, module, source)."""
    out, cur = [], []
    for line in report.splitlines():
        m = FRAME.match(line)
        if m:
            if m.group(1) == "0" and cur:
                out.append(cur)
                cur = []
            cur.append((m.group(2), m.group(3), m.group(4)))
        elif cur:
            out.append(cur)
            cur = []
    if cur:
        out.append(cur)
    return out


def first_kind(stack, third_party):
    for func, module, source in stack:
        k = frame_kind(func, module, source, third_party)
        if k != "runtime":
            return k, func or os.path.basename(module or source or "?")
    return "runtime", "?"


def classify(report, third_party):
    """('third', site) when the finding is the third-party library's own,
    else ('ours', reason)."""
    if "fuzz: " in report and "tb_abort" in report:
        return "ours", "tb_die/TB_FATAL where a return value was required"
    st = stacks(report)
    if not st:
        return "ours", "no stack in the report"
    leak = "LeakSanitizer" in report
    primaries = st if leak else st[:1]  # a leak report lists one stack per leaked block
    sites = []
    for s in primaries:
        kind, func = first_kind(s, third_party)
        if kind != "third":
            return "ours", "first frame past the runtime: %s (%s)" % (func, kind)
        names = [f for f, _, _ in s if f and frame_kind(f, None, None, None) != "runtime"][:3]
        sites.append(" <- ".join(names) if names else func)
    if not leak:
        # memory the bad access touched: allocated / freed by, or on the stack of, our code?
        for s in st[1:]:
            kind, func = first_kind(s, third_party)
            if kind in ("ours", "harness"):
                return "ours", "the memory involved belongs to %s" % func
    what = "leak" if leak else (re.search(r"ERROR: \w+Sanitizer: ([\w-]+)", report) or
                                re.search(r"ERROR: libFuzzer: ([\w-]+)", report) or
                                re.search(r"(SEGV|ALARM|out-of-memory)", report))
    what = what if isinstance(what, str) else (what.group(1) if what else "crash")
    return "third", "%s in %s" % (what, sites[0])


def report_excerpt(rep, limit=45):
    """The report from its first error line, without the shadow-byte dump."""
    lines = [l for l in rep.splitlines() if not re.match(r"^(#\d+\s|INFO: |MERGE|stat::)", l)]
    start = next((i for i, l in enumerate(lines) if re.search(
        r"ERROR: |runtime error|^fuzz: |ALARM|out-of-memory|deadly signal", l)), max(0, len(lines) - limit))
    out = []
    for l in lines[start:]:
        if l.startswith("Shadow bytes around") or len(out) >= limit:
            break
        out.append(l)
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("fuzzer")
    ap.add_argument("corpus")
    ap.add_argument("seconds", type=int)
    ap.add_argument("work")
    ap.add_argument("--third-party", default=None, help="library whose own crashes are listed, not failed")
    ap.add_argument("extra", nargs="*", help="more libFuzzer flags (after --)")
    a = ap.parse_args()
    name = os.path.basename(a.fuzzer)
    if not os.access(a.fuzzer, os.X_OK):
        print("FAIL: %s is not an executable" % a.fuzzer)
        return 1
    if not os.path.isdir(a.corpus) or not os.listdir(a.corpus):
        print("FAIL: no seed corpus at %s" % a.corpus)
        return 1
    shutil.rmtree(a.work, ignore_errors=True)
    new, arts, third = (os.path.join(a.work, d) for d in ("new", "artifacts", "third_party"))
    for d in (new, arts, third):
        os.makedirs(d)
    env = dict(os.environ)
    for s in ("llvm-symbolizer", "/usr/lib/llvm-14/bin/llvm-symbolizer"):
        path = shutil.which(s)
        if path:
            env.setdefault("ASAN_SYMBOLIZER_PATH", path)
            break
    env.setdefault("UBSAN_OPTIONS", "print_stacktrace=1:halt_on_error=1")
    env.setdefault("LSAN_OPTIONS", "suppressions=%s:print_suppressions=0" %
                   os.path.join(os.path.dirname(os.path.abspath(__file__)), "lsan.supp"))
    if a.third_party:
        # a corrupt size field makes libhdf5 ask for terabytes: let malloc fail
        # (it checks) instead of ending the process
        opts = [env["ASAN_OPTIONS"]] if env.get("ASAN_OPTIONS") else []
        env["ASAN_OPTIONS"] = ":".join(opts + ["allocator_may_return_null=1"])
        # leaks are checked after each input (libFuzzer); the check at a fork
        # child's exit would only see what libhdf5 keeps from earlier damaged
        # files, and blame an empty input for it
        env["LSAN_OPTIONS"] += ":leak_check_at_exit=0"

    flags = LIBFUZZER_FLAGS + ["-max_total_time=%d" % a.seconds, "-print_final_stats=1",
                               "-artifact_prefix=" + arts + os.sep]
    if a.third_party:
        flags += ["-fork=1", "-ignore_crashes=1", "-ignore_ooms=1", "-ignore_timeouts=1"]
    cmd = [a.fuzzer] + flags + a.extra + [new, a.corpus]
    print("# %s: %d s on %d seeds from %s%s" % (name, a.seconds, len(os.listdir(a.corpus)), a.corpus,
                                               " (fork mode, %s findings listed)" % a.third_party
                                               if a.third_party else ""))
    sys.stdout.flush()
    log = os.path.join(a.work, "fuzz.log")
    with open(log, "w") as f:
        rc = subprocess.call(cmd, stdout=f, stderr=subprocess.STDOUT, env=env)
    text = open(log, errors="replace").read()
    status = [l for l in text.splitlines() if re.match(r"^#\d+", l)]
    runs = re.findall(r"stat::number_of_executed_units: *(\d+)", text)
    execs = int(runs[-1]) if runs else (int(re.match(r"^#(\d+)", status[-1]).group(1)) if status else 0)
    print("# last status: %s" % (status[-1] if status else "none"))
    print("# executions: %d; new inputs kept: %d (in %s)" % (execs, len(os.listdir(new)), new))

    failed = []
    listed = {}
    for art in sorted(glob.glob(os.path.join(arts, "*"))):
        rep = subprocess.run([a.fuzzer] + LIBFUZZER_FLAGS + [art], stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, env=env, errors="replace").stdout
        kind, why = classify(rep, a.third_party) if a.third_party else ("ours", "")
        reproduced = re.search(r"ERROR: |runtime error|^fuzz: |ALARM|out-of-memory|deadly signal", rep, re.M)
        if a.third_party and not reproduced:
            # fork mode: a child's failure outside any input (e.g. at exit)
            # is saved under an input that does nothing alone
            print("# not reproducible alone (listed, not failing): %s (%d bytes)" % (
                os.path.basename(art), os.path.getsize(art)))
            continue
        if kind == "third":
            if why not in listed:
                keep = os.path.join(third, os.path.basename(art))
                shutil.copy(art, keep)
                listed[why] = [keep, 0]
            listed[why][1] += 1
            os.remove(art)
            continue
        failed.append((art, why, rep))

    for why, (example, count) in sorted(listed.items()):
        print("# %s's own finding (listed, not failing): %s (%d input%s); example %s" % (
            a.third_party, why, count, "" if count == 1 else "s", example))
    if failed:
        for art, why, rep in failed:
            print("FAIL: %s: %s%s" % (name, os.path.basename(art), ": " + why if why else ""))
            print(report_excerpt(rep))
            print("FAIL: input saved: %s\n      replay: %s %s" % (art, a.fuzzer, art))
        return 1
    if rc != 0 and not a.third_party:
        print("FAIL: %s exited %d without a saved input; its output:" % (name, rc))
        print("\n".join(text.splitlines()[-60:]))
        return 1
    if execs == 0:
        print("FAIL: %s ran no input; its output:" % name)
        print("\n".join(text.splitlines()[-40:]))
        return 1
    print("ok: %s: no finding in trainbench's code in %d s" % (name, a.seconds))
    return 0


if __name__ == "__main__":
    sys.exit(main())
