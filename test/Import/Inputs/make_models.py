"""Regenerates the tiny binary ONNX models used by the importer's lit tests.

Run with /usr/bin/python3 (python3-onnx) from this directory.
"""
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

# A named Gemm + Relu with a symbolic batch dim.
w = numpy_helper.from_array(np.arange(6, dtype=np.float32).reshape(3, 2), "fc.weight")
graph = helper.make_graph(
    [helper.make_node("Gemm", ["x", "fc.weight"], ["h"], name="fc", transB=1),
     helper.make_node("Relu", ["h"], ["y"], name="act")],
    "tiny", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 2])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 3])], [w])
onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]),
          "tiny.onnx")

# The same weight stored in an external file next to the model, and a model
# whose external file is missing.
def external_model(location):
    t = onnx.TensorProto()
    t.name, t.data_type = "fc.weight", TensorProto.FLOAT
    t.dims.extend([3, 2])
    t.data_location = TensorProto.EXTERNAL
    for k, v in (("location", location), ("offset", "0"), ("length", "24")):
        e = t.external_data.add()
        e.key, e.value = k, v
    g = helper.make_graph(
        [helper.make_node("Gemm", ["x", "fc.weight"], ["y"], name="fc", transB=1)],
        "ext", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3])], [t])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])

onnx.save(external_model("external.bin"), "external.onnx")
np.arange(6, dtype=np.float32).tofile("external.bin")
onnx.save(external_model("missing.bin"), "external-missing.onnx")

# External data that must not be read: outside the model's directory, by
# `..`, by an absolute path, or through a symbolic link the test creates
# (external-link.onnx -> link.bin), and a location that is not a regular
# file (external-special.onnx -> special.bin, a FIFO the test creates).
onnx.save(external_model("../../etc/passwd"), "external-escape.onnx")
onnx.save(external_model("/dev/zero"), "external-absolute.onnx")
onnx.save(external_model("link.bin"), "external-link.onnx")
onnx.save(external_model("special.bin"), "external-special.onnx")

# Names that are not UTF-8 (ONNX strings must be): a node, a value and an
# initializer, made by patching same-length placeholders in the bytes
# (protobuf's Python API refuses to write such strings).
def patched(model, replacements, path):
    data = model.SerializeToString()
    for old, new in replacements:
        assert len(old) == len(new) and old in data
        data = data.replace(old, new)
    with open(path, "wb") as f:
        f.write(data)

bad = helper.make_graph(
    [helper.make_node("Gemm", ["x", "fc.weight"], ["h"], name="fc", transB=1),
     helper.make_node("Relu", ["h"], ["y"], name="NODE@@")],
    "bad", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 2])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
    [numpy_helper.from_array(np.ones((3, 2), np.float32), "fc.weight")])
bad_model = helper.make_model(bad, opset_imports=[helper.make_opsetid("", 13)])
patched(bad_model, [(b"NODE@@", b"ND\xff\xfe@@")], "bad-utf8-node.onnx")
bad.node[0].output[0] = bad.node[1].input[0] = "VAL@@"
patched(helper.make_model(bad, opset_imports=[helper.make_opsetid("", 13)]),
        [(b"VAL@@", b"V\xc3(@@")], "bad-utf8-value.onnx")

# PyTorch's exporter (training mode, no constant folding): nn.Linear on a
# 3-D input as Transpose(weight) + MatMul + Add, nodes named by module
# scope ("/net/net.0/MatMul"); a node of the root module ("/Relu").
w = numpy_helper.from_array(np.arange(8, dtype=np.float32).reshape(4, 2),
                            "net.0.weight")
b = numpy_helper.from_array(np.arange(4, dtype=np.float32), "net.0.bias")
graph = helper.make_graph(
    [helper.make_node("Transpose", ["net.0.weight"], ["wt"],
                      name="/net/net.0/Transpose", perm=[1, 0]),
     helper.make_node("MatMul", ["x", "wt"], ["m"], name="/net/net.0/MatMul"),
     helper.make_node("Add", ["m", "net.0.bias"], ["h"],
                      name="/net/net.0/Add"),
     helper.make_node("Relu", ["h"], ["y"], name="/Relu")],
    "scoped", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                             ["batch", 3, 2])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 3, 4])],
    [w, b])
onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]),
          "torch-scoped.onnx")
