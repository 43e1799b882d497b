"""Tensor-parallel options of an exported GPT-2 (``Workload.from_onnx(tensor_parallel=...)``,
``dnnplace import --tensor-parallel``): a two-block GPT-2 with random weights exported by
``torch.onnx.export`` is imported with TP degrees 2 and 4; the Python workload's JSON is the
CLI's, every block adds two forward and two backward all-reduces of ``b·s·h·e`` bytes, the
embeddings one forward and the head one backward, the block's projections hold a
``t``-th of their weights, ``plan_parallel`` plans it at those degrees, and a degree that
does not divide the heads is refused naming the node.
"""

import json

import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed (python/ci.sh installs it)")
transformers = pytest.importorskip("transformers", reason="transformers is not installed")
pytest.importorskip("onnx", reason="onnx is not installed (python/ci.sh installs it)")

import dnnplace  # noqa: E402

from test_api import CLI, cli, need  # noqa: E402

B, S, H, HEADS, LAYERS, V = 1, 16, 64, 4, 2, 512


@pytest.fixture(scope="module")
def gpt2_onnx(tmp_path_factory):
    import transformers.masking_utils as masking

    # transformers' packed-sequence detection (torch.diff) has no ONNX export; one sequence
    # per row needs none.
    masking.find_packed_sequence_indices = lambda position_ids: None
    torch.manual_seed(0)
    config = transformers.GPT2Config(
        n_layer=LAYERS, n_embd=H, n_head=HEADS, vocab_size=V, n_positions=64, attn_implementation="eager"
    )
    model = transformers.GPT2LMHeadModel(config).eval()

    class Logits(torch.nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, ids):
            return self.m(input_ids=ids, use_cache=False).logits

    path = tmp_path_factory.mktemp("onnx-tp") / "gpt2.onnx"
    ids = torch.randint(0, V, (B, S))
    torch.onnx.export(Logits(model), (ids,), str(path), input_names=["input_ids"], dynamo=False, opset_version=17)
    return path


def test_options_equal_the_clis_and_split_as_megatron(gpt2_onnx, tmp_path):
    need(CLI, "the release binary")
    w = dnnplace.Workload.from_onnx(gpt2_onnx, training=True, batch=B, seq=S, tensor_parallel=[2, 4])
    doc = json.loads(w.to_json())
    out = tmp_path / "w.json"
    r = cli("import", str(gpt2_onnx), "--training", "--batch", str(B), "--seq", str(S),
            "--tensor-parallel", "2,4", "--out", str(out))
    assert r.returncode == 0, r.stderr
    assert doc["nodes"] == json.loads(out.read_text())["nodes"]
    x = B * S * H * 4.0
    counts = {}
    for n in doc["nodes"]:
        o = next(o for o in n["tensorParallel"] if o["degree"] == 2)
        assert [d["degree"] for d in n["tensorParallel"]] == [2, 4]
        assert all(b == x for b in o.get("allReduceBytes", [])), n["name"]
        key = (n["layerId"], bool(n["isBackwardNode"]))
        counts[key] = counts.get(key, 0) + len(o.get("allReduceBytes", []))
    assert counts[(-1, False)] == 1 and counts[(-1, True)] == 0
    for block in range(LAYERS):
        assert counts[(block, False)] == 2 and counts[(block, True)] == 2
    assert counts[(LAYERS, False)] == 0 and counts[(LAYERS, True)] == 1
    # c_attn: 3h·h weights and 3h biases, a t-th of them per device.
    c_attn = next(n for n in doc["nodes"] if n["name"] == "/m/transformer/h.0/attn/c_attn/Gemm")
    assert c_attn["weightBytes"] == (3 * H * H + 3 * H) * 4
    for o in c_attn["tensorParallel"]:
        assert o["weightBytes"] == c_attn["weightBytes"] / o["degree"]
    plan = dnnplace.plan_parallel(w, "1x8xa100-80gb", 1, tensor_parallel=[1, 2, 4])
    assert plan.status.startswith("optimal"), plan.status
    assert max(s["tensorParallel"] for s in plan.stages) in (1, 2, 4)


def test_a_degree_that_does_not_divide_the_heads_is_refused(gpt2_onnx):
    with pytest.raises(dnnplace.InputError, match=r"--tensor-parallel 8: node '/m/transformer/h.0/attn/Reshape"):
        dnnplace.Workload.from_onnx(gpt2_onnx, training=True, batch=B, seq=S, tensor_parallel=[8])
