#!/usr/bin/python3
"""test_resilience.py - failures end the job in bounded time with a message,
and no work is lost beyond the last checkpoint (issue 7).

Modes (one ctest each):
  killed   mpirun -np 3, rank 1 SIGKILLed at step 5
  frozen   mpirun -np 3, rank 2 stops answering (SIGSTOP) at step 5
  early    mpirun -np 3, rank 1 exits 0 at step 5 without a word
  early-late-pong  as early, and ranks 0 and 2 answer each other's pings in
           the launcher's teardown just after the ping window closed (a
           watchdog off the CPU on a loaded host): each still names rank 1
           alone
    -> every other rank prints one line naming the failed rank, its host and
       the step; the job exits non-zero within --timeout + GRACE seconds of
       the failure (timed from rank 0's progress line of the step before it,
       so a slow start-up on a busy machine does not count); rank 0's results
       file says status "aborted" with the reason and keeps the steps run.
  nan      mpirun -np 2, a NaN in the gradients at step 3: every rank stops
           with the step and the tensor's name; results "aborted".
  resume   mpirun -np 2 over an mkdata set: run A trains 16 steps straight
           (crossing an epoch); run B is killed at step 14 and resumed from
           its step-12 checkpoint; B's losses for steps 12-15 and its final
           weights, momentum and BN statistics equal A's bit for bit.
  ckptkill one rank, SIGKILL half-way through writing the step-8
           checkpoint: the step-4 checkpoint is still there and loads.
  ckptterm one rank, SIGTERM half-way through writing the step-8
           checkpoint: exit 143, the results file "aborted" (not left
           "running"), a whole checkpoint and no temporary file.
  killed-bwd, frozen-bwd, nccl-abort   (issue 26, the GPU suite: 2 ranks
           sharing a GPU over NCCL, --ranks 2 --extra "--backend cuda --comm
           nccl --share-gpu ...", --timeout 20 --grace 30): rank 1 SIGKILLed
           or SIGSTOPped inside backward once a bucket's all-reduce is
           queued, or aborting its NCCL communicators there (an NCCL
           asynchronous error for the peer where the transport notices, a
           collective that never completes where it does not): the job ends
           as above, naming the rank, its host, the step and (nccl-abort) the
           collective.
Every failure mode also checks that no process of the job is left (by the
run's unique results path on their command lines).
Fault injection: TB_TEST_FAULT (core/faults.h), test only.

Every check prints "ok" or "FAIL" with what it saw; a missing or unreadable
file is a FAIL line, and any other error of the test itself is reported as
one FAIL line, never a bare traceback.
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
import traceback

try:
    import h5py
    import numpy as np
except ImportError as e:
    print(f"SKIP: {e} (install python3-h5py)")
    sys.exit(77)

TIMEOUT = 5        # --timeout given to trainbench (--timeout)
GRACE = 15         # start-up, the abort and mpirun's teardown on a loaded 2-core machine (--grace)
ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
           OMPI_MCA_rmaps_base_oversubscribe="1")
SMALL = ["--image-size", "32", "--batch-size", "4", "--threads", "1", "--scaling-steps", "0",
         "--timeout", str(TIMEOUT)]
failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        failures.append(what)


def run(cmd, env=None, expect_rc=0):
    print("+ " + " ".join(cmd), flush=True)
    t0 = time.time()
    r = subprocess.run(cmd, env=env or ENV, capture_output=True, text=True)
    dt = time.time() - t0
    out = r.stdout + r.stderr
    if expect_rc is not None and r.returncode != expect_rc:
        print(out[-4000:])
        check(False, f"exit status {r.returncode}, expected {expect_rc}")
    return r.returncode, out, dt


def run_streamed(cmd, env):
    """Runs cmd, noting when each output line arrives. Returns the exit
    status, the output, the time it ended and {line: arrival time}."""
    print("+ " + " ".join(cmd), flush=True)
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines, seen = [], {}
    for line in p.stdout:
        seen.setdefault(line.strip(), time.time())
        lines.append(line)
    rc = p.wait()
    return rc, "".join(lines), time.time(), seen


def results_of(path):
    """(status, abort_reason, steps) of a results file, or None after a FAIL
    line saying why it cannot be read."""
    if not os.path.exists(path):
        left = [n for n in os.listdir(os.path.dirname(path)) if ".tmp." in n]
        check(False, f"rank 0 left a results file ({path} does not exist; "
              f"{'temporaries ' + str(left) if left else 'not even a temporary'}): rank 0 was killed "
              "before its first write")
        return None
    try:
        with h5py.File(path, "r") as f:
            st = f.attrs.get("status", "(no status attribute)")
            return (st.decode() if isinstance(st, bytes) else str(st), str(f.attrs.get("abort_reason", "")),
                    len(f["steps/step"]) if "steps/step" in f else 0)
    except Exception as e:  # an unreadable file is a finding, not a crash of the test
        check(False, f"the results file {path} reads ({type(e).__name__}: {e})")
        return None


def left_behind(marker):
    """PIDs of processes whose command line holds marker (this job's unique path)."""
    pids = []
    for p in os.listdir("/proc"):
        if not p.isdigit() or int(p) == os.getpid():
            continue
        try:
            with open(f"/proc/{p}/cmdline", "rb") as f:
                if marker.encode() in f.read():
                    pids.append(int(p))
        except OSError:
            pass
    return pids


def failure_mode(a, fault, culprit, survivors, words, reason_ranks=None, said=None):
    """words: a regular expression after 'rank CULPRIT (host) '; said: the whole watchdog message
    instead (a regular expression after 'error: watchdog: '); reason_ranks: the ranks the results file's
    abort reason may name (default: the culprit)."""
    fail_step = int(fault.split(":")[2])
    with tempfile.TemporaryDirectory() as d:
        res = os.path.join(d, "run.h5")
        env = dict(ENV, TB_TEST_FAULT=fault)
        t0 = time.time()
        rc, out, t_end, seen = run_streamed([a.mpiexec, "-n", str(a.ranks), "-x", "TB_TEST_FAULT", a.trainbench,
                                             "--steps", "40", *SMALL, *a.extra.split(), "--print-every", "1",
                                             "--results", res], env)
        print("\n".join(l for l in out.splitlines() if "error" in l or "warning" in l))
        check(rc != 0, f"the job exits non-zero (exit {rc})")
        # rank 0 prints "step N/40" when N steps are done, just before step N
        # (0-based) starts and the fault fires
        mark = next((t for l, t in seen.items() if re.match(rf"step +{fail_step}/40 ", l)), None)
        if mark is None:
            check(False, f"rank 0 reported step {fail_step} before the failure (no 'step {fail_step}/40' line; "
                  f"the job ended {t_end - t0:.1f} s after it started)")
        else:
            check(t_end - mark < TIMEOUT + GRACE,
                  f"it ends within --timeout + {GRACE} s of the failure ({t_end - mark:.1f} s after step "
                  f"{fail_step} began; {t_end - t0:.1f} s in all)")
        time.sleep(1)  # mpirun has returned: its ranks must be gone (a moment for the kernel to reap them)
        stay = left_behind(d)
        check(not stay, f"no process of the job is left ({stay or 'none'})")
        for p in stay:  # ours: they hold this test's temporary directory on their command line
            try:
                os.kill(p, 9)
            except OSError:
                pass
        for r in survivors:
            pat = rf"trainbench\[rank {r} [^]]*\]: error: watchdog: " + (said or rf".*rank {culprit} \([^)]+\) {words}.*step")
            m = re.search(pat, out)
            check(m is not None, f"rank {r} names rank {culprit}, its host and the step"
                  + (f": {m.group(0)[:220]}" if m else ""))
        got = results_of(res)
        if got is None:
            return
        st, why, n = got
        if st != "aborted" or why.startswith("snapshot of "):
            check(False, f"results say aborted with the reason ({st}: {why[:100]}: rank 0 was killed before it "
                  f"could mark the file; it holds the snapshot of {n} steps)")
        else:
            named = reason_ranks or (culprit,)
            check(st == "aborted" and any(f"rank {q}" in why for q in named),
                  f"results say aborted, naming rank {' or '.join(map(str, named))} ({st}: {why[:150]})")
        check(n >= 4, f"results keep the {n} steps measured before the failure")


def mode_nan(a):
    with tempfile.TemporaryDirectory() as d:
        res = os.path.join(d, "run.h5")
        env = dict(ENV, TB_TEST_FAULT="nan:0:3")
        rc, out, _ = run([a.mpiexec, "-n", "2", "-x", "TB_TEST_FAULT", a.trainbench, "--steps", "10",
                          *SMALL, "--results", res], env=env, expect_rc=None)
        check(rc != 0, f"the job exits non-zero (exit {rc})")
        for r in (0, 1):
            pat = rf"trainbench\[rank {r} [^]]*\]: error: train: step 3: the gradient of conv1.weight holds 1 NaN/Inf"
            check(re.search(pat, out) is not None, f"rank {r} names step 3 and conv1.weight")
        got = results_of(res)
        if got is not None:
            st, why, n = got
            check(st == "aborted" and "conv1.weight" in why and n == 3, f"results aborted after 3 steps ({st}, {n})")


def weights(path):
    with h5py.File(path) as f:
        return {f"{g}/{k}": f[g][k][()] for g in ("params", "momentum") for k in f[g]}


def mode_resume(a):
    with tempfile.TemporaryDirectory() as d:
        p = lambda n: os.path.join(d, n)
        run([a.trainbench, "mkdata", "--out", p("data"), "--classes", "4", "--per-class", "24",
             "--seed", "5", "--min-side", "64", "--max-side", "96"])
        common = [a.mpiexec, "-n", "2", a.trainbench, "--data", p("data"), "--steps", "16",
                  *SMALL, "--loader-threads", "2", "--ckpt-every", "6", "--warmup-steps", "0"]
        run(common + ["--ckpt", p("a.ckpt"), "--save", p("a.h5"), "--results", p("a_res.h5")])
        env = dict(ENV, TB_TEST_FAULT="kill:0:14")
        rc, out, _ = run(common[:3] + ["-x", "TB_TEST_FAULT"] + common[3:] +
                         ["--ckpt", p("b.ckpt"), "--results", p("b_dead.h5")], env=env, expect_rc=None)
        check(rc != 0, f"run B was killed at step 14 (exit {rc})")
        with h5py.File(p("b.ckpt")) as f:
            check(int(f.attrs["step"]) == 12, f"its newest checkpoint is step {int(f.attrs['step'])} (12)")
        rc, out, _ = run(common + ["--ckpt", p("b.ckpt"), "--resume", "--save", p("b.h5"),
                                   "--results", p("b_res.h5")])
        check("resuming from" in out and "at step 12" in out, "run B resumed at step 12")
        with h5py.File(p("a_res.h5")) as fa, h5py.File(p("b_res.h5")) as fb:
            la = dict(zip(fa["steps/step"][()].tolist(), fa["steps/loss"][()].tolist()))
            lb = dict(zip(fb["steps/step"][()].tolist(), fb["steps/loss"][()].tolist()))
            check(sorted(lb) == list(range(12, 16)), f"the resumed run did steps {sorted(lb)}")
            check(all(la[s] == lb[s] for s in lb), "its losses equal the uninterrupted run's exactly: "
                  + ", ".join(f"{s}: {la[s]:.6f}/{lb[s]:.6f}" for s in sorted(lb)))
        wa, wb = weights(p("a.h5")), weights(p("b.h5"))
        same = [k for k in wa if np.array_equal(wa[k], wb[k])]
        check(len(same) == len(wa) == len(wb), f"final params and momentum bit-identical ({len(same)}/{len(wa)})")
        with h5py.File(p("a.h5")) as fa, h5py.File(p("b.h5")) as fb:
            bn = [k for k in fa["params"] if "running" in k or "num_batches" in k]
            check(all(np.array_equal(fa["params"][k][()], fb["params"][k][()]) for k in bn),
                  f"BN statistics and counters bit-identical ({len(bn)} tensors)")


def mode_ckptkill(a):
    with tempfile.TemporaryDirectory() as d:
        ck = os.path.join(d, "run.ckpt")
        env = dict(ENV, TB_TEST_FAULT="kill-in-ckpt:0:8")
        rc, out, _ = run([a.trainbench, "--steps", "12", *SMALL, "--ckpt", ck, "--ckpt-every", "4",
                          "--results", ""], env=env, expect_rc=None)
        check(rc != 0, f"killed while writing the step-8 checkpoint (exit {rc})")
        leftovers = [n for n in os.listdir(d) if ".tmp." in n]
        check(len(leftovers) == 1, f"the half-written file is a temporary ({leftovers})")
        with h5py.File(ck) as f:
            check(int(f.attrs["step"]) == 4, f"the checkpoint is still step 4 ({int(f.attrs['step'])})")
        rc, out, _ = run([a.ckpt_copy, ck, os.path.join(d, "copy.h5")])
        check(rc == 0, "it loads with every validation (tb_ckpt_copy)")
        rc, out, _ = run([a.trainbench, "--steps", "6", *SMALL, "--ckpt", ck, "--resume", "--results", ""])
        check(rc == 0 and "at step 4" in out, "and training resumes from it")
        said = [ln for ln in out.splitlines() if ln.startswith("# --ckpt: '%s/%s' (" % (d, leftovers[0]))
                and "is an unfinished write of '%s' by process " % ck in ln
                and "; the file itself is whole: " in ln] if leftovers else []
        check(len(said) == 1, "the resumed run names the unfinished write with its size: %r" % said)


def no_temporary_whole_checkpoint(d, ck):
    """After an end during the step-8 checkpoint: no NAME.tmp.PID in d, and ck the step-4 or step-8 one, whole."""
    leftovers = [n for n in os.listdir(d) if ".tmp." in n]
    check(not leftovers, f"no temporary file is left ({leftovers})")
    with h5py.File(ck) as f:
        step = int(f.attrs["step"])
        check(step in (4, 8) and len(f["params"]) > 0, f"the checkpoint is a whole one (step {step})")


def mode_ckptterm(a):
    with tempfile.TemporaryDirectory() as d:
        ck, res = os.path.join(d, "run.ckpt"), os.path.join(d, "run.h5")
        env = dict(ENV, TB_TEST_FAULT="term-in-ckpt:0:8")
        rc, out, _ = run([a.trainbench, "--steps", "40", *SMALL, "--ckpt", ck, "--ckpt-every", "4",
                          "--results", res], env=env, expect_rc=None)
        check(rc == 128 + 15, f"SIGTERM half-way through the step-8 checkpoint: the run ends with 143 "
              f"(exit {rc})")
        check("stopped by SIGTERM" in out and "not marked" not in out,
              f"one line says so, no warning that the results file was left unmarked: {out.strip()[-400:]!r}")
        with h5py.File(res) as f:
            st, why = f.attrs["status"], str(f.attrs.get("abort_reason", ""))
            check(st == "aborted" and "SIGTERM" in why, f"the results file is marked aborted ({st}: {why})")
        no_temporary_whole_checkpoint(d, ck)


def ckpt_run_np2(a, d, ck, fault, steps):
    """2 ranks under mpiexec with TB_TEST_FAULT=fault, a checkpoint every 4 steps at ck: (exit status, output)."""
    env = dict(ENV, TB_TEST_FAULT=fault)
    rc, out, _ = run([a.mpiexec, "-n", "2", "-x", "TB_TEST_FAULT", a.trainbench, "--steps", str(steps), *SMALL,
                      "--ckpt", ck, "--ckpt-every", "4", "--results", os.path.join(d, "run.h5")], env=env,
                     expect_rc=None)
    return rc, out


def mode_ckptterm_np2(a):
    """The same SIGTERM on 2 ranks: the watchdog ends the job (mpirun forwards a job's SIGTERM to every rank),
    not tb_abort, and must remove the checkpoint's temporary too (it left one, 8 MB here, before)."""
    with tempfile.TemporaryDirectory() as d:
        ck = os.path.join(d, "run.ckpt")
        rc, out = ckpt_run_np2(a, d, ck, "term-in-ckpt:0:8", 40)
        check(rc != 0 and "the launcher is ending the job (SIGTERM) at step 8, in checkpoint" in out,
              f"the watchdog ends the job at the step-8 checkpoint (exit {rc}): {out.strip()[-300:]!r}")
        check(out.count("results file not marked") <= 1, "at most one line says the results file was not marked "
              f"(the watchdog's early mark said it too): {out.count('results file not marked')}")
        no_temporary_whole_checkpoint(d, ck)


def mode_ckptslow_np2(a):
    """Rank 0's checkpoint write outlasting --timeout (a slow file system: stall-ckpt sleeps --timeout + 1 s):
    the job ends on every rank with the line naming rank 0 in its checkpoint and what to do, and the watchdog's end
    leaves no temporary file."""
    with tempfile.TemporaryDirectory() as d:
        ck = os.path.join(d, "run.ckpt")
        rc, out = ckpt_run_np2(a, d, ck, "stall-ckpt:0:4", 6)
        said = [ln for ln in out.splitlines() if "rank 0 (" in ln and "has not joined the checkpoint verdict "
                "broadcast of step 4" in ln and ln.endswith("in checkpoint; if that is only slow (a file system, "
                                                            "a data loader), raise --timeout")]
        check(rc != 0 and len(said) == 2, f"both ranks say rank 0 is slow in its checkpoint and to raise --timeout "
              f"(exit {rc}, {len(said)} lines): {out.strip()[-400:]!r}")
        leftovers = [n for n in os.listdir(d) if ".tmp." in n]
        check(not leftovers, f"no temporary file is left ({leftovers})")


def main():
    global TIMEOUT, GRACE
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["killed", "frozen", "early", "early-late-pong", "nan", "resume", "ckptkill", "ckptterm",
                                     "ckptterm_np2", "ckptslow_np2",
                                     "killed-bwd", "frozen-bwd", "nccl-abort"])
    ap.add_argument("--trainbench", required=True)
    ap.add_argument("--mpiexec", default="")
    ap.add_argument("--ckpt-copy", default="")
    ap.add_argument("--ranks", type=int, default=3, help="ranks of the failure modes")
    ap.add_argument("--extra", default="", help="more train flags for the failure modes (the GPU suite's)")
    ap.add_argument("--timeout", type=float, default=TIMEOUT, help="trainbench's --timeout")
    ap.add_argument("--grace", type=float, default=GRACE, help="seconds beyond --timeout the job may take to end")
    a = ap.parse_args()
    TIMEOUT, GRACE = a.timeout, a.grace
    SMALL[SMALL.index("--timeout") + 1] = f"{a.timeout:g}"
    last = a.ranks - 1
    if a.mode not in ("ckptkill", "ckptterm") and not a.mpiexec:
        print("SKIP: needs mpiexec (trainbench built without MPI)")
        sys.exit(77)
    try:
        others = lambda c: tuple(r for r in range(a.ranks) if r != c)
        if a.mode == "killed":
            failure_mode(a, "kill:1:5", 1, others(1), "is gone")
        elif a.mode == "frozen":
            failure_mode(a, f"freeze:{last}:5", last, others(last), "stopped answering")
        elif a.mode == "early":
            failure_mode(a, "exit0:1:5", 1, others(1), "is gone")
        elif a.mode == "early-late-pong":
            failure_mode(a, "exit0-late-pong:1:5", 1, others(1), "is gone")
        elif a.mode == "killed-bwd":
            failure_mode(a, "kill-bwd:1:5", 1, others(1), "is gone")
        elif a.mode == "frozen-bwd":
            failure_mode(a, "freeze-bwd:1:5", 1, others(1), "stopped answering")
        elif a.mode == "nccl-abort":
            # rank 1 aborts its communicator inside backward: rank 0's collective never completes (named by
            # the watchdog as rank 1 not joining it) or fails with NCCL's asynchronous error (rank 0 names
            # its own communicator's error): either way the collective, the step and a host are named
            failure_mode(a, "nccl-abort:1:5", 1, (0,), "", reason_ranks=(0, 1),
                         said=r"(.*rank 1 \([^)]+\) has not joined the NCCL all-reduce of bucket [0-9]+ of step "
                              r"[0-9]+|rank 0 \([^)]+\): (NCCL|CUDA) reports .*at step [0-9]+)")
        elif a.mode == "nan":
            mode_nan(a)
        elif a.mode == "resume":
            mode_resume(a)
        elif a.mode == "ckptterm":
            mode_ckptterm(a)
        elif a.mode == "ckptterm_np2":
            mode_ckptterm_np2(a)
        elif a.mode == "ckptslow_np2":
            mode_ckptslow_np2(a)
        else:
            mode_ckptkill(a)
    except Exception as e:  # the test's own error: one FAIL line, never a traceback
        check(False, f"the test ran to its end ({type(e).__name__}: {e}, at "
              f"{traceback.extract_tb(e.__traceback__)[-1].lineno} of {os.path.basename(__file__)})")
    print(f"# {a.mode}: {len(failures)} failed check(s)")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
