"""The figures of docs/costmodel.md ("Measured, not assumed"): predicted against measured
for the CI model and a GPT-2 124M shape, how long profiling takes, and the analytic
`cpu-core` profile against the measured profile.

    python python/bench/costmodel_figures.py ci   [--nice -15]
    python python/bench/costmodel_figures.py gpt2 [--nice -15] [--seq 64]
    python python/bench/costmodel_figures.py analytic [--clock cpu]

`--clock cpu` profiles in the thread's CPU time (the modules' cost with a core to
themselves), for a machine that others share.

`--nice` raises the measuring processes' priority (root) on a machine that others share.
"""

import argparse
import json
import statistics
import time

import torch

import dnnplace
from dnnplace.torch import TinyGPT, profile, timing_spread, validate
from dnnplace.torch.models import lm_loss


REPEATS = 15


def ids(vocab, seq, seed):
    return torch.randint(0, vocab, (1, seq), generator=torch.Generator().manual_seed(seed))


def ci_model(seq):
    torch.manual_seed(0)
    return TinyGPT(layers=8, hidden=256, heads=4, vocab=32000, seq=seq), 32000


def gpt2_model(seq):
    import transformers

    cfg = transformers.GPT2Config(n_layer=12, n_embd=768, n_head=12, n_positions=1024, use_cache=False)
    torch.manual_seed(0)
    return transformers.GPT2LMHeadModel(cfg), cfg.vocab_size


def measure(which, seq, nice, steps, m, clock, schedules, workload):
    model, vocab = (ci_model if which == "ci" else gpt2_model)(seq)
    x, y = ids(vocab, seq, 1), ids(vocab, seq, 2)
    t0 = time.perf_counter()
    if workload:
        w = dnnplace.Workload.load(workload)
    else:
        # As the real-run check profiles: each unit as pipeline() runs it, beside a
        # neighbour process training on the other core (the other stage).
        w = profile(model, (x,), loss_fn=lm_loss, target=y, threads=1, repeats=REPEATS, warmup=2, nice=nice,
                    clock=clock, execution="pipeline", co_runners=1, sessions=3)
    took = time.perf_counter() - t0
    doc = json.loads(w.to_json())
    print(f"{which}: {len(doc['nodes'])} nodes, profiled in {took:.1f} s ({REPEATS} repeats in 3 sessions, 2 warm-up each, 1 neighbour), "
          f"median node spread {100 * timing_spread(w):.1f}%, tied: {doc['tiedParameters']}")
    if not workload:
        w.save(f"/tmp/dnnplace-{which}-profile.json")
    v = validate(model, (x,), y, lm_loss, workload=w, micro_batches=m, steps=steps, warmup=1, nice=nice,
                 schedules=schedules, timeout=3000)
    print("plan:", v.plan.status, f"TPS {v.plan.tps_ms:.2f} ms", [d["modules"] for d in v.plan.devices])


def analytic(clock):
    """The CI model priced by the analytic cpu-core profile against its measured profile."""
    model, vocab = ci_model(128)
    x, y = ids(vocab, 128, 1), ids(vocab, 128, 2)
    measured = json.loads(profile(model, (x,), loss_fn=lm_loss, target=y, repeats=7, warmup=2, clock=clock).to_json())
    gen = json.loads(dnnplace.generate_transformer(
        "gpt2", layers=8, hidden=256, heads=4, seq=128, batch=1, vocab=32000, training=True,
        device="cpu-core", accelerators=2).to_json())

    def split(doc):
        blocks = {"fwd": 0.0, "bwd": 0.0}
        rest = {"fwd": 0.0, "bwd": 0.0}
        for n in doc["nodes"]:
            key = "bwd" if n.get("isBackwardNode") else "fwd"
            (blocks if 0 <= (n.get("layerId") if n.get("layerId") is not None else -1) < 8 else rest)[key] += n["fpgaLatency"]
        return blocks, rest

    (mb, mr), (gb, gr) = split(measured), split(gen)
    print("| part | pass | measured ms | cpu-core ms | cpu-core / measured |")
    print("|---|---|---:|---:|---:|")
    for part, a, b in (("8 blocks", mb, gb), ("embeddings, final norm, head, loss", mr, gr)):
        for p in ("fwd", "bwd"):
            print(f"| {part} | {p} | {a[p]:.1f} | {b[p]:.1f} | {b[p] / a[p]:.2f} |")
    tm, tg = sum(mb.values()) + sum(mr.values()), sum(gb.values()) + sum(gr.values())
    print(f"| whole model | fwd + bwd | {tm:.1f} | {tg:.1f} | {tg / tm:.2f} |")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("which", choices=["ci", "gpt2", "analytic"])
    ap.add_argument("--nice", type=int, default=None)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("-m", type=int, default=8)
    ap.add_argument("--clock", choices=["wall", "cpu"], default="wall")
    ap.add_argument("--schedules", default="gpipe,1f1b")
    ap.add_argument("--workload", default=None, help="a saved profile instead of profiling again")
    a = ap.parse_args()
    if a.which == "analytic":
        analytic(a.clock)
    else:
        measure(a.which, a.seq, a.nice, a.steps, a.m, a.clock, a.schedules.split(","), a.workload)
