#!/usr/bin/env python3
"""Cross-attention as PyTorch exports nn.MultiheadAttention(q, kv, kv).

Writes DIR/model.onnx: tokens' embeddings x[N,T,D] attend to a memory
m[N,T,D]; one initializer `in_proj_weight` [3D, D] (and its bias) is sliced
into the query part [0:D] and the key/value part [D:3D], as torch's
`_in_projection_packed` does for cross-attention, and a causal mask buffer
with -inf above the diagonal is an initializer too. Both shapes broke the
partitioned step once: the slices read disjoint regions of one weight, and
an optimizer step moved the mask's finite entries.
usage: make_attention_buffers_model.py DIR
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
rng = np.random.default_rng(3)
T, D, V = 6, 8, 11
inits = {
    "in_proj_weight": rng.normal(0, 0.4, (3 * D, D)),
    "in_proj_bias": rng.normal(0, 0.1, 3 * D),
    "out_proj.weight": rng.normal(0, 0.4, (D, V)),
    "causal_mask": np.triu(np.full((T, T), -np.inf), 1),
}
ints = {"zero": [0], "d": [D], "three_d": [3 * D], "two_d": [2 * D],
        "axis0": [0], "axis2": [2]}
initializers = [numpy_helper.from_array(v.astype(np.float32), k)
                for k, v in inits.items()]
initializers += [numpy_helper.from_array(np.array(v, np.int64), k)
                 for k, v in ints.items()]
N = helper.make_node
nodes = [
    N("Slice", ["in_proj_weight", "zero", "d", "axis0"], ["w_q"]),
    N("Slice", ["in_proj_weight", "d", "three_d", "axis0"], ["w_kv"]),
    N("Slice", ["in_proj_bias", "zero", "d", "axis0"], ["b_q"]),
    N("Slice", ["in_proj_bias", "d", "three_d", "axis0"], ["b_kv"]),
    N("Transpose", ["w_q"], ["w_q_t"], perm=[1, 0]),
    N("Transpose", ["w_kv"], ["w_kv_t"], perm=[1, 0]),
    N("MatMul", ["x", "w_q_t"], ["q0"]),
    N("Add", ["q0", "b_q"], ["q"]),
    N("MatMul", ["m", "w_kv_t"], ["kv0"]),
    N("Add", ["kv0", "b_kv"], ["kv"]),
    N("Slice", ["kv", "zero", "d", "axis2"], ["k"]),
    N("Slice", ["kv", "d", "two_d", "axis2"], ["v"]),
    N("Transpose", ["k"], ["k_t"], perm=[0, 2, 1]),
    N("MatMul", ["q", "k_t"], ["scores"]),
    N("Add", ["scores", "causal_mask"], ["masked"]),
    N("Softmax", ["masked"], ["probs"], axis=-1),
    N("MatMul", ["probs", "v"], ["context"]),
    N("MatMul", ["context", "out_proj.weight"], ["logits"]),
]
graph = helper.make_graph(
    nodes, "attention_buffers",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", T, D]),
     helper.make_tensor_value_info("m", TensorProto.FLOAT, ["N", T, D])],
    [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", T, V])],
    initializers)
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
onnx.checker.check_model(model, full_check=True)
onnx.save(model, os.path.join(out, "model.onnx"))
