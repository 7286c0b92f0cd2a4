#!/usr/bin/python3
"""test_async_step.py - two `trainbench train` runs that must agree, compared
by tests/tb_run_compare (trainbench's own HDF5 reader: no h5py needed, the
GPU machine has none):

  sync-async    the asynchronous step (the CUDA backend's: events, records
                collected later, the device's non-finite flag, lr and grad
                scale preset before the step, labels through a pinned ring)
                run on the CPU backend with --step-mode async, against the
                synchronous step every CPU test uses: bit for bit
  nccl-plain    CUDA: a 1-rank --comm nccl run against the run without
                communication: bit for bit
  staged-plain  CUDA: a 1-rank --comm mpi run (staged through pinned memory)
                against the plain run: bit for bit
  graph-eager   CUDA: --cuda-graph on against off: bit for bit
  wgrad-stream  CUDA, --cuda-graph on: TB_WGRAD_STREAM=on (each conv's weight
                gradient on a second stream beside its data gradient, two
                branches of the captured graph) against off: bit for bit
  stem-pad      CUDA: TB_STEM_PAD=4 (the stem's 3 input channels padded to
                4, another cuDNN kernel summing in another order) against
                off: within --tolerance (and --tensor for the stem alone)
  relu-mask     CUDA, --cuda-graph on, every BatchNorm on the own kernels
                (TB_BN_KERNELS=own): their ReLU mask (TB_BN_RELU_MASK=on)
                against the backward reading y (off): bit for bit
  bn-kernels    CUDA: every BatchNorm on cuDNN's path untimed
                (TB_BN_KERNELS=cudnn) against --bn-kernels own (every one
                on the own kernels) or auto (each timed at start-up, the
                faster kept: its '# cuda bn:' line must say so): within
                --tolerance (other kernels, other rounding)
  convert-many  CUDA, --cuda-graph on: the op weights' refresh in one launch
                (TB_CONVERT_MANY=on) against one conversion a tensor (off):
                bit for bit
  nccl-staged   CUDA, 2 ranks sharing the GPU (--share-gpu; NCCL >= 2.30
                with NCCL_MULTI_RANK_GPU_ENABLE=1): --comm nccl against --comm
                mpi (staged through pinned memory): bit for bit, as a sum of two
                float32 values is the same on both paths (the BN statistics
                broadcast too), scaling rows included (ncclCommSplit)
  bf16-fp32     CUDA, NCCL: --allreduce-dtype bf16 against fp32: within
                --tolerance, and with --momentum-band the momentum alone
                (the hook's cost, printed)
  resident      CPU (resident-cuda: CUDA): the synthetic pool in device
                memory, batches gathered there (--resident on), against
                batches copied from the host (off): bit for bit, scaling
                rows included

  test_async_step.py --trainbench TB --compare TB_RUN_COMPARE [--mpiexec M --ranks N] [--mode ...] ...

The final weights, BatchNorm statistics, counters and momentum (--save) and
every step's loss (/steps) are compared; B's results file must also have
sane phases (non-negative, within the step time), a timed summary per rank,
/devices and /conv_algorithms. Exit 0 on agreement, 1 on a difference, 77
when mpiexec is needed and missing.
"""
import argparse
import atexit
import os
import re
import shutil
import subprocess
import sys
import tempfile


def run(cmd, env=None):
    print("+ " + " ".join(cmd), flush=True)
    r = subprocess.run(cmd, env=env, capture_output=True, text=True)
    print(r.stdout[-2500:])
    if r.returncode != 0:
        print(r.stderr[-3000:])
        print(f"FAIL: exit {r.returncode}")
        sys.exit(1)
    return r.stdout


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--trainbench", required=True)
    ap.add_argument("--compare", required=True, help="tests/tb_run_compare")
    ap.add_argument("--mpiexec", default="")
    ap.add_argument("--ranks", type=int, default=1)
    ap.add_argument("--last-batch", default="drop")
    ap.add_argument("--synthetic-size", type=int, default=40)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--image-size", type=int, default=32)
    ap.add_argument("--steps", type=int, default=7)
    ap.add_argument("--model", default="resnet18")
    ap.add_argument("--mode", default="sync-async",
                    choices=["sync-async", "nccl-plain", "graph-eager", "staged-plain", "bf16-fp32", "resident",
                             "resident-cuda", "nccl-staged", "wgrad-stream", "stem-pad", "relu-mask",
                             "convert-many", "bn-kernels"],
                    help="which two runs: sync vs async step (CPU); on CUDA: --comm nccl vs no comm, "
                         "--cuda-graph on vs off, --comm mpi (staged) vs no comm, bf16 vs fp32 wire, "
                         "TB_WGRAD_STREAM on vs off, TB_STEM_PAD=4 vs off, TB_BN_RELU_MASK on vs off (own "
                         "BatchNorm kernels), TB_CONVERT_MANY on vs off, TB_BN_KERNELS=cudnn vs --bn-kernels")
    ap.add_argument("--bn-kernels", default="own", choices=["own", "auto"],
                    help="bn-kernels: the second run's TB_BN_KERNELS")
    ap.add_argument("--extra", default="", help="more train flags for both runs")
    ap.add_argument("--tolerance", type=float, default=0.0,
                    help="largest relative L2 difference of the weights allowed (0: bit-identical)")
    ap.add_argument("--momentum-band", nargs=2, type=float, metavar=("LO", "HI"),
                    help="the momentum alone must differ by a relative L2 in (LO, HI] (tb_run_compare)")
    ap.add_argument("--tensor", nargs=2, metavar=("NAME", "T"),
                    help="one parameter's values and momentum, each within a relative L2 T (tb_run_compare)")
    ap.add_argument("--expect-line", default="",
                    help="a regular expression both runs' output must match (a switch under test took effect)")
    a = ap.parse_args()
    if a.ranks > 1 and not a.mpiexec:
        print("SKIP: no mpiexec (trainbench built without MPI)")
        sys.exit(77)
    base = [a.trainbench, "--model", a.model, "--image-size", str(a.image_size), "--batch-size", str(a.batch),
            "--synthetic-size", str(a.synthetic_size), "--steps", str(a.steps),
            "--warmup-steps", str(min(2, a.steps - 1)),
            "--last-batch", a.last_batch, "--scaling-steps", "2", "--scaling-warmup", "1", "--print-every", "3",
            "--timeout", "120"] + a.extra.split()
    cpu = a.mode == "sync-async"
    if cpu:
        base += ["--backend", "cpu", "--threads", "1"]
        pair = (("sync", ["--step-mode", "sync"]), ("async", ["--step-mode", "async"]))
    elif a.mode in ("resident", "resident-cuda"):
        base += ["--backend", "cpu", "--threads", "1"] if a.mode == "resident" else ["--backend", "cuda"]
        pair = (("host", ["--resident", "off"]), ("resident", ["--resident", "on"]))
    elif a.mode == "nccl-plain":
        base += ["--backend", "cuda"]
        pair = (("plain", ["--cuda-graph", "off"]), ("nccl", ["--comm", "nccl", "--cuda-graph", "off"]))
    elif a.mode == "staged-plain":
        base += ["--backend", "cuda"]
        pair = (("plain", ["--cuda-graph", "off"]), ("staged", ["--comm", "mpi"]))
    elif a.mode == "nccl-staged":
        base += ["--backend", "cuda", "--share-gpu", "--cuda-graph", "off"]
        pair = (("staged", ["--comm", "mpi"]), ("nccl", ["--comm", "nccl"]))
    elif a.mode == "bf16-fp32":
        base += ["--backend", "cuda", "--comm", "nccl"]
        pair = (("fp32", []), ("bf16", ["--allreduce-dtype", "bf16"]))
    elif a.mode == "wgrad-stream":
        base += ["--backend", "cuda", "--cuda-graph", "on", "--graph-warmup", "2"]
        pair = (("serial", []), ("branched", []))
    elif a.mode == "stem-pad":
        base += ["--backend", "cuda"]
        pair = (("plain", []), ("padded", []))
    elif a.mode == "bn-kernels":
        base += ["--backend", "cuda"]
        pair = (("cudnn-bn", []), (a.bn_kernels + "-bn", []))
    elif a.mode in ("relu-mask", "convert-many"):
        base += ["--backend", "cuda", "--cuda-graph", "on", "--graph-warmup", "2"]
        pair = (("switch-off", []), ("switch-on", []))
    else:
        base += ["--backend", "cuda"]
        pair = (("eager", ["--cuda-graph", "off"]), ("graph", ["--cuda-graph", "on", "--graph-warmup", "2"]))
    envs = {"serial": dict(os.environ, TB_WGRAD_STREAM="off"), "branched": dict(os.environ, TB_WGRAD_STREAM="on"),
            "plain": dict(os.environ, TB_STEM_PAD="off"), "padded": dict(os.environ, TB_STEM_PAD="4")}
    if a.mode == "relu-mask":
        envs = {n: dict(os.environ, TB_BN_KERNELS="own", TB_BN_RELU_MASK=v) for n, v in
                (("switch-off", "off"), ("switch-on", "on"))}
    if a.mode == "bn-kernels":
        envs = {"cudnn-bn": dict(os.environ, TB_BN_KERNELS="cudnn"),
                a.bn_kernels + "-bn": dict(os.environ, TB_BN_KERNELS=a.bn_kernels)}
    if a.mode == "convert-many":
        envs = {n: dict(os.environ, TB_CONVERT_MANY=v) for n, v in (("switch-off", "off"), ("switch-on", "on"))}
    launch = [a.mpiexec, "-n", str(a.ranks)] if a.ranks > 1 else []
    tmp = tempfile.mkdtemp(prefix="tb_async_")
    atexit.register(shutil.rmtree, tmp, True)  # removed at exit, passed or failed
    out = {}
    for name, flags in pair:
        ck, res = os.path.join(tmp, f"{name}.ckpt.h5"), os.path.join(tmp, f"{name}.h5")
        text = run(launch + base + flags + ["--save", ck, "--results", res], envs.get(name))
        out[name] = (ck, res, text)
    if a.mode == "wgrad-stream":
        said = [re.search(r"^# wgrad stream: on; ([0-9]+) convolutions' weight gradients on a second stream",
                          out[n][2], re.M) for n, _ in pair]
        if said[0] or not said[1] or int(said[1].group(1)) == 0:
            print("FAIL: the line '# wgrad stream: on; N convolutions' ...' with N > 0 must be in the branched "
                  "run alone: serial %s, branched %s" % tuple(m.group(0) if m else "none" for m in said))
            sys.exit(1)
        print("# branched run: %s convolutions' weight gradients on the second stream" % said[1].group(1))
    if a.mode == "stem-pad":
        said = [re.search(r"^# cuda conv: the 7x7/2 conv with 3 input channels reads them padded to 4 ", out[n][2], re.M)
                for n, _ in pair]
        if said[0] or not said[1]:
            print("FAIL: the line '# cuda conv: the 7x7/2 conv with 3 input channels reads them padded to 4' must be "
                  "in the padded run alone: plain %s, padded %s" % tuple("yes" if m else "no" for m in said))
            sys.exit(1)
        print("# padded run: the stem reads its input padded to 4 channels")
    if a.mode == "bn-kernels":
        said = [re.search(r"^# cuda bn: ([0-9]+) BatchNorms? timed on cuDNN's path and on the own kernels .*: ([0-9]+) "
                          r"run on the own kernels", out[n][2], re.M) for n, _ in pair]
        timed = a.bn_kernels == "auto"
        if said[0] or bool(said[1]) != timed or (timed and int(said[1].group(1)) == 0):
            print("FAIL: the line '# cuda bn: N BatchNorms timed ...' (N > 0) must be in the %s: cudnn %s, %s %s"
                  % ("auto run alone" if timed else "output of neither run", "yes" if said[0] else "no",
                     a.bn_kernels, said[1].group(0) if said[1] else "no"))
            sys.exit(1)
        if timed:
            print("# auto run: %s BatchNorms timed, %s of them on the own kernels" % said[1].groups())
    if a.expect_line:
        said = [bool(re.search(a.expect_line, out[n][2], re.M)) for n, _ in pair]
        if not all(said):
            print("FAIL: '%s' must be in both runs' output: %s" % (a.expect_line, said))
            sys.exit(1)
        print("# both runs: '%s'" % a.expect_line)
    if a.mode in ("graph-eager", "wgrad-stream", "relu-mask", "convert-many"):
        # the attribute says only that nothing blocked the graph: B must have replayed steps from it
        m = re.search(r"^# cuda graph: on; ([0-9]+) training steps replayed", out[pair[1][0]][2], re.M)
        if not m or int(m.group(1)) == 0:
            print("FAIL: the graph run replayed no step from its CUDA graph (%s)"
                  % (m.group(0) if m else "no '# cuda graph: on; N training steps replayed' line"))
            sys.exit(1)
        print("# graph run: %s training steps replayed from its CUDA graph" % m.group(1))
    if a.mode.startswith("resident"):
        said = ["data resident on the device" in out[n][2] for n, _ in pair]
        if said != [False, True]:
            print(f"FAIL: the header line 'data resident on the device' in (off, on): {said}")
            sys.exit(1)
    (na, (cka, ra, _)), (nb, (ckb, rb, _)) = [(n, out[n]) for n, _ in pair]
    print(f"# comparing {na} (A) with {nb} (B)")
    cmp = [a.compare, cka, ckb, ra, rb, "--tolerance", str(a.tolerance)]
    if a.momentum_band:
        cmp += ["--momentum-band"] + [repr(v) for v in a.momentum_band]
    if cpu:
        cmp += ["--attr", "step_mode=async"]
    if a.mode in ("graph-eager", "wgrad-stream", "relu-mask", "convert-many"):
        cmp += ["--attr", "cuda_graph=on"]
    if a.tensor:
        cmp += ["--tensor"] + a.tensor
    if a.mode == "nccl-plain":
        cmp += ["--attr", "comm_path=nccl"]
    if a.mode == "staged-plain":
        cmp += ["--attr", "comm_path=mpi-staged"]
    if a.mode == "nccl-staged":
        cmp += ["--attr", "comm_path=nccl"]
    print("+ " + " ".join(cmp), flush=True)
    rc = subprocess.run(cmp).returncode
    print(f"# test_async_step {a.mode}: {'ok' if rc == 0 else 'FAILED'}")
    sys.exit(0 if rc == 0 else 1)


if __name__ == "__main__":
    main()
