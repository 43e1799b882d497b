//! Module paths: which `torch.nn.Module` an ONNX node comes from.
//!
//! Two exporters record it, in two forms:
//!
//! - **`torch.onnx.export` (TorchScript)** names each node `/s₁/s₂/…/s_k/Op[_i]`: the scopes
//!   of the modules whose `forward` ran it, outermost first, then the operator. A scope
//!   `sᵢ` is the module's qualified name from its last non-numeric atom on
//!   (PyTorch's `_unqualified_variable_name`): `model.layers.3` shows as `layers.3`, and the
//!   child `layer1.0` of the `Sequential` `layer1` as `layer1.0`. Containers without a
//!   `forward` of their own (`ModuleList`) have no scope. So the path is rebuilt scope by
//!   scope: with `P` the path so far and `sᵢ = h.n₁.….n_j` (head `h`, numeric atoms `n`),
//!   if `h` is the last non-numeric atom of `P` (the scope is a numbered descendant of the
//!   container `h`), `P ← P[..through h].n₁.….n_j`; otherwise `P ← P.sᵢ`.
//!   Examples: `/model/layers.3/self_attn/q_proj/MatMul` → `model.layers.3.self_attn.q_proj`;
//!   `/layer1/layer1.0/conv1/Conv` → `layer1.0.conv1`; `/blocks.3/mlp/mlp.2/MatMul` →
//!   `blocks.3.mlp.2`. Ambiguity: a module `x.mlp` whose child is a container also called
//!   `mlp` (`x.mlp.mlp.0`) reads back as `x.mlp.0`.
//! - **`torch.onnx.export(dynamo=True)`** keeps the generated node name and writes the
//!   scopes into the node's `metadata_props` under `pkg.torch.onnx.name_scopes`, as the
//!   Python `repr` of a list of full paths: `['', 'model', 'model.layers.3', …, 'linear_8']`
//!   (root first, the node's own name last). The module is the last entry before the node's
//!   own name. This form wins when both are present.
//!
//! A node at the root (`/Add`), a name not starting with `/` (Caffe2 and TensorFlow
//! exports, such as the light models' `n17`) and an unreadable scope list give no module.
//! Complexity: O(|name|) per node.

use super::proto::NodeProto;

/// The metadata key of the dynamo exporter's scopes.
pub const NAME_SCOPES_KEY: &str = "pkg.torch.onnx.name_scopes";

/// The module path of `node` (module documentation), or `None`.
pub fn module_of(node: &NodeProto) -> Option<String> {
    let scopes = node
        .metadata_props
        .iter()
        .find(|p| p.key.as_deref() == Some(NAME_SCOPES_KEY));
    if let Some(value) = scopes.and_then(|p| p.value.as_deref()) {
        return module_from_name_scopes(value);
    }
    module_from_scoped_name(node.name.as_deref()?)
}

/// `/model/layers.3/self_attn/q_proj/MatMul` → `model.layers.3.self_attn.q_proj`.
pub fn module_from_scoped_name(name: &str) -> Option<String> {
    let scopes = name.strip_prefix('/')?;
    let (scopes, _op) = scopes.rsplit_once('/')?;
    let mut path = String::new();
    for scope in scopes.split('/') {
        if scope.is_empty() || scope.split('.').any(str::is_empty) {
            return None;
        }
        let (head, numbers) = scope
            .split_once('.')
            .map_or((scope, ""), |(h, rest)| (h, rest));
        let numbered = !numbers.is_empty()
            && numbers
                .split('.')
                .all(|a| a.bytes().all(|b| b.is_ascii_digit()));
        match last_word(&path) {
            Some((word, end)) if numbered && word == head => {
                path.truncate(end);
                path.push('.');
                path.push_str(numbers);
            }
            _ => {
                if !path.is_empty() {
                    path.push('.');
                }
                path.push_str(scope);
            }
        }
    }
    (!path.is_empty()).then_some(path)
}

/// The last atom of `path` that is not a number, and the byte offset where it ends.
fn last_word(path: &str) -> Option<(&str, usize)> {
    let mut end = path.len();
    for atom in path.rsplit('.') {
        if !atom.is_empty() && !atom.bytes().all(|b| b.is_ascii_digit()) {
            return Some((atom, end));
        }
        end = end.saturating_sub(atom.len() + 1);
    }
    None
}

/// `"['', 'model', 'model.layers.3', 'linear_8']"` → `model.layers.3`.
pub fn module_from_name_scopes(value: &str) -> Option<String> {
    let inner = value.trim().strip_prefix('[')?.strip_suffix(']')?;
    let entries: Vec<&str> = inner
        .split(',')
        .map(|e| {
            let e = e.trim();
            e.strip_prefix('\'')
                .and_then(|e| e.strip_suffix('\''))
                .or_else(|| e.strip_prefix('"')?.strip_suffix('"'))
        })
        .collect::<Option<_>>()?;
    match entries.as_slice() {
        [.., module, _own_name] if !module.is_empty() => Some(module.to_string()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::costmodel::onnx::proto::StringStringEntryProto;

    #[test]
    fn pytorch_scoped_names() {
        let cases = [
            (
                "/model/layers.3/self_attn/q_proj/MatMul",
                Some("model.layers.3.self_attn.q_proj"),
            ),
            (
                "/model/layers.3/self_attn/MatMul_1",
                Some("model.layers.3.self_attn"),
            ),
            (
                "/model/layers.11/mlp/act_fn/Sigmoid",
                Some("model.layers.11.mlp.act_fn"),
            ),
            (
                "/bert/encoder/layer.3/attention/self/query/MatMul",
                Some("bert.encoder.layer.3.attention.self.query"),
            ),
            (
                "/transformer/h.3/attn/c_attn/Gemm",
                Some("transformer.h.3.attn.c_attn"),
            ),
            ("/layer1/layer1.0/conv1/Conv", Some("layer1.0.conv1")),
            (
                "/model/layer1/layer1.0/downsample/downsample.0/Conv",
                Some("model.layer1.0.downsample.0"),
            ),
            ("/blocks.3/mlp/mlp.2/MatMul", Some("blocks.3.mlp.2")),
            (
                "/features/features.0/features.0.1/Conv",
                Some("features.0.1"),
            ),
            ("/lm_head/MatMul", Some("lm_head")),
            ("/Add", None),
            ("n17", None),
            ("gpu_0/res2_0_branch2a_1", None),
            ("//MatMul", None),
            ("", None),
        ];
        for (name, expected) in cases {
            assert_eq!(module_from_scoped_name(name).as_deref(), expected, "{name}");
        }
    }

    #[test]
    fn dynamo_name_scopes() {
        let v = "['', 'model', 'model.layers.3', 'model.layers.3.self_attn', 'model.layers.3.self_attn.q_proj', 'linear_8']";
        assert_eq!(
            module_from_name_scopes(v).as_deref(),
            Some("model.layers.3.self_attn.q_proj")
        );
        assert_eq!(module_from_name_scopes("['', 'add_3']"), None);
        assert_eq!(module_from_name_scopes("not a list"), None);
        // The metadata wins over the node name.
        let node = NodeProto {
            name: Some("/x/Add".into()),
            metadata_props: vec![StringStringEntryProto {
                key: Some(NAME_SCOPES_KEY.into()),
                value: Some("['', 'a', 'a.b', 'add']".into()),
            }],
            ..Default::default()
        };
        assert_eq!(module_of(&node).as_deref(), Some("a.b"));
        let node = NodeProto {
            name: Some("/x/Add".into()),
            ..Default::default()
        };
        assert_eq!(module_of(&node).as_deref(), Some("x"));
    }
}
