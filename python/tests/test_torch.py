"""dnnplace.torch: the profile's contents checked against torch itself, and the real-run
check of CI: a GPT-2-shaped model profiled on the CPU (one thread per process, each unit
timed as ``pipeline()`` runs it: ``execution="pipeline"``, with one neighbour process
training beside it on the other core as the other stage will: ``co_runners=1``; 15
repeats in 3 sessions, each with a fresh neighbour, the units shuffled each round), planned
for 2 stages and run with GPipe and 1F1B over 8 micro-batches:

- the planned split's measured step time within 15 % of the simulator's prediction: a
  judged attempt fails when its error exceeds 15 % by more than twice its standard error
  (the step median's and the profile's, combined); one beyond 15 % but within that margin
  is undecided and retried like a noisy one;
- the planned split measured faster than the equal-layer split whenever the prediction
  says it is faster by more than the noise (twice the two step medians' combined
  standard error, at least 5 %).

Timing checks compare figures of one run with each other, never with fixed times. The
splits and schedules take their steps in turn in one set of processes (A B C D A B C D
…, 1 warm-up round and 10 measured), so that a drift of the machine touches all alike;
each stage process is pinned to a core of its own (when there are enough), runs one
intra-op and one inter-op thread, keeps glibc's freed memory (``steady_malloc``) and runs
Python's garbage collector between steps only. A step time is the median of the 10, and
its noise the median's relative standard error estimated from the interquartile range
(``median_error``: 0.929 · IQR / √n / median), robust to a slow step, which the old
(max − min)/median over 4 steps was not. The profile's noise is Σ SE / Σ median over its
nodes' medians (``profile_noise``, 15 repeats each): heavy nodes weigh by their time;
combined with the spread of the three sessions' levels (``session_noise``). A
run is too noisy to judge when a step's or the profile's standard error exceeds 5 % (a
third of the 15 % tolerance), or a stage's busy wall time exceeds its CPU time by more
than 10 % (other work took the cores): it is retried (``DNNPLACE_REALRUN_ATTEMPTS``
attempts in all, default 3), then the test skips, printing the figures; it never passes
without judging.
"""

import json
import math
import os

import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed (python/ci.sh installs it)")

import dnnplace  # noqa: E402
from dnnplace.torch import TinyGPT, profile, profile_noise, session_noise, validate  # noqa: E402
from dnnplace.torch.models import lm_loss  # noqa: E402

# The largest standard error of a step median or of the profile that is judged.
NOISY = 0.05
CONTENDED = 1.10
# Attempts of the real-run check before it skips as too noisy (DNNPLACE_REALRUN_ATTEMPTS).
ATTEMPTS = int(os.environ.get("DNNPLACE_REALRUN_ATTEMPTS", "3"))


def small_model(tie=False):
    torch.manual_seed(0)
    return TinyGPT(layers=2, hidden=64, heads=2, vocab=512, seq=32, tie=tie)


def ids(vocab, seq, batch=1, seed=1):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, vocab, (batch, seq), generator=g)


def test_profile_nodes_memory_and_edges():
    model = small_model()
    x, y = ids(512, 32, batch=2), ids(512, 32, batch=2, seed=2)
    w = profile(model, (x,), loss_fn=lm_loss, target=y, repeats=3, warmup=1)
    doc = json.loads(w.to_json())
    fwd = [n for n in doc["nodes"] if not n["isBackwardNode"]]
    bwd = [n for n in doc["nodes"] if n["isBackwardNode"]]
    assert [n["name"] for n in fwd] == ["wte", "wpe", "h.0", "h.1", "ln_f", "lm_head", "loss"]
    assert [n.get("layerId") for n in fwd] == [None, None, 0, 1, None, None, None]
    assert len(bwd) == len(fwd)
    # Parameter bytes are torch's own count, per module.
    for n in fwd[:-1]:
        mod = model.get_submodule(n["module"])
        assert n["weightBytes"] == sum(p.numel() * 4 for p in mod.parameters())
    for f, b in zip(fwd, bwd):
        assert b["name"] == f["name"] + "_grad"
        assert b["gradientBytes"] == f["weightBytes"]
        assert b["optimizerBytes"] == 2 * f["weightBytes"]
        assert b["size"] == b["activationBytes"] + 3 * f["weightBytes"]
    # A block saves at least its input and the attention and MLP activations.
    hidden_bytes = 2 * 32 * 64 * 4
    block = next(n for n in bwd if n["name"] == "h.0_grad")
    assert block["activationBytes"] >= 4 * hidden_bytes
    # Chain edges carry the real tensor bytes: hidden states between blocks, logits to the loss.
    sizes = {(e["sourceId"], e["destId"]): e["size"] for e in doc["edges"]}
    assert sizes[(3, 4)] == hidden_bytes
    assert sizes[(6, 7)] == 2 * 32 * 512 * 4
    # Measured times with their spread, kept in the file; the loss joins the head's class.
    assert all(n["fpgaLatency"] > 0 for n in fwd)
    assert fwd[3]["profile"]["forwardMs"]["median"] == fwd[3]["fpgaLatency"]
    assert len(fwd[3]["profile"]["forwardMs"]["samples"]) == 3
    assert fwd[-1]["colorClass"] == fwd[-2]["colorClass"]
    assert doc["profile"]["threads"] == 1 and doc["tiedParameters"] == []
    # The plan's export names the modules pipeline() cuts at.
    p = dnnplace.plan(w, granularity="layer")
    spec = json.loads(p.export("torch-json"))["split_spec"]
    assert all(model.get_submodule(k) is not None for k in spec)


def test_profile_records_tied_parameters_and_module_granularity():
    model = small_model(tie=True)
    x = ids(512, 32)
    w = profile(model, (x,), granularity="module", repeats=2, warmup=0)
    doc = json.loads(w.to_json())
    tied = doc["tiedParameters"]
    assert len(tied) == 1 and tied[0]["modules"] == ["wte", "lm_head"]
    assert tied[0]["bytes"] == 512 * 64 * 4
    fwd = {n["name"]: n for n in doc["nodes"] if not n["isBackwardNode"]}
    # Counted on both nodes: pipeline() copies it into each stage that uses it.
    assert fwd["wte"]["weightBytes"] == fwd["lm_head"]["weightBytes"] == 512 * 64 * 4
    assert {"h.0.ln_1", "h.0.attn", "h.0.ln_2", "h.0.mlp"} <= set(fwd)
    assert fwd["h.1.mlp"]["layerId"] == 1


def test_profile_as_the_pipeline_runs_it():
    """execution="pipeline" times the traced modules: the same nodes, bytes and edges."""
    model = small_model()
    x, y = ids(512, 32), ids(512, 32, seed=2)
    docs = [json.loads(profile(model, (x,), loss_fn=lm_loss, target=y, repeats=2, warmup=1,
                               execution=e).to_json()) for e in ("eager", "pipeline")]
    keys = ("name", "module", "layerId", "weightBytes", "activationBytes", "colorClass")
    for a, b in zip(*(d["nodes"] for d in docs)):
        assert {k: a.get(k) for k in keys} == {k: b.get(k) for k in keys}
        assert b["fpgaLatency"] > 0 or b["isBackwardNode"]
    assert docs[0]["edges"] == docs[1]["edges"]
    assert docs[1]["profile"]["execution"] == "pipeline"


def test_profile_with_a_neighbour():
    """co_runners: a neighbour process trains beside the profile (it took steps), the
    profile's nodes and bytes are those of a profile alone, and the affinity is restored."""
    from dnnplace.torch import CoRunners

    model = small_model()
    x, y = ids(512, 32), ids(512, 32, seed=2)
    affinity = os.sched_getaffinity(0)
    with CoRunners(1, model, (x,), y, lm_loss, threads=1) as neighbours:
        docs = [json.loads(profile(model, (x,), loss_fn=lm_loss, target=y, repeats=2, warmup=1,
                                   co_runners=n).to_json()) for n in (0, 1)]
    assert len(neighbours.steps) == 1 and neighbours.steps[0] >= 1
    assert os.sched_getaffinity(0) == affinity
    keys = ("name", "module", "layerId", "weightBytes", "activationBytes", "colorClass")
    for a, b in zip(*(d["nodes"] for d in docs)):
        assert {k: a.get(k) for k in keys} == {k: b.get(k) for k in keys}
    assert [d["profile"]["coRunners"] for d in docs] == [0, 1]


def test_profile_in_sessions():
    """sessions: the repeats split over sessions, each session's level recomputed here from
    the samples in the file; the nodes and bytes those of a one-session profile in program
    order; session_noise and profile_noise by their formulas."""
    model = small_model()
    x, y = ids(512, 32), ids(512, 32, seed=2)
    one = json.loads(profile(model, (x,), loss_fn=lm_loss, target=y, repeats=5, warmup=1,
                             order="program").to_json())
    w = profile(model, (x,), loss_fn=lm_loss, target=y, repeats=5, warmup=1, sessions=2, co_runners=1, seed=3)
    doc = json.loads(w.to_json())
    sessions = doc["profile"]["sessions"]
    assert [s["repeats"] for s in sessions] == [3, 2]
    assert doc["profile"]["order"] == "shuffled" and one["profile"]["order"] == "program"
    samples = [n["profile"]["forwardMs" if not n["isBackwardNode"] else "backwardMs"]["samples"]
               for n in doc["nodes"]]
    assert all(len(s) == 5 for s in samples)
    for k, (lo, hi) in enumerate([(0, 3), (3, 5)]):
        level = sum(sorted(s[lo:hi])[(hi - lo) // 2] if (hi - lo) % 2 else
                    (sorted(s[lo:hi])[(hi - lo) // 2 - 1] + sorted(s[lo:hi])[(hi - lo) // 2]) / 2
                    for s in samples)
        # The file rounds samples to 1e-6 ms; the level is of the unrounded ones.
        assert sessions[k]["totalMs"] == pytest.approx(level, abs=1e-5 * len(samples))
    keys = ("name", "module", "layerId", "weightBytes", "activationBytes", "colorClass")
    for a, b in zip(one["nodes"], doc["nodes"]):
        assert {k: a.get(k) for k in keys} == {k: b.get(k) for k in keys}
    # The noise between sessions: stdev of the levels / √sessions / their mean.
    doc["profile"]["sessions"] = [{"repeats": 3, "totalMs": 100.0}, {"repeats": 2, "totalMs": 120.0}]
    v = dnnplace.Workload.from_json(json.dumps(doc))
    between = (20 / math.sqrt(2)) / math.sqrt(2) / 110
    assert session_noise(v) == pytest.approx(between)
    doc["profile"]["sessions"] = doc["profile"]["sessions"][:1]
    within = profile_noise(dnnplace.Workload.from_json(json.dumps(doc)))
    assert profile_noise(v) == pytest.approx(math.hypot(within, between))
    assert session_noise(dnnplace.Workload.from_json(json.dumps(doc))) == 0.0


def test_profile_rejects_bad_options():
    with pytest.raises(ValueError, match="co_runners"):
        profile(small_model(), (ids(512, 32),), co_runners=-1)
    with pytest.raises(ValueError, match="execution"):
        profile(small_model(), (ids(512, 32),), execution="jit")
    with pytest.raises(ValueError, match="granularity"):
        profile(small_model(), (ids(512, 32),), granularity="op")
    with pytest.raises(ValueError, match="loss_fn and target"):
        profile(small_model(), (ids(512, 32),), loss_fn=lm_loss)
    with pytest.raises(ValueError, match="sessions must be from 1 to repeats"):
        profile(small_model(), (ids(512, 32),), repeats=2, sessions=3)
    with pytest.raises(ValueError, match="sessions must be from 1 to repeats"):
        profile(small_model(), (ids(512, 32),), sessions=0)
    with pytest.raises(ValueError, match="order"):
        profile(small_model(), (ids(512, 32),), order="random")


def test_noise_statistics():
    from dnnplace.torch import median_error, relative_iqr

    # Quartiles of 1..5 (inclusive method): 2 and 4 around the median 3.
    assert relative_iqr([5, 1, 4, 2, 3]) == pytest.approx(2 / 3)
    # One wild sample moves (max - min)/median, not the IQR.
    assert relative_iqr([10, 10, 10, 11, 11, 11, 10, 100]) == pytest.approx(1 / 10.5 * (11 - 10))
    assert median_error([1, 2, 3, 4, 5]) == pytest.approx(math.sqrt(math.pi / 2) / 1.349 * (2 / 3) / math.sqrt(5))
    assert relative_iqr([7.0]) == 0.0 and median_error([7.0]) == 0.0


# The CI model: GPT-2 shaped, 8 blocks, hidden 256, a vocabulary large enough that the
# head and loss weigh as much as several blocks.
LAYERS, HIDDEN, HEADS, VOCAB, SEQ, M = 8, 256, 4, 32000, 128, 8


def _attempt():
    torch.manual_seed(0)
    model = TinyGPT(layers=LAYERS, hidden=HIDDEN, heads=HEADS, vocab=VOCAB, seq=SEQ)
    x, y = ids(VOCAB, SEQ), ids(VOCAB, SEQ, seed=2)
    w = profile(model, (x,), loss_fn=lm_loss, target=y, threads=1, repeats=15, warmup=2, accelerators=2,
                execution="pipeline", co_runners=1, sessions=3)
    v = validate(model, (x,), y, lm_loss, workload=w, stages=2, schedules=("gpipe", "1f1b"),
                 micro_batches=M, steps=10, warmup=1, threads=1)
    return w, v


def _judge_errors(v, w):
    """The 15 % check of one judged attempt: ``(off, undecided)`` lists of schedules. A
    schedule is *off* when its error exceeds 15 % by more than twice its standard error
    (the step median's and the profile's, combined), *undecided* when it exceeds 15 % but
    within that margin (measurement noise could explain it: the attempt is retried)."""
    off, undecided = [], []
    for schedule in ("gpipe", "1f1b"):
        planned = v.row(schedule, "planned")
        se = math.hypot(planned.measured.median_error, profile_noise(w))
        text = f"{schedule} {100 * planned.error:+.1f}% (SE {100 * se:.1f}%)"
        if abs(planned.error) - 2 * se > 0.15:
            off.append(text)
        elif abs(planned.error) > 0.15:
            undecided.append(text)
    return off, undecided


def _compare_with_equal_split(v):
    """The planned split measured faster than the equal split where predicted faster by
    more than the noise."""
    for schedule in ("gpipe", "1f1b"):
        planned = v.row(schedule, "planned")
        try:
            equal = v.row(schedule, "equal")
        except StopIteration:
            continue  # the plan is the equal split
        predicted_gain = equal.predicted_ms / planned.predicted_ms - 1
        noise = max(0.05, 2 * math.hypot(planned.measured.median_error, equal.measured.median_error))
        if predicted_gain > noise:
            assert planned.measured.step_ms < equal.measured.step_ms, v.table()
        else:
            print(f"{schedule}: predicted gain {100 * predicted_gain:.1f}% is within the noise "
                  f"{100 * noise:.1f}%: not compared")


def test_real_pipeline_matches_the_prediction():
    notes = []
    for attempt in range(ATTEMPTS):
        w, v = _attempt()
        spread = max(r.measured.median_error for r in v.rows)
        contention = max(r.measured.contention for r in v.rows)
        profile_spread = profile_noise(w)
        figures = (f"step median SE {100 * spread:.1f}%, profile SE {100 * profile_spread:.1f}% "
                   f"(between sessions {100 * session_noise(w):.1f}%), "
                   f"contention {contention:.2f} (limits {100 * NOISY:.0f}%, {100 * NOISY:.0f}%, "
                   f"{CONTENDED:.2f}), step IQR {100 * max(r.measured.iqr for r in v.rows):.1f}%, profiling {json.loads(w.to_json())['profile']['timeS']:.1f} s")
        print(f"attempt {attempt + 1}: {figures}")
        if not (spread <= NOISY and profile_spread <= NOISY and contention <= CONTENDED):
            notes.append(f"attempt {attempt + 1} too noisy: {figures}\n{v.table()}")
            continue
        print(v.table())
        _compare_with_equal_split(v)
        off, undecided = _judge_errors(v, w)
        assert not off, ("step time off the prediction by more than 15 % (beyond twice its "
                         "standard error): " + ", ".join(off) + "\n" + v.table())
        if not undecided:
            return  # within 15 % on both schedules
        notes.append(f"attempt {attempt + 1} undecided: {', '.join(undecided)} is beyond 15 % "
                     f"but within twice its standard error\n{v.table()}")
    msg = "no attempt could be judged:\n" + "\n".join(notes)
    print("SKIP:", msg)
    pytest.skip(msg)
