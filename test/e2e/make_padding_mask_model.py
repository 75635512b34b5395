#!/usr/bin/env python3
"""Self-attention with a run-time key padding mask and a causal mask.

Writes DIR/model.onnx: tokens x[N,T,D] attend to each other under masks
computed at run time, as nn.Transformer's key_padding_mask and a causal
mask built from positions are: `pad` is a bool graph input [N,T] (true:
a padded key), positions are a CumSum of ones derived from x, `future`
compares key and query positions (Greater), the masks are combined with
And (key 0 is never padded, so no row is all masked), Or and Not, and
Where(keep, scores, -inf) selects the scores: -inf sits in the branch not
taken, so its gradient must not turn into NaN. Trilu and a reverse
exclusive CumSum act on activations after the attention.
usage: make_padding_mask_model.py DIR
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
rng = np.random.default_rng(5)
T, D, V = 6, 8, 5
floats = {
    "w_q": rng.normal(0, 0.4, (D, D)),
    "w_k": rng.normal(0, 0.4, (D, D)),
    "w_v": rng.normal(0, 0.4, (D, D)),
    "w_o": rng.normal(0, 0.4, (D, V)),
    "scale": np.array(1 / np.sqrt(D)),
    "zero": np.array(0.0),
    "one": np.array(1.0),
    "tenth": np.array(0.1),
    "minus_inf": np.array(-np.inf),
}
initializers = [numpy_helper.from_array(v.astype(np.float32), k)
                for k, v in floats.items()]
initializers += [
    numpy_helper.from_array(np.array([1], np.int64), "axis1"),
    numpy_helper.from_array(np.array([2], np.int64), "axis2"),
    numpy_helper.from_array(np.array(1, np.int64), "axis1_scalar"),
    numpy_helper.from_array(np.array([False] + [True] * (T - 1)), "paddable"),
]
N = helper.make_node
nodes = [
    N("MatMul", ["x", "w_q"], ["q0"]),
    N("Mul", ["q0", "scale"], ["q"]),
    N("MatMul", ["x", "w_k"], ["k"]),
    N("MatMul", ["x", "w_v"], ["v"]),
    N("Transpose", ["k"], ["k_t"], perm=[0, 2, 1]),
    N("MatMul", ["q", "k_t"], ["scores"]),
    # Positions 1..T of every sequence, computed at run time.
    N("ReduceMean", ["x"], ["x_mean"], axes=[2], keepdims=0),
    N("Mul", ["x_mean", "zero"], ["zeros"]),
    N("Add", ["zeros", "one"], ["ones"]),
    N("CumSum", ["ones", "axis1_scalar"], ["pos"]),
    N("Unsqueeze", ["pos", "axis2"], ["query_pos"]),
    N("Unsqueeze", ["pos", "axis1"], ["key_pos"]),
    N("Greater", ["key_pos", "query_pos"], ["future"]),
    # The key padding mask, broadcast over the query rows.
    N("And", ["pad", "paddable"], ["padded"]),
    N("Unsqueeze", ["padded", "axis1"], ["padded_keys"]),
    N("Or", ["future", "padded_keys"], ["masked"]),
    N("Not", ["masked"], ["keep"]),
    N("Where", ["keep", "scores", "minus_inf"], ["masked_scores"]),
    N("Softmax", ["masked_scores"], ["probs"], axis=-1),
    N("MatMul", ["probs", "v"], ["context"]),
    N("Trilu", ["context"], ["context_lower"], upper=0),
    N("CumSum", ["context_lower", "axis1_scalar"], ["suffix"],
      exclusive=1, reverse=1),
    N("Mul", ["suffix", "tenth"], ["suffix_scaled"]),
    N("Add", ["context", "suffix_scaled"], ["features"]),
    N("MatMul", ["features", "w_o"], ["logits"]),
]
graph = helper.make_graph(
    nodes, "padding_mask",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", T, D]),
     helper.make_tensor_value_info("pad", TensorProto.BOOL, ["N", T])],
    [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", T, V])],
    initializers)
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
onnx.checker.check_model(model, full_check=True)
onnx.save(model, os.path.join(out, "model.onnx"))
