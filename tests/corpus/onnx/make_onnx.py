#!/usr/bin/env python3
"""Writes the malformed ONNX files of this folder (run from this folder; no dependencies).

Protobuf is encoded by hand (field numbers from onnx.proto) so that broken files can be
made on purpose: a model is a ModelProto (ir_version = 1, graph = 7, opset_import = 8),
its graph a GraphProto (node = 1, initializer = 5, input = 11, output = 12).
"""


def varint(n):
    n &= (1 << 64) - 1
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def key(field, wire):
    return varint(field << 3 | wire)


def vint(field, n):
    return key(field, 0) + varint(n)


def ld(field, payload):
    if isinstance(payload, str):
        payload = payload.encode()
    return key(field, 2) + varint(len(payload)) + payload


def dim(value=None, param=None):
    return vint(1, value) if value is not None else ld(2, param)


def value_info(name, dims, elem_type=1):
    shape = b"".join(ld(1, dim(d) if isinstance(d, int) else dim(param=d)) for d in dims)
    tensor = vint(1, elem_type) + ld(2, shape)
    return ld(1, name) + ld(2, ld(1, tensor))


def attr_ints(name, values):
    return ld(1, name) + b"".join(vint(8, v) for v in values)


def node(op, inputs, outputs, attrs=()):
    return b"".join(ld(1, i) for i in inputs) + b"".join(ld(2, o) for o in outputs) + ld(3, op + "_" + outputs[0]) + ld(4, op) + b"".join(ld(5, a) for a in attrs)


def initializer(name, dims, data_type=1):
    return b"".join(vint(1, d) for d in dims) + vint(2, data_type) + ld(8, name)


def model(nodes, inputs, outputs, inits=()):
    graph = b"".join(ld(1, n) for n in nodes) + ld(2, "corpus") + b"".join(ld(5, i) for i in inits)
    graph += b"".join(ld(11, i) for i in inputs) + b"".join(ld(12, o) for o in outputs)
    return vint(1, 7) + ld(7, graph) + ld(8, vint(2, 13))


def mlp(x_dims=(1, 16), w_dims=(16, 8)):
    return model(
        [node("MatMul", ["x", "w"], ["h"]), node("Relu", ["h"], ["y"])],
        [value_info("x", list(x_dims))],
        [value_info("y", [x_dims[0], w_dims[1]])],
        [initializer("w", list(w_dims))],
    )


def write(name, data):
    with open(name, "wb") as f:
        f.write(data)


good = mlp()
write("ok.onnx", good)
write("truncated.onnx", good[: len(good) * 2 // 3])
write("text_file.onnx", b"this is a text file, not an ONNX model\n")
write("empty.onnx", b"")
# Field 7 (graph) declaring 2^32 - 1 bytes, followed by a few.
write("huge_declared_length.onnx", vint(1, 7) + key(7, 2) + varint((1 << 32) - 1) + b"\x0a\x00")
# A packed repeated field (dims) declaring 2^62 bytes inside an initializer.
write("huge_packed_length.onnx", model([node("Relu", ["x"], ["y"])], [value_info("x", [1, 4])], [], [key(1, 2) + varint(1 << 62) + b"\x01"]))
write("negative_dim.onnx", mlp(w_dims=(-3, 8)))
write("reads_unknown_tensor.onnx", model([node("MatMul", ["x", "ghost"], ["y"])], [value_info("x", [1, 16])], [value_info("y", [1, 8])]))
write("no_operator.onnx", model([], [value_info("x", [1, 16])], [value_info("x", [1, 16])]))
# MaxPool on a rank-1 input (shape inference used to index past the shape).
write("maxpool_rank1.onnx", model([node("MaxPool", ["x"], ["y"], [attr_ints("kernel_shape", [])])], [value_info("x", [4])], [value_info("y", [4])]))
# A huge input: 2^62 x 2^62 elements.
write("huge_dims.onnx", mlp(x_dims=(1 << 62, 1 << 62), w_dims=(1 << 62, 8)))
# A wire type protobuf does not have (7) as the first key.
write("bad_wire_type.onnx", b"\x0f\x01\x02\x03")
# Two graphs' worth of trailing bytes after a valid model: a field 7 again, truncated.
write("trailing_garbage.onnx", good + b"}{ garbage")
