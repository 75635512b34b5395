#!/usr/bin/env python3
"""A small classifier whose trained-looking weights must reach ppc-run.

Writes into DIR:
  model.onnx, model.w2.bin  x[8,6] -> Gemm(w1, b1) -> Relu -> MatMul(w2)
                            -> Add(b2) -> logits[8,5]; w2 lives in external
                            data next to the model;
  x.npy, labels.npy         one batch and its classes;
  expected_loss.txt         softmax cross-entropy (mean over the batch) of
                            the logits computed here in numpy from the same
                            initializers: ppc-run's step-1 loss must equal it.
usage: make_weights_model.py DIR
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
rng = np.random.default_rng(7)
batch, features, hidden, classes = 8, 6, 16, 5
w1 = rng.normal(0, 0.8, (hidden, features)).astype(np.float32)
b1 = rng.normal(0, 0.5, hidden).astype(np.float32)
w2 = rng.normal(0, 0.8, (hidden, classes)).astype(np.float32)
b2 = rng.normal(0, 0.5, classes).astype(np.float32)
x = rng.normal(0, 1, (batch, features)).astype(np.float32)
labels = rng.integers(0, classes, batch).astype(np.int64)

w2_external = onnx.TensorProto()
w2_external.name, w2_external.data_type = "head.weight", TensorProto.FLOAT
w2_external.dims.extend(w2.shape)
w2_external.data_location = TensorProto.EXTERNAL
for key, value in (("location", "model.w2.bin"), ("offset", "0"),
                   ("length", str(w2.nbytes))):
    entry = w2_external.external_data.add()
    entry.key, entry.value = key, value
w2.tofile(os.path.join(out, "model.w2.bin"))

graph = helper.make_graph(
    [helper.make_node("Gemm", ["x", "fc.weight", "fc.bias"], ["h"], name="fc",
                      transB=1),
     helper.make_node("Relu", ["h"], ["r"], name="act"),
     helper.make_node("MatMul", ["r", "head.weight"], ["m"], name="head"),
     helper.make_node("Add", ["m", "head.bias"], ["logits"], name="head_bias")],
    "classifier",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", features])],
    [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", classes])],
    [numpy_helper.from_array(w1, "fc.weight"),
     numpy_helper.from_array(b1, "fc.bias"), w2_external,
     numpy_helper.from_array(b2, "head.bias")])
onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]),
          os.path.join(out, "model.onnx"))
np.save(os.path.join(out, "x.npy"), x)
np.save(os.path.join(out, "labels.npy"), labels)

logits = (np.maximum(x.astype(np.float64) @ w1.T + b1, 0) @ w2 + b2)
shifted = logits - logits.max(axis=1, keepdims=True)
log_softmax = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
loss = -log_softmax[np.arange(batch), labels].mean()
with open(os.path.join(out, "expected_loss.txt"), "w") as f:
    f.write(f"{loss:.9g}\n")
