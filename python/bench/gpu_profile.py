"""The GPU figures of docs/costmodel.md ("On a GPU"): a GPT-2 124M-shaped model profiled
on the GPU, compared with the analytic profile of the card, calibrated, and a real
training step of the whole model against the profile's sum.

    python python/bench/gpu_profile.py --out DIR [--device cuda] [--base h100]
                                       [--batch 8] [--seq 1024] [--repeats 20]

For each configuration (bf16 at block and at module granularity, fp32 at block
granularity) it writes DIR/gpt2-<dtype>-<granularity>.json (the measured workload) and
DIR/<base>-<dtype>-calibrated.toml (the fitted device file), and prints:

- the card, driver, torch and transformers versions;
- `dnnplace.calibrate`'s summary: base (datasheet) and fitted efficiencies and launch
  overhead, the per-unit error before and after, the whole model's error;
- a real step: forward, loss and backward of the whole model (`steps` timed after
  warm-up, median), against the sum of the profiled units and against the analytic and
  calibrated predictions of the same sum.

`--device cpu` runs the same on the CPU (with --base cpu-core), to check the script.
"""

import argparse
import json
import os
import statistics
import subprocess
import time

import torch
import transformers

import dnnplace
from dnnplace.torch import profile, timing_spread
from dnnplace.torch.models import lm_loss

SHAPE = dict(style="gpt2", layers=12, hidden=768, heads=12, vocab=50257)


def card(device):
    info = {"torch": torch.__version__, "transformers": transformers.__version__, "device": device}
    if device.startswith("cuda"):
        p = torch.cuda.get_device_properties(0)
        info.update(name=p.name, multiprocessors=p.multi_processor_count,
                    memory_gib=round(p.total_memory / 2**30, 1), cuda=torch.version.cuda)
        try:
            info["driver"] = subprocess.run(
                ["nvidia-smi", "--query-gpu=driver_version,clocks.max.sm", "--format=csv,noheader"],
                capture_output=True, text=True, timeout=20).stdout.strip()
        except (OSError, subprocess.SubprocessError) as e:
            info["driver"] = f"nvidia-smi failed: {e}"
    else:
        info["threads"] = torch.get_num_threads()
    return info


def model_of(dtype, device):
    cfg = transformers.GPT2Config(n_layer=SHAPE["layers"], n_embd=SHAPE["hidden"], n_head=SHAPE["heads"],
                                  vocab_size=SHAPE["vocab"], n_positions=1024, use_cache=False)
    torch.manual_seed(0)
    return transformers.GPT2LMHeadModel(cfg).to(device=device, dtype=dtype)


def sync(device):
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def real_step_ms(model, x, y, device, steps, warmup):
    """Median wall time of forward + loss + backward of the whole model."""
    model.train()
    times = []
    for i in range(warmup + steps):
        model.zero_grad(set_to_none=True)
        sync(device)
        t0 = time.perf_counter()
        loss = lm_loss(model(x).logits, y)
        loss.backward()
        sync(device)
        if i >= warmup:
            times.append(1e3 * (time.perf_counter() - t0))
    return statistics.median(times), (max(times) - min(times)) / statistics.median(times)


def summed(cal, key):
    return sum(u[key] for u in cal["units"])


def one(args, dtype_name, granularity, out):
    dtype = {"bf16": torch.bfloat16, "fp32": torch.float32}[dtype_name]
    model = model_of(dtype, args.device)
    g = torch.Generator().manual_seed(1)
    x = torch.randint(0, SHAPE["vocab"], (args.batch, args.seq), generator=g).to(args.device)
    y = torch.randint(0, SHAPE["vocab"], (args.batch, args.seq), generator=g).to(args.device)
    t0 = time.perf_counter()
    w = profile(model, (x,), device=args.device, training=True, granularity=granularity,
                repeats=args.repeats, warmup=args.warmup, threads=None, loss_fn=lm_loss, target=y)
    took = time.perf_counter() - t0
    tag = f"gpt2-{dtype_name}-{granularity}"
    w.save(os.path.join(out, tag + ".json"))
    device_file = os.path.join(out, f"{args.base}-{dtype_name}-calibrated.toml") if granularity == "block" else None
    cal = dnnplace.calibrate(w, device=args.base, dtype=dtype_name, seq=args.seq, batch=args.batch,
                             name=f"{args.base}-{dtype_name}-calibrated", out=device_file, **SHAPE)
    doc = json.loads(w.to_json())
    measured_all = sum(n["fpgaLatency"] for n in doc["nodes"])
    step, step_spread = real_step_ms(model, x, y, args.device, args.steps, args.warmup)
    b, f = cal["base"], cal["fitted"]
    print(f"\n== {tag}: {len(doc['nodes'])} nodes profiled in {took:.1f} s "
          f"({args.repeats} repeats, {args.warmup} warm-up), median node spread {100 * timing_spread(w):.1f}%")
    print(f"   base {b['name']}: compute_efficiency {b['compute_efficiency']:.4f}, memory_efficiency "
          f"{b['memory_efficiency']:.4f}, launch {b['launch_overhead_ms']:.5f} ms")
    print(f"   fitted: compute_efficiency {f['compute_efficiency']:.4f}, memory_efficiency "
          f"{f['memory_efficiency']:.4f}, launch {f['launch_overhead_ms']:.5f} ms "
          f"({cal['computeBoundOps']} compute-bound, {cal['memoryBoundOps']} memory-bound operators, "
          f"{cal['unmatchedOps']} unmatched; left out {cal['unmatchedMeasured']})")
    for label, e in (("base", cal["baseError"]), ("fitted", cal["fittedError"])):
        print(f"   {label:6} per-unit error rms {100 * e['rmsRelative']:.1f}%, median |e| "
              f"{100 * e['medianAbsRelative']:.1f}%, max |e| {100 * e['maxAbsRelative']:.1f}%, "
              f"whole {100 * e['totalRelative']:+.1f}%")
    print(f"   real step (fwd+loss+bwd, whole model, {args.steps} steps): {step:.3f} ms "
          f"(spread {100 * step_spread:.1f}%); profiled units summed {measured_all:.3f} ms "
          f"({100 * (measured_all / step - 1):+.1f}%); units the model prices: measured "
          f"{summed(cal, 'measuredMs'):.3f}, analytic {summed(cal, 'baseMs'):.3f}, calibrated "
          f"{summed(cal, 'fittedMs'):.3f} ms")
    print(f"   {'unit':28} {'pass':8} {'measured':>10} {'analytic':>10} {'err':>8} {'calibrated':>10} {'err':>8}")
    for u in cal["units"]:
        print(f"   {u['module']:28} {u['pass']:8} {u['measuredMs']:10.4f} {u['baseMs']:10.4f} "
              f"{100 * (u['baseMs'] / u['measuredMs'] - 1):+7.1f}% {u['fittedMs']:10.4f} "
              f"{100 * (u['fittedMs'] / u['measuredMs'] - 1):+7.1f}%")
    return {"tag": tag, "profile_s": took, "calibration": cal, "real_step_ms": step,
            "real_step_spread": step_spread, "profiled_sum_ms": measured_all}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--base", default=None)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--configs", default="bf16:block,bf16:module,fp32:block")
    args = ap.parse_args()
    args.base = args.base or ("h100" if args.device.startswith("cuda") else "cpu-core")
    os.makedirs(args.out, exist_ok=True)
    info = card(args.device)
    print("card:", json.dumps(info))
    results = {"card": info, "args": vars(args), "runs": []}
    for item in args.configs.split(","):
        dtype_name, granularity = item.split(":")
        results["runs"].append(one(args, dtype_name, granularity, args.out))
        with open(os.path.join(args.out, "summary.json"), "w") as fh:
            json.dump(results, fh, indent=1)


if __name__ == "__main__":
    main()
