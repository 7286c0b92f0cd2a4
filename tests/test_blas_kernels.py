#!/usr/bin/env python3
"""test_blas_kernels.py TRAINBENCH [MPIEXEC]: which BLAS kernels the CPU
backend runs, who chose them, and where that is said (model/cpu/cpu_blas.h).

What the kernels are is read from the library itself: OPENBLAS_VERBOSE=2
makes OpenBLAS print "Core: NAME" on stderr as it loads (once per exec, so a
re-executed trainbench prints two). What this CPU can run is read from the
kernel's /proc/cpuinfo flags, not from trainbench.

1. probe: the CPU section (vector units, BLAS kernels, one SGEMM beside the
   CPU's peak) and the results attributes; blas_kernels is what the library
   loaded.
2. A library that fell back (emulated: OPENBLAS_CORETYPE=Prescott with
   TB_TEST_BLAS_FALLBACK=1): trainbench re-runs itself on the kernels the
   CPU can run, says so in exactly one line, and records them with their
   origin, in probe and in a training run's header and results file.
3. A user's own OPENBLAS_CORETYPE=Prescott: left alone (no re-exec), one
   line saying the CPU could run better kernels.
4. Two ranks (preflight under mpirun) with the emulated fallback: one line
   for the job, not one per rank; each rank's kernels in the table; ranks on
   different kernels of one library (nodes with other CPUs) are no launch
   mistake.
5. Threads: one BLAS thread per OpenMP worker by default; a user's
   OPENBLAS_NUM_THREADS kept and warned about when it oversubscribes.
Exit 0 on success, 1 on a failure, 77 when h5py is missing."""
import os
import re
import subprocess
import sys
import tempfile

try:
    import h5py
except ImportError:
    print("SKIP: no h5py")
    sys.exit(77)

FAILS = []


def check(cond, msg):
    print(("ok   " if cond else "FAIL ") + msg)
    if not cond:
        FAILS.append(msg)


def proc_flags():
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("flags"):
                return set(line.split(":", 1)[1].split())
    return set()


def vendor():
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("vendor_id"):
                return line.split(":", 1)[1].strip()
    return ""


def best_kernels():
    """OpenBLAS's kernels for this CPU's vector units, from the kernel's flags."""
    fl = proc_flags()
    if {"avx512f", "avx512bw", "avx512vl", "avx512dq", "avx512cd", "avx2", "fma", "f16c"} <= fl:
        return "SkylakeX"
    if {"avx2", "fma", "f16c"} <= fl:
        return "Zen" if vendor() in ("AuthenticAMD", "HygonGenuine") else "Haswell"
    if "avx" in fl:
        return "Sandybridge"
    return ""


def run(cmd, env_extra, timeout=600):
    env = dict(os.environ)
    for k in ("OPENBLAS_CORETYPE", "TB_TEST_BLAS_FALLBACK", "TB_BLAS_REEXEC", "OPENBLAS_NUM_THREADS"):
        env.pop(k, None)
    env.update(env_extra)
    env["OPENBLAS_VERBOSE"] = "2"
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)
    print("+ %s %s -> %d" % (" ".join(f"{k}={v}" for k, v in env_extra.items()), " ".join(cmd), r.returncode))
    print(r.stdout[-3000:] + r.stderr[-3000:])
    return r


def cores(r):
    return re.findall(r"^Core: (\S+)", r.stderr, re.M)


def notes(r):
    """The line about the kernels: on stdout, in the output of the commands that run the BLAS."""
    return [l for l in r.stdout.splitlines() if l.startswith("# BLAS choice") and "OPENBLAS_CORETYPE" in l]


def err_lines(r):
    """stderr without the library's own OPENBLAS_VERBOSE lines"""
    return [l for l in r.stderr.splitlines() if l.strip() and not re.match(r"^(Core|Unknown CPU model)", l)]


def attrs(path):
    with h5py.File(path, "r") as f:
        return {k: (v.decode() if isinstance(v, bytes) else v) for k, v in f.attrs.items()}


def probe_plain(tb, d, best):
    r = run([tb, "probe", "--quick", "--results", os.path.join(d, "p0.h5")], {})
    check(r.returncode == 0, "probe exits 0")
    a = attrs(os.path.join(d, "p0.h5"))
    c = cores(r)
    if len(c) == 2 and c[0] == "Prescott" and best and best != "Prescott":
        # this machine's OpenBLAS falls back for real (a CPU newer than the
        # library: 0.3.21 on a Sapphire Rapids or Zen 4 it cannot name):
        # trainbench re-ran with the kernels the CPU takes, as part 2 emulates
        check(a.get("blas_kernels") == c[-1] == best,
              f"probe after the library's own fallback records {a.get('blas_kernels')}, Core lines {c}, want {best}")
        check(a.get("blas_kernels_origin") == "chosen by trainbench: OpenBLAS picked Prescott",
              f"origin {a.get('blas_kernels_origin')}")
    else:
        check(len(c) == 1 and a.get("blas_kernels") == c[-1],
              f"probe records the kernels the library loaded: {a.get('blas_kernels')} vs Core lines {c}")
        check(a.get("blas_kernels_origin") == "detected by OpenBLAS", f"origin {a.get('blas_kernels_origin')}")
    check(re.search(r"^# BLAS +OpenBLAS \S+ %s kernels" % re.escape(c[-1] if c else "?"), r.stdout, re.M)
          is not None, "probe prints the BLAS line with the kernels")
    level = {"SkylakeX": "avx512", "Haswell": "avx2", "Zen": "avx2"}.get(best, "baseline")
    check(a.get("cpu_isa_level") == level and ("level %s)" % level) in r.stdout,
          f"vector level {a.get('cpu_isa_level')}, /proc/cpuinfo says {level}")
    gf, peak = a.get("cpu_sgemm_gflops", -1), a.get("cpu_peak_gflops", -1)
    check(gf > 0 and re.search(r"^# sgemm .* GFLOP/s", r.stdout, re.M) is not None, f"sgemm measured: {gf} GFLOP/s")
    # a rate above the peak means the timing or the peak is wrong
    check(peak <= 0 or gf <= 1.05 * peak, f"sgemm {gf} GFLOP/s within the CPU's peak {peak}")
    if best and c and c[-1] != best:
        print(f"note: this machine's OpenBLAS loads {c[-1]}, not {best}: part 2 below is the real case here")
    return c[-1] if c else best


def fallback(tb, d, best):
    emu = {"OPENBLAS_CORETYPE": "Prescott", "TB_TEST_BLAS_FALLBACK": "1"}
    r = run([tb, "probe", "--quick", "--results", os.path.join(d, "p1.h5")], emu)
    check(r.returncode == 0, "probe after a fallback exits 0")
    a, c, n = attrs(os.path.join(d, "p1.h5")), cores(r), notes(r)
    check(c == ["Prescott", best], f"the library loaded Prescott, then {best} after the re-exec: {c}")
    check(a.get("blas_kernels") == best, f"results: blas_kernels {a.get('blas_kernels')}, want {best}")
    check(a.get("blas_kernels_origin") == "chosen by trainbench: OpenBLAS picked Prescott",
          f"results: origin {a.get('blas_kernels_origin')}")
    check(len(n) == 1 and f"re-ran with OPENBLAS_CORETYPE={best}" in n[0], f"exactly one line says so: {n}")

    res = os.path.join(d, "train.h5")
    r = run([tb, "train", "--model", "resnet18", "--image-size", "32", "--batch-size", "2", "--threads", "1",
             "--steps", "2", "--warmup-steps", "0", "--scaling-steps", "0", "--results", res], emu)
    check(r.returncode == 0, "training after a fallback exits 0")
    a = attrs(res)
    check(a.get("blas_kernels") == best and a.get("blas_kernels_origin", "").startswith("chosen by trainbench"),
          f"training results: {a.get('blas_kernels')} ({a.get('blas_kernels_origin')})")
    check(re.search(r"^# cpu: .*BLAS: OpenBLAS \S+ %s kernels \(chosen by trainbench: OpenBLAS picked Prescott\)"
                    % best, r.stdout, re.M) is not None, "the train header names the kernels and who chose them")
    n = notes(r)
    check(len(n) == 1 and f"re-ran with OPENBLAS_CORETYPE={best}" in n[0], f"and one header line says so: {n}")
    # nothing on stderr: a command's error stays one line where the library fell back
    r = run([tb, "report", os.path.join(d, "no-such.h5")], emu)
    e = err_lines(r)
    check(r.returncode != 0 and len(e) == 1 and "cannot read" in e[0] and not notes(r),
          f"a one-line error stays one line after a fallback, and a command without the BLAS says nothing of it: {e}")
    check(a.get("blas_threads_per_call") == 1 and best not in a.get("compute_libraries", best),
          f"one BLAS thread per call ({a.get('blas_threads_per_call')}); compute_libraries without the kernels "
          f"(they may differ between ranks): {a.get('compute_libraries')}")


def user_choice(tb, d, best):
    r = run([tb, "probe", "--quick", "--results", os.path.join(d, "p2.h5")], {"OPENBLAS_CORETYPE": "Prescott"})
    a, c, n = attrs(os.path.join(d, "p2.h5")), cores(r), notes(r)
    check(c == ["Prescott"], f"a user's OPENBLAS_CORETYPE: no re-exec, Prescott loaded: {c}")
    check(a.get("blas_kernels") == "Prescott" and a.get("blas_kernels_origin") == "OPENBLAS_CORETYPE (yours)",
          f"results: {a.get('blas_kernels')} ({a.get('blas_kernels_origin')})")
    want = 1 if best else 0
    check(len(n) == want and (not n or f"can run {best}" in n[0]), f"{want} line(s) about better kernels: {n}")


def two_ranks(tb, mpiexec, d, best, natural):
    if not mpiexec:
        print("note: no mpiexec: the two-rank part is not run")
        return
    env = {"OPENBLAS_CORETYPE": "Prescott", "TB_TEST_BLAS_FALLBACK": "1", "OMPI_ALLOW_RUN_AS_ROOT": "1",
           "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1", "OMPI_MCA_rmaps_base_oversubscribe": "1"}
    r = run([mpiexec, "-n", "2", "-x", "OPENBLAS_CORETYPE", "-x", "TB_TEST_BLAS_FALLBACK", "-x", "OPENBLAS_VERBOSE",
             tb, "preflight", "--threads", "1"], env)
    check(r.returncode == 0, "preflight on 2 ranks exits 0")
    check(len(notes(r)) == 1, f"one line for the job, not one per rank: {notes(r)}")
    rows = re.findall(r"^\s+\d+\s+\S+\s+\d+/\d+\s+.*\s(\S+) \((\w+)\)\s*$", r.stdout, re.M)
    check(len(rows) == 2 and all(k == best for k, _ in rows), f"each rank's kernels in the table: {rows}")
    # ranks on different CPUs run different kernels of the same library: not a launch mistake
    env = {k: v for k, v in env.items() if k.startswith("OMPI_")}
    # (env in the first app context: Open MPI 5 gives a -x inside one to every context)
    r = run([mpiexec, "-n", "1", "env", "OPENBLAS_CORETYPE=Prescott", tb, "preflight", "--threads", "1", ":",
             "-n", "1", tb, "preflight", "--threads", "1"], env)
    rows = re.findall(r"^\s+\d+\s+\S+\s+\d+/\d+\s+.*\s(\S+) \((\w+)\)\s*$", r.stdout, re.M)
    # the second rank's library chooses for itself: what it loaded in part 1 (an AVX-512 BF16 Zen 4 loads
    # Cooperlake, which trainbench keeps: it is not below SkylakeX)
    check(r.returncode == 0 and [k for k, _ in rows] == ["Prescott!", natural],
          f"ranks on other kernels pass the launch check, each shown ('!' below the CPU's): {rows}")


def threads(tb, d):
    ncores = len(os.sched_getaffinity(0))
    base = [tb, "train", "--model", "resnet18", "--image-size", "32", "--batch-size", "2", "--threads", "2",
            "--steps", "1", "--warmup-steps", "0", "--scaling-steps", "0"]
    r = run(base + ["--results", os.path.join(d, "t3.h5")], {"OPENBLAS_NUM_THREADS": "3"})
    t = attrs(os.path.join(d, "t3.h5")).get("blas_threads_per_call")
    check(t == 3, f"a user's OPENBLAS_NUM_THREADS=3 kept: blas_threads_per_call {t}")
    warned = [l for l in r.stderr.splitlines() if "OPENBLAS_NUM_THREADS=3 (yours)" in l]
    workers = min(2, ncores)
    check(len(warned) == (1 if 3 * workers > ncores else 0),
          f"warned iff 3 x {workers} workers > {ncores} cores: {warned}")


def main():
    tb = sys.argv[1]
    mpiexec = sys.argv[2] if len(sys.argv) > 2 else ""
    best = best_kernels()
    print(f"# this CPU can run OpenBLAS's {best or 'generic (no AVX)'} kernels (from /proc/cpuinfo)")
    with tempfile.TemporaryDirectory(prefix="tb_blas_") as d:
        natural = probe_plain(tb, d, best)
        if best:
            fallback(tb, d, best)
            two_ranks(tb, mpiexec, d, best, natural)
        else:
            print("note: no AVX on this CPU: nothing beats the generic kernels, parts 2 and 4 are not run")
        user_choice(tb, d, best)
        threads(tb, d)
    if FAILS:
        print(f"test_blas_kernels: {len(FAILS)} failed")
        sys.exit(1)
    print("test_blas_kernels: OK")


if __name__ == "__main__":
    main()
