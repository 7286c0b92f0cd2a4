#!/usr/bin/env python3
"""torch_resnet50.py: the PyTorch baseline trainbench's GPU benchmark stands
beside. torchvision's resnet50 (1000 classes) trained with SGD (momentum
0.9, weight decay 5e-5, trainbench's defaults) on a fixed random batch
resident on the device, under trainbench's schedule (src/train/lr_schedule.c:
--lr per 256 images scaled to the batch, linear warm-up over
--lr-warmup-steps, cosine to 0 at the last step; --label-smoothing;
--zero-init-residual), timed the way trainbench times (warm-up steps left
out, then img/s over timed steps, the device synchronised at both ends),
for each configuration:

  precision  fp32 (TF32 off everywhere), tf32 (cuDNN and matmul TF32 on),
             bf16 (autocast), fp16 (autocast + GradScaler)
  layout     nchw, nhwc (channels_last memory format, model and input)
  mode       eager, or compile (torch.compile, default mode)

cudnn.benchmark is on (trainbench also picks algorithms by measurement).
--min-seconds S: after the warm-up, 5 steps are timed to size the timed
part, which then runs at least S seconds (more steps than --steps when
needed). Prints one `#` table and, with --json FILE, one JSON object per
row (img/s, ms/step, timed steps and seconds, the loss at the first and
the last step, peak allocated and reserved memory).

--profile N: after a row's timed steps (which it leaves alone), N more
steps under torch.profiler; their CUDA kernel time, per step, summed into
the op categories of bench/op_kinds.py (the vocabulary trainbench's
--op-profile uses), with the kernels it could not map and each category's
top kernels (so the name patterns can be fixed on the GPU), printed as a
`#` table and, with --profile-json FILE, appended as one JSON object per
row. With --device cpu the CPU ops' self times are used instead (a smoke
test of the aggregation: there is no kernel on the CPU).

  python3 bench/torch_resnet50.py --batch 256 --precision bf16 --layout nhwc
  python3 bench/torch_resnet50.py --device cpu --batch 2 --image 64 --steps 2 --warmup 1   # a smoke run
  python3 bench/torch_resnet50.py --batch 256 --profile 5 --profile-json prof.jsonl     # + op categories
"""
import argparse
import json
import math
import os
import sys
import time

import torch
import torchvision

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import op_kinds  # noqa: E402  (bench/op_kinds.py, beside this file)


def profile_steps(args, step, sync, cuda, row):
    """args.profile more steps under torch.profiler: time per op category."""
    from torch.profiler import ProfilerActivity, profile
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    n = args.profile
    sync()
    t0 = time.perf_counter()
    with profile(activities=acts) as prof:
        for _ in range(n):
            step()
        sync()
    wall_ms = 1e3 * (time.perf_counter() - t0) / n
    items = []
    if cuda:  # device kernels (and copies, memsets) in launch order: one stream
        evs = [e for e in prof.events() if "CUDA" in str(getattr(e, "device_type", ""))]
        evs.sort(key=lambda e: e.time_range.start)
        items = [(e.name, float(e.time_range.end - e.time_range.start)) for e in evs]
        source = "CUDA kernel time (torch.profiler device events)"
    else:  # CPU ops' self time, each with its ancestors (leaf first)
        for e in prof.events():
            names, p = [e.name], e.cpu_parent
            while p is not None:
                names.append(p.name)
                p = p.cpu_parent
            items.append((names, float(e.self_cpu_time_total)))
        source = "CPU op self time (no kernels on the CPU)"
    by_cat, unmatched = op_kinds.aggregate(items, n)
    total = sum(v["ms_per_step"] for v in by_cat.values())
    return {
        "framework": "pytorch", "torch": torch.__version__, "device": row["device"], "mode": row["mode"],
        "precision": row["precision"], "layout": row["layout"], "batch": row["batch"], "image": row["image"],
        "profile_steps": n, "source": source, "ms_per_step_timed": row["ms_per_step"],
        "ms_per_step_profiled_wall": wall_ms, "ms_per_step_ops": total,
        "by_category": by_cat, "unmatched": unmatched[:10],
    }


def print_profile(p):
    print(f"# PyTorch op profile: {p['profile_steps']} steps, {p['source']}, ms per step; {p['mode']} "
          f"{p['precision']} {p['layout']} batch {p['batch']}")
    print(f"# {'category':<12} {'ms/step':>9} {'share':>6} {'calls/step':>10}  top kernel or op")
    tot = p["ms_per_step_ops"] or float("nan")
    for cat in op_kinds.CATEGORIES:
        v = p["by_category"].get(cat)
        if v:
            top = v["top"][0][0] if v["top"] else ""
            print(f"  {cat:<12} {v['ms_per_step']:9.3f} {100 * v['ms_per_step'] / tot:6.1f} "
                  f"{v['calls_per_step']:10.1f}  {top[:100]}")
    print(f"# ops: {p['ms_per_step_ops']:.3f} ms per step; wall under the profiler {p['ms_per_step_profiled_wall']:.3f} "
          f"ms; timed without it {p['ms_per_step_timed']:.3f} ms")
    if p["unmatched"]:
        print("# not mapped to a category (in 'other'), largest first:")
        for name, ms, calls in p["unmatched"]:
            print(f"#   {ms:9.3f} ms/step {calls:7.1f} calls/step  {name[:160]}")
    sys.stdout.flush()


def backward_step(loss, opt, scaler):
    """loss.backward() and the optimizer step, through GradScaler when given
    (bench/convergence.py uses it too)."""
    if scaler:
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
    else:
        loss.backward()
        opt.step()


def one(args, batch, precision, layout, mode):
    dev = torch.device(args.device)
    cuda = dev.type == "cuda"
    tf32 = precision == "tf32"
    if cuda:
        torch.backends.cudnn.benchmark = True
        torch.backends.cuda.matmul.allow_tf32 = tf32
        torch.backends.cudnn.allow_tf32 = tf32
        torch.cuda.reset_peak_memory_stats()
        torch.cuda.empty_cache()
    torch.manual_seed(1)
    model = torchvision.models.resnet50(num_classes=args.classes,
                                        zero_init_residual=args.zero_init_residual).to(dev)
    fmt = torch.channels_last if layout == "nhwc" else torch.contiguous_format
    model = model.to(memory_format=fmt)
    peak_lr = args.lr * batch / 256.0
    opt = torch.optim.SGD(model.parameters(), lr=peak_lr, momentum=0.9, weight_decay=5e-5)
    x = torch.randn(batch, 3, args.image, args.image, device=dev).to(memory_format=fmt)
    y = torch.randint(0, args.classes, (batch,), device=dev)
    amp_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision)
    scaler = None
    if precision == "fp16" and cuda:  # torch.amp.GradScaler("cuda") since 2.3; torch.cuda.amp's is deprecated
        scaler = torch.amp.GradScaler("cuda") if hasattr(torch.amp, "GradScaler") else torch.cuda.amp.GradScaler()
    lossf = torch.nn.CrossEntropyLoss(label_smoothing=args.label_smoothing)
    step_model = model
    if mode == "compile":
        if not hasattr(torch, "compile"):
            return {"error": f"torch {torch.__version__} has no torch.compile"}
        step_model = torch.compile(model)

    done = [0]   # steps taken: the schedule's position
    total = [args.warmup + args.steps]

    def step():
        k, w = done[0], args.lr_warmup_steps
        lr = peak_lr * (k + 1) / w if k < w else \
            0.5 * peak_lr * (1 + math.cos(math.pi * min(1.0, (k - w) / max(1, total[0] - w))))
        for g in opt.param_groups:
            g["lr"] = lr
        done[0] += 1
        opt.zero_grad(set_to_none=True)
        if amp_dtype is not None:
            with torch.autocast(device_type=dev.type, dtype=amp_dtype):
                loss = lossf(step_model(x), y)
        else:
            loss = lossf(step_model(x), y)
        backward_step(loss, opt, scaler)
        return loss

    def sync():
        if cuda:
            torch.cuda.synchronize()

    t_warm = time.perf_counter()
    loss_start = None
    for _ in range(args.warmup):
        loss = step()
        if loss_start is None:
            loss_start = float(loss)
    sync()
    warm_s = time.perf_counter() - t_warm
    steps = args.steps
    if args.min_seconds > 0:   # size the timed part: 5 steps timed first (they train on)
        t_cal = time.perf_counter()
        for _ in range(5):
            loss = step()
        sync()
        per = (time.perf_counter() - t_cal) / 5
        steps = max(steps, int(math.ceil(1.1 * args.min_seconds / per)))
        total[0] = args.warmup + 5 + steps
    t0 = time.perf_counter()
    for _ in range(steps):
        loss = step()
        if loss_start is None:
            loss_start = float(loss)
    sync()
    dt = time.perf_counter() - t0
    row = {
        "framework": "pytorch", "torch": torch.__version__, "mode": mode, "precision": precision,
        "layout": layout, "batch": batch, "image": args.image, "steps": steps, "timed_s": dt,
        "img_per_s": batch * steps / dt, "ms_per_step": 1e3 * dt / steps,
        "warmup_s": warm_s, "loss_start": loss_start, "final_loss": float(loss), "classes": args.classes,
        "peak_alloc_gib": torch.cuda.max_memory_allocated() / 2**30 if cuda else float("nan"),
        "peak_reserved_gib": torch.cuda.max_memory_reserved() / 2**30 if cuda else float("nan"),
        "device": torch.cuda.get_device_name() if cuda else "cpu",
    }
    if args.profile > 0:
        try:
            p = profile_steps(args, step, sync, cuda, row)
            print_profile(p)
            if args.profile_json:
                with open(args.profile_json, "a") as f:
                    f.write(json.dumps(p) + "\n")
        except Exception as e:  # the profile must not cost the row its timing
            row["profile_error"] = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
            print(f"# profile failed: {row['profile_error']}")
    del model, opt, step_model
    return row


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--batch", default="256", help="comma list")
    ap.add_argument("--precision", default="bf16", help="comma list of fp32,tf32,bf16,fp16")
    ap.add_argument("--layout", default="nhwc", help="comma list of nchw,nhwc")
    ap.add_argument("--mode", default="eager", help="comma list of eager,compile")
    ap.add_argument("--image", type=int, default=224)
    ap.add_argument("--classes", type=int, default=1000)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--min-seconds", type=float, default=0,
                    help="time at least this long (steps sized from 5 steps after the warm-up)")
    ap.add_argument("--lr", type=float, default=0.1, help="peak lr per 256 images (trainbench's --lr)")
    ap.add_argument("--lr-warmup-steps", type=int, default=10, help="linear lr warm-up steps (trainbench's)")
    ap.add_argument("--label-smoothing", type=float, default=0.0)
    ap.add_argument("--zero-init-residual", action="store_true", help="each block's last BN gamma starts at 0")
    ap.add_argument("--json", help="append one JSON object per row")
    ap.add_argument("--profile", type=int, default=0,
                    help="after each row's timed steps, N more under torch.profiler: time by op category")
    ap.add_argument("--profile-json", help="append each row's op profile as one JSON object")
    args = ap.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        print("SKIP: no CUDA device for PyTorch")
        sys.exit(77)
    rows = []
    print(f"# PyTorch {torch.__version__} torchvision {torchvision.__version__}, ResNet-50 {args.image}px, "
          f"{args.warmup} warm-up + {args.steps} timed steps, data resident on the device")
    print(f"# {'mode':>8} {'precision':>9} {'layout':>6} {'batch':>5} {'img/s':>9} {'ms/step':>8} "
          f"{'peak GiB':>8} {'warm-up s':>9}")
    for mode in args.mode.split(","):
        for precision in args.precision.split(","):
            for layout in args.layout.split(","):
                for batch in (int(b) for b in args.batch.split(",")):
                    try:
                        r = one(args, batch, precision, layout, mode)
                    except RuntimeError as e:  # out of memory and the like: a row that says so
                        r = {"error": str(e).splitlines()[0]}
                        if args.device == "cuda":
                            torch.cuda.empty_cache()
                    r.update({"mode": mode, "precision": precision, "layout": layout, "batch": batch})
                    rows.append(r)
                    if "error" in r:
                        print(f"  {mode:>8} {precision:>9} {layout:>6} {batch:>5}  error: {r['error'][:90]}")
                    else:
                        print(f"  {mode:>8} {precision:>9} {layout:>6} {batch:>5} {r['img_per_s']:9.1f} "
                              f"{r['ms_per_step']:8.2f} {r['peak_alloc_gib']:8.2f} {r['warmup_s']:9.1f}")
                    sys.stdout.flush()
                    if args.json:
                        with open(args.json, "a") as f:
                            f.write(json.dumps(r) + "\n")
    sys.exit(0 if all("error" not in r for r in rows) else 1)


if __name__ == "__main__":
    main()
