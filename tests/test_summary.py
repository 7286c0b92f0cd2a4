#!/usr/bin/env python3
"""test_summary.py: bench/summary on the stored GPU runs (ctest
results_summaries and results_pages_figures; stdlib only, about a second).

  summaries  every results/gpu_*/ run with a summary.tsv: the stored file is
             what make_summary.py gives from that run's logs now (no figure
             edited by hand or gone stale), its keys unique, its lines
             key<TAB>value<TAB>unit<TAB>source log with a source that exists;
             the headline figures the pages quote are there (7182.1 img/s,
             the 30 of 32 and 32 of 32 test counts, ...); and the extractors
             on a made-up run in the new bench layout (rows.tsv with a header,
             repeats, loss at start and end).
  pages      bench/summary/check_pages.py passes every results/gpu_*.md
             and README.md against the runs, and fails planted errors: the
             1.44x this page once had for 6606 / 4279, a rate changed in a
             table (7182 -> 7128), a rate changed in the prose, one changed
             in a README table cell; results/README.md is checked too.
"""
import argparse
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SUMMARY = os.path.join(ROOT, "bench", "summary")
sys.path.insert(0, SUMMARY)
import check_pages  # noqa: E402
import make_summary  # noqa: E402

FAILS = []


def check(ok, what):
    print("%-4s %s" % ("ok" if ok else "FAIL", what), flush=True)
    if not ok:
        FAILS.append(what)


def runs():
    return sorted(d for d in glob.glob(os.path.join(ROOT, "results", "gpu_*")) if os.path.isdir(d))


def test_stored():
    for run in runs():
        path = os.path.join(run, "summary.tsv")
        name = os.path.basename(run)
        if not os.path.isfile(path):
            check(False, "%s has a summary.tsv" % name)
            continue
        stored = open(path).read()
        check(stored == make_summary.render(make_summary.summarize(run)),
              "%s/summary.tsv is what its logs give (bench/summary/make_summary.py %s)" % (name, name))
        rows = make_summary.read_summary(path)
        missing = [k for k, (_v, _u, src) in rows.items() if not os.path.exists(os.path.join(run, src))]
        check(not missing, "%s: every source log exists (%d figures)%s" % (name, len(rows),
                                                                          ": " + missing[0] if missing else ""))
    want = {
        "gpu_h200_2026-11-27": {"resnet50/trainbench/bf16/nhwc/256/graph/img_per_s": "7182.1",
                                "resnet50/pytorch_eager/bf16/nhwc/128/-/img_per_s": "4278.7",
                                "tests/ctest_gpu/passed": "30", "tests/ctest_gpu/total": "32",
                                "train/tb_bf16_nhwc_256_graph/loss_end": "2.0847",
                                "train/tb_bf16_nhwc_256_graph/classes": "10"},
        "gpu_h200_2026-11-27_rerun": {"tests/ctest_gpu/passed": "32",
                                      "resnet50/trainbench/tf32/nhwc/256/graph/img_per_s": "3128.6",
                                      "train/scaling_shared_gpu_mpi/scaling/1ranks/img_per_s": "5808.54"},
        "gpu_h100_2026-11-27": {"resnet50/trainbench/bf16/nhwc/256/graph/img_per_s": None}}
    for name, keys in want.items():
        path = os.path.join(ROOT, "results", name, "summary.tsv")
        rows = make_summary.read_summary(path) if os.path.isfile(path) else {}
        for k, v in keys.items():
            got = rows.get(k, (None,))[0]
            check(got is not None and (v is None or got == v), "%s: %s = %s (got %s)" % (name, k, v or "a value", got))


def test_new_layout():
    """The bench's new rows.tsv (a header, repeats, loss) and a training log, in a made-up run."""
    d = tempfile.mkdtemp(prefix="tb_summary_")
    try:
        os.makedirs(os.path.join(d, "resnet50"))
        cols = ("framework", "precision", "layout", "batch", "graph", "img_per_s", "img_per_s_min", "img_per_s_max",
                "spread_pct", "repeats", "timed_s", "ms_per_step", "h2d_ms", "peak_mib", "wall_s", "loss_start",
                "loss_end", "classes", "command")
        with open(os.path.join(d, "resnet50", "rows.tsv"), "w") as f:
            f.write("\t".join(cols) + "\n")
            f.write("\t".join(("trainbench", "bf16", "nhwc", "256", "on (300 replays)", "7180.5", "7170.0", "7190.2",
                               "0.28", "3", "10.7", "35.65", "0.25", "14139", "41", "6.9312", "6.1021", "1000",
                               "trainbench --results /x/resnet50/tb_bf16_nhwc_256_graph_r1.h5")) + "\n")
            # the A/B row with every BatchNorm on the own kernels: a key of its own, not the graph row's "#2"
            f.write("\t".join(("trainbench", "bf16", "nhwc", "256", "on (300 replays), TB_BN_KERNELS=own", "7000.0",
                               "-", "-", "-", "1", "10.7", "36.57", "0.25", "14139", "41", "6.9312", "6.1021",
                               "1000", "env TB_BN_KERNELS=own trainbench --results /x/resnet50/tb_x_r1.h5")) + "\n")
            # the fused row with the weight gradients on a second stream: its own key too
            f.write("\t".join(("trainbench", "fp16", "nhwc", "256", "on (300 replays), fuse graph, TB_WGRAD_STREAM=on",
                               "7900.0", "-", "-", "-", "1", "10.7", "32.41", "0.25", "14139", "41", "6.9312",
                               "6.1021", "1000",
                               "env TB_WGRAD_STREAM=on trainbench --fuse graph --results /x/resnet50/tb_y_r1.h5"))
                    + "\n")
            # --fuse fastest: a key of its own, not the plain row's "#2" nor the fused one's
            f.write("\t".join(("trainbench", "bf16", "nhwc", "256", "on (300 replays), fuse fastest", "7250.0",
                               "-", "-", "-", "1", "10.7", "35.31", "0.25", "14139", "41", "6.9312", "6.1021",
                               "1000", "trainbench --fuse fastest --results /x/resnet50/tb_v_r1.h5")) + "\n")
            # the stem padded where faster, and a row that names TB_STEM_PAD=off: only the first gets +stempad
            f.write("\t".join(("trainbench", "fp16", "nhwc", "256", "on (300 replays), TB_STEM_PAD=auto", "7800.0",
                               "-", "-", "-", "1", "10.7", "32.82", "0.25", "14139", "41", "6.9312", "6.1021",
                               "1000", "env TB_STEM_PAD=auto trainbench --results /x/resnet50/tb_z_r1.h5")) + "\n")
            f.write("\t".join(("trainbench", "fp16", "nhwc", "128", "on (300 replays), TB_STEM_PAD=off", "7100.0",
                               "-", "-", "-", "1", "10.7", "18.03", "0.25", "9000", "41", "6.9312", "6.1021",
                               "1000", "env TB_STEM_PAD=off trainbench --results /x/resnet50/tb_w_r1.h5")) + "\n")
        with open(os.path.join(d, "resnet50", "tb_z_r1.log"), "w") as f:
            f.write("# cuda conv: the 7x7/2 conv with 3 input channels reads them padded to 4 (measured, pads "
                    "included: 3: 2.861 ms, 4: 0.713 ms, 8: 0.802 ms)\n")
        with open(os.path.join(d, "resnet50", "tb_bf16_nhwc_256_graph_r1.log"), "a") as f:
            f.write("# cuda bn: 53 BatchNorms timed on cuDNN's path and on the own kernels (forward + backward at "
                    "batch 256; 0 from the plan cache): 31 run on the own kernels; a step's BatchNorms 14.210 ms as "
                    "chosen, 17.012 ms all on cuDNN's, 15.330 ms all on the own\n")
        with open(os.path.join(d, "resnet50", "tb_w_r1.log"), "w") as f:
            f.write("# cuda conv: the 7x7/2 conv with 3 input channels stays on 3 (measured, pads included: "
                    "3: 1.100 ms, 4: 1.300 ms, 8: not measured)\n")
        with open(os.path.join(d, "resnet50", "tb_bf16_nhwc_256_graph_r1.log"), "a") as f:
            f.write("# trainbench train: resnet50, 1000 classes, 1 rank, backend cuda (16 threads/rank), bf16\n"
                    "# 25557032 parameters, 24.6 GFLOP per image per step\n"
                    "# training: 305 steps, loss 6.9312 -> 6.1021, 7180.50 img/s (176126.2 GFLOP/s) over 300 "
                    "timed steps\n")
        rows = {k: (v, u, s) for k, v, u, s in make_summary.summarize(d)}
        k = "resnet50/trainbench/bf16/nhwc/256/graph/"
        check(rows.get(k + "img_per_s", ("",))[0] == "7180.5" and rows[k + "repeats"][0] == "3" and
              rows[k + "loss_end"][0] == "6.1021" and rows[k + "img_per_s"][2] == "resnet50/tb_bf16_nhwc_256_graph_r1.log",
              "new rows.tsv: median img/s, repeats, loss at the end, cited from the row's log")
        check(rows.get(k + "bn_timed", ("",))[0] == "53" and rows.get(k + "bn_own", ("",))[0] == "31" and
              rows.get(k + "bn_ms_chosen", ("",))[0] == "14.210" and
              rows.get(k + "bn_ms_cudnn", ("",))[0] == "17.012" and
              rows.get(k + "bn_ms_own", ("",))[0] == "15.330" and
              rows[k + "bn_ms_own"][2] == "resnet50/tb_bf16_nhwc_256_graph_r1.log",
              "the BatchNorms' timing line: nodes timed, on the own kernels, a step's BatchNorms each way, cited")
        check("resnet50/trainbench/fp16/nhwc/256/graph+stempad/bn_timed" not in rows, "no timing line, no bn rows")
        ko = "resnet50/trainbench/bf16/nhwc/256/graph+ownbn/img_per_s"
        check(rows.get(ko, ("",))[0] == "7000.0" and not any(k.startswith("resnet50/trainbench/bf16/nhwc/256/graph#2")
                                                          for k in rows),
              "the TB_BN_KERNELS=own row under graph+ownbn, apart from the graph row")
        check(rows.get("resnet50/trainbench/fp16/nhwc/256/graph+fused+wgrad/img_per_s", ("",))[0] == "7900.0",
              "the TB_WGRAD_STREAM=on fused row under graph+fused+wgrad")
        check(rows.get("resnet50/trainbench/bf16/nhwc/256/graph+fastest/img_per_s", ("",))[0] == "7250.0",
              "the --fuse fastest row under graph+fastest")
        check(rows.get("resnet50/trainbench/fp16/nhwc/256/graph+stempad/img_per_s", ("",))[0] == "7800.0" and
              rows.get("resnet50/trainbench/fp16/nhwc/128/graph/img_per_s", ("",))[0] == "7100.0",
              "the TB_STEM_PAD=auto row under graph+stempad; TB_STEM_PAD=off adds no suffix")
        kp, kq = "resnet50/trainbench/fp16/nhwc/256/graph+stempad/", "resnet50/trainbench/fp16/nhwc/128/graph/"
        check(rows.get(kp + "stem_channels", ("",))[0] == "4" and rows.get(kp + "stem_ms_3", ("",))[0] == "2.861" and
              rows.get(kp + "stem_ms_4", ("",))[0] == "0.713" and rows.get(kp + "stem_ms_8", ("",))[0] == "0.802" and
              rows[kp + "stem_ms_4"][2] == "resnet50/tb_z_r1.log",
              "the stem's line: what ran (4 channels) and each measured time, cited from the row's log")
        check(rows.get(kq + "stem_channels", ("",))[0] == "3" and rows.get(kq + "stem_ms_4", ("",))[0] == "1.300" and
              kq + "stem_ms_8" not in rows,
              "a stem kept on 3 channels: 3, and no time where none was measured")
        check(not any(k.startswith("resnet50/trainbench/bf16/nhwc/256/graph/stem") for k in rows),
              "a log without the line adds no stem keys")
        check(rows.get("train/resnet50/tb_bf16_nhwc_256_graph_r1/classes", ("",))[0] == "1000" and
              rows.get("train/resnet50/tb_bf16_nhwc_256_graph_r1/parameters", ("",))[0] == "25557032",
              "training log: what was trained (1000 classes, 25557032 parameters)")
    finally:
        shutil.rmtree(d)


def test_golden_lines():
    """The golden tests' step lines in ctest's whole logs: the fp32/tf32 rule's and the 16-bit amp rule's,
    a ratio that reads inf, and one test in two logs of a call (its second run's keys numbered)."""
    d = tempfile.mkdtemp(prefix="tb_summary_golden_")
    try:
        os.makedirs(os.path.join(d, "keep"))
        log = ("1/2 Test: golden_cuda_bf16_resnet18\n"
               "# step 1: ok: amp rule: worst err/bound 0.412 (grads/fc.weight), median err/floor over gradients "
               "0.93; 41 s\n"
               "2/2 Test: golden_cuda_fp32_resnet18\n"
               "# step 2: ok: trainbench 0 flip(s); plain rule: worst err/bound 0.0213 (grads/fc.bias), worst "
               "err/floor inf (grads/fc.bias)\n")
        for name in ("ctest-full-a-LastTest.log", "ctest-full-b-LastTest.log"):
            with open(os.path.join(d, "keep", name), "w") as f:
                f.write(log)
        rows = {k: v for k, v, _u, _s in make_summary.summarize(d)}
        amp = "golden/golden_cuda_bf16_resnet18/step1/"
        check(rows.get(amp + "err_over_bound") == "0.412" and rows.get(amp + "median_err_over_floor") == "0.93",
              "the amp rule's step line: worst err/bound and the median (%s)" % rows.get(amp + "err_over_bound"))
        check(rows.get("golden/golden_cuda_fp32_resnet18/step2/err_over_floor") == "inf",
              "a ratio of inf is kept (%s)" % rows.get("golden/golden_cuda_fp32_resnet18/step2/err_over_floor"))
        check(rows.get(amp + "err_over_bound#2") == "0.412", "the same test in a second log: its keys numbered #2")
    finally:
        shutil.rmtree(d)


def results_files():
    """The CPU runs' results files, whose efficiencies results/README.md and README.md quote."""
    return sorted(glob.glob(os.path.join(ROOT, "results", "*.h5")) +
                  glob.glob(os.path.join(ROOT, "results", "multihost", "*.h5")))


def quiet_check(page, runs_):
    """check_pages on one page, its output kept: (ok, text)."""
    r = subprocess.run([sys.executable, os.path.join(SUMMARY, "check_pages.py"), page, "--runs"] + runs_ +
                       ["--h5"] + results_files(),
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True)
    return r.returncode == 0, r.stdout


def test_pages():
    runs_ = runs()
    # the READMEs' measured figures too (their tables quote them in prose cells)
    pages = sorted(glob.glob(os.path.join(ROOT, "results", "gpu_*.md"))) + [
        os.path.join(ROOT, "README.md"), os.path.join(ROOT, "results", "README.md")]
    for p in pages:
        ok, out = quiet_check(p, runs_)
        check(ok, "%s: every checked figure found and every ratio right\n%s" % (os.path.basename(p), out.strip()))
    h200 = os.path.join(ROOT, "results", "gpu_h200_2026-11-27.md")
    text = open(h200).read()
    page = lambda name: open(os.path.join(ROOT, "results", name)).read()   # noqa: E731
    plants = [("1.54x PyTorch eager at batch 128", "1.44x PyTorch eager at batch 128", "WRONG ratio 1.44x"),
              ("| **7182** |", "| **7128** |", "NOT FOUND 7128"),
              ("feed 6509 img/s", "feed 6590 img/s", "NOT FOUND 6590"),
              # percentages: an efficiency in prose (a results file's), in a table's efficiency column, and a
              # share of the resident rate that another kind of % figure (a wait share, 97.6) holds; the
              # efficiency plant too is a figure of another kind (a feed row's wait share)
              ("96.7 % weak-scaling efficiency", "97.6 % weak-scaling efficiency", "NOT FOUND 97.6 %", "README.md"),
              ("| 84.1 % | 37.6 % |", "| 86.1 % | 37.6 % |", "NOT FOUND 86.1 %", "gpu_h200_2026-12-04b.md"),
              # the measured column after it, a list of efficiencies, a projected one in prose
              ("| 84.1 % | 37.6 % |", "| 84.1 % | 73.6 % |", "NOT FOUND 73.6 %", "gpu_h200_2026-12-04b.md"),
              ("51 % / 32 % at 1 Gbit/s", "11 % / 32 % at 1 Gbit/s", "NOT FOUND 11 %", "README.md"),
              ("(98.9 % at", "(18.9 % at", "NOT FOUND 18.9 %", "gpu_h200_2026-12-04b.md"),
              ("99.8 % of the same call's resident", "97.6 % of the same call's resident", "NOT FOUND 97.6 %",
               "gpu_h200_2026-12-04c.md"),
              # an efficiency of the other kind: the measured 37.6 % in the predicted column and in a clause
              # about projected efficiencies, the predicted 84.1 % in the measured column
              ("| 84.1 % | 37.6 % |", "| 37.6 % | 37.6 % |", "NOT FOUND 37.6 % (projected", "gpu_h200_2026-12-04b.md"),
              ("(98.9 % at", "(37.6 % at", "NOT FOUND 37.6 % (prose (projected)", "gpu_h200_2026-12-04b.md"),
              ("| 84.1 % | 37.6 % |", "| 84.1 % | 84.1 % |", "NOT FOUND 84.1 % (measured", "gpu_h200_2026-12-04b.md")]
    d = tempfile.mkdtemp(prefix="tb_pages_")
    try:
        for good, bad, expect, *name in plants:
            src = page(name[0]) if name else text
            if good not in src:
                check(False, "the planted error's anchor %r is on the page" % good)
                continue
            p = os.path.join(d, "planted.md")
            with open(p, "w") as f:
                f.write(src.replace(good, bad, 1))
            ok, out = quiet_check(p, runs_)
            check(not ok and expect in out, "planted %r -> %r: check_pages fails with %r" % (good, bad, expect))
    finally:
        shutil.rmtree(d)
    # a rate in a table cell of a column that names no unit (the README's "figure" column)
    readme = open(os.path.join(ROOT, "README.md")).read()
    m = re.search(r"\| [^|\n]*?\bfp16 (\d+\.\d+) img/s", readme)   # a rate in the figures table's text
    if not m:
        check(False, "the README's table quotes an fp16 rate to plant an error in")
    else:
        good = "fp16 %s img/s" % m.group(1)
        bad = "fp16 %.2f img/s" % (float(m.group(1)) + 360.0)
        d = tempfile.mkdtemp(prefix="tb_pages_readme_")
        try:
            p = os.path.join(d, "README.md")
            with open(p, "w") as f:
                f.write(readme.replace(good, bad, 1))
            ok, out = quiet_check(p, runs_)
            check(not ok and "NOT FOUND " + bad.split()[1] in out,
                  "planted %r -> %r in the README's table: check_pages fails" % (good, bad))
        finally:
            shutil.rmtree(d)
    check(check_pages.ratio_ok("1.54", 6606, 4279) and not check_pages.ratio_ok("1.44", 6606, 4279),
          "ratio_ok: 6606 / 4279 is 1.54, not 1.44")
    # a table whose ratios are over its first 1.00 row, with a later row near it that prints 1.00 too
    d = tempfile.mkdtemp(prefix="tb_pages_base_")
    try:
        run = os.path.join(d, "run")
        os.makedirs(run)
        with open(os.path.join(run, "summary.tsv"), "w") as f:
            f.write(make_summary.HEADER + "\n")
            for k, v in (("a", "2410"), ("b", "7230"), ("c", "2398")):
                f.write("resnet50/%s/img_per_s\t%s\timg/s\tx.log\n" % (k, v))
        page = os.path.join(d, "page.md")
        table = "| row | img/s | x eager |\n|---|---:|---:|\n| eager | 2410 | 1.00 |\n| tb | 7230 | %s |\n| eager 400 | 2398 | 1.00 |\n"
        for ratio, want_ok in (("3.00", True), ("3.02", False)):
            with open(page, "w") as f:
                f.write("# page\n\n" + table % ratio)
            ok, out = quiet_check(page, [run])
            check(ok == want_ok, "a table's ratio %s over its first 1.00 row (2410), not a later one (2398): %s"
                  % (ratio, "passes" if want_ok else "fails"))
    finally:
        shutil.rmtree(d)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("part", choices=("summaries", "pages"))
    a = ap.parse_args(argv)
    if a.part == "summaries":
        test_stored()
        test_new_layout()
        test_golden_lines()
    else:
        test_pages()
    print("# test_summary %s: %s" % (a.part, "PASS" if not FAILS else "%d FAILED" % len(FAILS)))
    return 0 if not FAILS else 1


if __name__ == "__main__":
    sys.exit(main())
