"""Checks layout strings with Megatron-LM's own parser, imported without torch.

megatron-core's megatron/core/transformer/pipeline_parallel_layer_layout.py needs torch only
through `megatron.core.parallel_state` and `megatron.core._rank_utils`; both are stubbed
here (no distributed run: virtual pipelining off, rank 0), and the real module and its
`enums.py` are loaded from the installed package folder given as argv[1].

stdin: JSON lines, each one case:
  {"parse": "E,t*6|t*6,L", "stages": ["Etttttt", "ttttttL"]}      parse_str_to_list, stages as strings
  {"parse": "Ex|L", "error": true}                                  parse_str_to_list raises
  {"layout": "...", "pp": 4, "num_layers": 24, "ranks": [[0, 6], ...]}
      __init__ + validate_layer_layout, then get_layer_id_list of every rank == range(a, b),
      embedding on rank 0 and loss on the last rank
  {"layout": "...", "pp": 2, "num_layers": 24, "error": true}       __init__ or validation raises
stdout: one line per failure, then 'N passed, M failed'; exit status 1 on any failure.
"""

import importlib.util
import json
import os
import sys
import types


def load_file(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def load_megatron(site):
    core = os.path.join(site, "megatron", "core")
    for name in ["megatron", "megatron.core", "megatron.core.transformer"]:
        package = types.ModuleType(name)
        package.__path__ = []
        sys.modules[name] = package
    parallel_state = types.ModuleType("megatron.core.parallel_state")
    parallel_state.get_virtual_pipeline_model_parallel_world_size = lambda: None
    parallel_state.get_pipeline_model_parallel_rank = lambda: 0
    sys.modules["megatron.core.parallel_state"] = parallel_state
    sys.modules["megatron.core"].parallel_state = parallel_state
    rank_utils = types.ModuleType("megatron.core._rank_utils")
    rank_utils.safe_get_rank = lambda: 0
    sys.modules["megatron.core._rank_utils"] = rank_utils
    enums = load_file("megatron.core.transformer.enums", os.path.join(core, "transformer", "enums.py"))
    layout = load_file(
        "megatron.core.transformer.pipeline_parallel_layer_layout",
        os.path.join(core, "transformer", "pipeline_parallel_layer_layout.py"),
    )
    return layout.PipelineParallelLayerLayout, enums.LayerType


def main():
    Layout, LayerType = load_megatron(sys.argv[1])
    char = {LayerType.embedding: "E", LayerType.loss: "L", LayerType.decoder: "t", LayerType.mtp: "m"}
    passed, failures = 0, []
    for number, text in enumerate(sys.stdin):
        if not text.strip():
            continue
        case = json.loads(text)
        try:
            if "parse" in case:
                try:
                    stages = ["".join(char[x] for x in stage) for stage in Layout.parse_str_to_list(case["parse"])]
                except AssertionError:
                    stages = None
                if case.get("error"):
                    assert stages is None, f"Megatron parses {case['parse']!r} as {stages}"
                else:
                    assert stages == case["stages"], f"Megatron: {stages}, dnnplace: {case['stages']}"
            else:
                try:
                    layout = Layout(case["layout"], case["pp"])
                    layout.validate_layer_layout(num_layers=case["num_layers"], mtp_num_layers=None)
                except (AssertionError, ValueError, NotImplementedError) as e:
                    if case.get("error"):
                        passed += 1
                        continue
                    raise AssertionError(f"Megatron rejects it: {e}")
                assert not case.get("error"), "Megatron accepts a layout dnnplace rejects"
                ranks = [
                    layout.get_layer_id_list(layer_type=LayerType.decoder, vp_stage=0, pp_rank=r) for r in range(case["pp"])
                ]
                expected = [list(range(a, b)) for a, b in case["ranks"]]
                assert ranks == expected, f"decoder layers per rank: Megatron {ranks}, dnnplace {expected}"
                assert layout.layout[0][0][0] == LayerType.embedding, "the embedding is not first on rank 0"
                assert layout.layout[-1][-1][-1] == LayerType.loss, "the loss is not last on the last rank"
            passed += 1
        except AssertionError as e:
            failures.append(f"case {number} {text.strip()}: {e}")
    for f in failures:
        print(f)
    print(f"{passed} passed, {len(failures)} failed")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
