#!/usr/bin/env python3
"""A small decoder of transposed convolutions, as an ONNX model.

Writes DIR/model.onnx: x[N,3,6,6] -> ConvTranspose (stride 2, pads 1,
output_padding 1, bias) -> Relu -> Conv (stride 2, pad 1) -> grouped
ConvTranspose (2 groups, stride 2, no bias) -> y[N,4,12,12], then a 1-D
ConvTranspose of a [N,2,5] input with output_shape -> z[N,3,11]. The
importer makes ppc.conv_transpose2d of each (the 1-D one between reshapes),
and the training step derives their input and weight gradients.
usage: make_conv_transpose_model.py DIR
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
rng = np.random.default_rng(5)
inits = {
    "up1.weight": rng.normal(0, 0.3, (3, 4, 3, 3)),
    "up1.bias": rng.normal(0, 0.1, 4),
    "down.weight": rng.normal(0, 0.3, (4, 4, 3, 3)),
    "up2.weight": rng.normal(0, 0.3, (4, 2, 2, 2)),
    "line.weight": rng.normal(0, 0.3, (2, 3, 3)),
    "line.bias": rng.normal(0, 0.1, 3),
}
initializers = [numpy_helper.from_array(v.astype(np.float32), k)
                for k, v in inits.items()]
N = helper.make_node
nodes = [
    N("ConvTranspose", ["x", "up1.weight", "up1.bias"], ["u1"],
      strides=[2, 2], pads=[1, 1, 1, 1], output_padding=[1, 1]),
    N("Relu", ["u1"], ["r1"]),
    N("Conv", ["r1", "down.weight"], ["d"], strides=[2, 2],
      pads=[1, 1, 1, 1]),
    N("ConvTranspose", ["d", "up2.weight"], ["y"], strides=[2, 2], group=2),
    N("ConvTranspose", ["s", "line.weight", "line.bias"], ["z"], strides=[2],
      output_shape=[11]),
]
graph = helper.make_graph(
    nodes, "conv_transpose",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 6, 6]),
     helper.make_tensor_value_info("s", TensorProto.FLOAT, ["N", 2, 5])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4, 12, 12]),
     helper.make_tensor_value_info("z", TensorProto.FLOAT, ["N", 3, 11])],
    initializers)
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
onnx.checker.check_model(model, full_check=True)
onnx.save(model, os.path.join(out, "model.onnx"))
