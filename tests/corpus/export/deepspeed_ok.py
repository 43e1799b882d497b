# dnnplace export: DeepSpeed PipelineModule stage boundaries, 2 stages over 6 layers.
# Stage s builds layers[parts[s]:parts[s+1]] of the list given to PipelineModule
# (deepspeed/runtime/pipe/module.py: _partition_layers, _set_bounds).
# GPU 0: embed_tokens + layers 0-2 (load 0.322 ms, memory 43.19 MiB)
# GPU 1: layer 3 + norm + lm_head (load 0.298 ms, memory 82.19 MiB)
# The layer list this split assumes, in order (build your LayerSpecs in this order):
layers = ["model.embed_tokens","model.layers.0","model.layers.1","model.layers.2","model.layers.3","model.norm+lm_head"]
parts = [0,4,6]

# partition_method ("uniform", "parameters", "type:REGEX") takes no explicit boundaries;
# this subclass uses the parts above instead.
from deepspeed.pipe import PipelineModule


def planned_pipeline_module(parts):
    class PlannedPipelineModule(PipelineModule):
        def _partition_layers(self, method="uniform"):
            stages = self._topo.get_dim("pipe")
            if len(parts) != stages + 1 or parts[0] != 0 or parts[-1] != len(self._layer_specs):
                raise ValueError(f"parts {parts} do not split {len(self._layer_specs)} layers into {stages} stages")
            self.parts = list(parts)
            stage = self._topo.get_coord(self.global_rank).pipe
            self._set_bounds(start=self.parts[stage], stop=self.parts[stage + 1])

    return PlannedPipelineModule


# model = planned_pipeline_module(parts)(layers=my_layer_specs, num_stages=2, loss_fn=my_loss)
