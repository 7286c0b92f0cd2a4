#!/usr/bin/env python3
"""projection_tables.py - the markdown of bench/project_h200.sh: trainbench
project's stored projections (.proj.h5, /projection) of one run, as tables
labelled projected, with the published rows of a TSV file beside them and
the differences computed (nothing typed: every number comes from the .proj.h5
files, the run file or the TSV).

  projection_tables.py --run RUN.h5 --published published.tsv --proj A.proj.h5 ... [--command TEXT]

published.tsv: fabric, ranks, efficiency (0..1), what-if ("" or e.g.
batch=0.2, as given to --what-if), what, source, why (tab-separated; #
comments). Exit 1 when a published row has no projection to stand beside
(a fabric, rank count or what-if column the script did not project).
"""
import argparse
import math
import sys

import h5py


def s(v):
    return v.decode() if isinstance(v, bytes) else str(v)


def whatif_key(change):
    """--what-if item -> the /projection column prefix (projection_report.c's naming)."""
    if not change:
        return ""
    k, _, v = change.partition("=")
    if k == "batch":
        return "if_batch_x" + v.replace(".", "_")
    if k == "bucket":
        return "if_bucket_" + v
    return "if_" + change.replace("-", "_").replace("=", "_").replace(".", "_")


def load_proj(path):
    with h5py.File(path, "r") as f:
        p = {k: f["projection"][k][()] for k in f["projection"]}
        a = {k: s(v) for k, v in f.attrs.items() if k.startswith("projection_")}
    a["fabric_name"] = a["projection_fabric"].split(":")[0]
    return p, a


def load_published(path):
    rows = []
    with open(path) as f:
        for line in f:
            if not line.strip() or line.startswith("#"):
                continue
            c = line.rstrip("\n").split("\t")
            if len(c) != 7:
                sys.exit(f"{path}: want 7 tab-separated columns, got {len(c)}: {line!r}")
            rows.append({"fabric": c[0], "ranks": int(c[1]), "eff": float(c[2]), "whatif": c[3], "what": c[4],
                         "source": c[5], "why": c[6]})
    return rows


def fmt(v, d=1):
    return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:,.{d}f}"


def whatif_columns(p):
    cols = sorted({k[:-len("_efficiency")] for k in p if k.startswith("if_") and k.endswith("_efficiency")})
    return cols


def label(col):
    t = col[3:]
    if t.startswith("batch_x"):
        return "batch x" + t[7:].replace("_", ".")
    return {"bf16": "bf16 grads", "no_overlap": "overlap off", "no_bn_broadcast": "BN broadcast off"}.get(
        t, t.replace("_", " "))


def row_index(p, n):
    for i, r in enumerate(p["ranks"]):
        if int(r) == n:
            return i
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--run", required=True)
    ap.add_argument("--published", required=True)
    ap.add_argument("--proj", nargs="+", required=True)
    ap.add_argument("--command", default="")
    a = ap.parse_args()
    with h5py.File(a.run, "r") as f:
        run = {k: s(v) for k, v in f.attrs.items()}
    projs = [load_proj(x) for x in a.proj]
    pub = load_published(a.published)
    first = projs[0][1]
    ready = first["projection_ready_source"]
    out = []
    w = out.append
    w("# ResNet-50 on real fabrics, projected from one GPU's measured step (issue 26)")
    w("")
    w("**Projected, not measured**: `trainbench project` (src/project/projection.h: alpha-beta all-reduce costs of "
      "each gradient bucket, launched as backward finishes its gradients, what stays exposed after backward) "
      "applied to one rank's measured step. Made by `" + (a.command or "bench/projection_tables.py") +
      "`; every number below comes from the `.proj.h5` files beside this one, the run file and "
      "`published.tsv`.")
    w("")
    w(f"- run: `{a.run}` ({run.get('device_names', '?')}; `{run.get('command_line', '?')}`; trainbench "
      f"{run.get('trainbench_version', '?')} {run.get('git_revision', '')}; NCCL {run.get('nccl_version', '?')})")
    w(f"- its step as the projection reads it: {first['projection_profile']}")
    w(f"- gradient-ready times: {ready}")
    if "ESTIMATED" in ready:
        w("")
        w("> The stored run has no device-event bucket times (`/grad_ready` and `/buckets` come only with "
          "`--scaling-steps`, and it ran with `--scaling-steps 0`): the projections below place each gradient's "
          "readiness by the model's per-layer work over the measured backward time, not by measurement. The GPU "
          "suite's `nccl` stage now records a 1-rank timeline from CUDA events (`keep/nccl/timeline_1rank.h5`); "
          "`bench/project_h200.sh` on that file replaces this estimate.")
    w("")
    for p, at in projs:
        cols = whatif_columns(p)
        w(f"## {at['fabric_name']} (projected)")
        w("")
        w(f"{at['projection_fabric']}. Sources: {at['projection_fabric_source']}. "
          f"Command: `{at['projection_command_line']}`.")
        w("")
        head = ["ranks", "nodes", "algorithm", "all-reduce per step (ms)", "exposed (ms)", "step (ms)", "img/s",
                "efficiency, projected (%)"] + [f"{label(c)} (%)" for c in cols] + ["published"]
        w("| " + " | ".join(head) + " |")
        w("|" + "|".join(["--:"] * (len(head) - 1) + ["---"]) + "|")
        for i, n in enumerate(p["ranks"]):
            n = int(n)
            pubs = [r for r in pub if r["fabric"] == at["fabric_name"] and r["ranks"] == n]
            pcell = "; ".join(f"{100 * r['eff']:.1f} % {('(' + r['whatif'] + ') ') if r['whatif'] else ''}"
                              f"{r['what']}" for r in pubs) or ""
            algo = p["algo"][i]
            algo = s(algo) if not isinstance(algo, (int, float)) else str(algo)
            cells = [str(n), str(int(p["nodes"][i])), algo if n > 1 else "-",
                     fmt(float(p["comm_ms"][i]), 2) if n > 1 else "-", fmt(float(p["exposed_ms"][i]), 2),
                     fmt(float(p["step_ms"][i]), 2), fmt(float(p["img_per_s"][i]), 0),
                     fmt(100 * float(p["efficiency"][i]), 1)]
            cells += [fmt(100 * float(p[c + "_efficiency"][i]), 1) for c in cols]
            w("| " + " | ".join(cells + [pcell]) + " |")
        w("")
    # the published rows beside the projection
    w("## Published rows beside the projection")
    w("")
    w("Implied step: the N-rank step the published efficiency means for this run's 1-rank step "
      "(T1 / efficiency, at the compared column's per-rank batch); the rest of it is what the fabric model "
      "does not explain.")
    w("")
    w("| published row | source | fabric, ranks | compared column | projected (%) | published (%) | "
      "difference (points) | projected step (ms) | implied step (ms) | not explained by the fabric (ms per step) |")
    w("|---|---|---|---|--:|--:|--:|--:|--:|--:|")
    missing = 0
    whys = []
    for r in pub:
        hit = [(p, at) for p, at in projs if at["fabric_name"] == r["fabric"]]
        i = row_index(hit[0][0], r["ranks"]) if hit else None
        key = whatif_key(r["whatif"])
        if not hit or i is None or (key and key + "_efficiency" not in hit[0][0]):
            print(f"projection_tables.py: no projection for {r['fabric']} at {r['ranks']} ranks"
                  f"{' (' + r['whatif'] + ')' if r['whatif'] else ''}", file=sys.stderr)
            missing += 1
            continue
        p = hit[0][0]
        eff = float(p[(key or "") + ("_efficiency" if key else "efficiency")][i])
        ips = float(p[(key + "_img_per_s") if key else "img_per_s"][i])
        batch_scale = float(r["whatif"].split("=")[1]) if r["whatif"].startswith("batch=") else 1.0
        batch = float(run.get("batch_size", "nan")) * batch_scale
        step_n = 1e3 * r["ranks"] * batch / ips          # projected N-rank step at that batch (ms)
        step_1 = eff * step_n                           # its 1-rank step
        implied = step_1 / r["eff"]
        w(f"| {r['what']} | {r['source']} | {r['fabric']}, {r['ranks']} | {r['whatif'] or 'as run'} | "
          f"{100 * eff:.1f} | {100 * r['eff']:.1f} | {100 * (r['eff'] - eff):+.1f} | {step_n:.2f} | {implied:.2f} | "
          f"{implied - step_n:.2f} |")
        whys.append(f"- **{r['what']}**: {r['why']}")
    w("")
    w("Why they differ:")
    w("")
    out.extend(whys)
    w("")
    w("What the model leaves out on every row (so a projection is a ceiling set by the fabric, not a forecast): "
      "the input pipeline and the host, NCCL's kernels taking SMs from the compute kernels while buckets "
      "overlap backward, compute that does not shrink linearly with the per-GPU batch, evaluation, link "
      "rates below the datasheet's (NCCL reaches 80-95 % of them), and NVLink SHARP (NVLS, NCCL's default "
      "all-reduce in an H100/H200 node: ~480 GB/s bus bandwidth on 8 GPUs where its ring reaches ~370 of the "
      "450 GB/s line rate, NVIDIA/nccl-tests#212; the presets' line rate lies between). This run's classes and data are those of "
      "its command line, not ImageNet's 1,000 classes (a smaller fc layer: fewer gradient bytes).")
    print("\n".join(out))
    sys.exit(1 if missing else 0)


if __name__ == "__main__":
    main()
