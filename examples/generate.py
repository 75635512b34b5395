#!/usr/bin/python3
"""Generate the small example ONNX models bundled with ppc.

Run with Debian's interpreter (python3-onnx, python3-numpy):

    /usr/bin/python3 examples/generate.py            # writes examples/*.onnx
    /usr/bin/python3 examples/generate.py OUTDIR     # writes OUTDIR/*.onnx

The output is deterministic: weights come from a fixed numpy seed per model and
the protobuf is serialized with fixed producer fields, so regenerating gives
byte-identical files (with the same onnx version).

Models (all with a symbolic batch dimension "N" on inputs and outputs, which
ppc-opt's --batch-size binds):

  mlp.onnx          x[N,784] -> Gemm/Relu x3 -> logits[N,10]                 opset 13
  cnn.onnx          image[N,3,32,32] -> Conv/BN/Relu/MaxPool x2, grouped Conv,
                    GlobalAveragePool, Flatten, Gemm -> logits[N,10]          opset 13
  transformer.onnx  tokens[N,16] int64 -> embedding + 2 encoder blocks
                    -> logits[N,16,100]                                       opset 17
  tied.onnx         x[N,32] -> Gemm/Relu x3 -> Gemm -> logits[N,10], with shared
                    weights as exporters write them: one 64x64 weight used by
                    layers 2 and 3 (tied), one bias initializer used by layers
                    1-3 (identical initializers de-duplicated)               opset 13

Weights are small random values stored as float32 initializers; scalar and
shape constants are Constant nodes (as the PyTorch exporter writes them).
"""

import collections
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

PRODUCER = "ppc examples/generate.py"


def quantize(x):
    """Round to multiples of 2**-8 in float32.

    The values stay ordinary float32 weights, but their low mantissa bytes are zero,
    so git's zlib stores the files at a fraction of their size (random float32 does
    not compress).  The example models' numbers carry no meaning anyway.
    """
    return (np.round(np.asarray(x, dtype=np.float64) * 256.0) / 256.0).astype(np.float32)


class Builder:
    """Small helper around onnx.helper that names values and collects nodes."""

    def __init__(self, seed):
        self.rng = np.random.RandomState(seed)
        self.nodes = []
        self.initializers = []
        self.counter = collections.Counter()

    def fresh(self, prefix):
        self.counter[prefix] += 1
        return "%s_%d" % (prefix, self.counter[prefix])

    def op(self, op_type, inputs, name=None, n_out=1, **attrs):
        name = name or self.fresh(op_type.lower())
        outs = [name] if n_out == 1 else ["%s_%d" % (name, i) for i in range(n_out)]
        self.nodes.append(helper.make_node(op_type, inputs, outs, name=name, **attrs))
        return outs[0] if n_out == 1 else outs

    def weight(self, name, shape, scale=None):
        """Random float32 initializer, scaled like a fan-in normal init."""
        if scale is None:
            fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else int(shape[0])
            scale = 1.0 / np.sqrt(max(fan_in, 1))
        data = quantize(self.rng.standard_normal(shape) * scale)
        self.initializers.append(numpy_helper.from_array(data, name))
        return name

    def init(self, name, array):
        array = np.asarray(array)
        if array.dtype == np.float32:
            array = quantize(array)
        self.initializers.append(numpy_helper.from_array(array, name))
        return name

    def const(self, array, name=None):
        """A Constant node (not an initializer), as exporters emit for scalars/shapes."""
        name = name or self.fresh("const")
        t = numpy_helper.from_array(np.asarray(array), name + "_value")
        return self.op("Constant", [], name=name, value=t)


def finish(b, name, inputs, outputs, opset, doc):
    graph = helper.make_graph(b.nodes, name, inputs, outputs, initializer=b.initializers)
    model = helper.make_model(
        graph,
        producer_name=PRODUCER,
        producer_version="1",
        opset_imports=[helper.make_opsetid("", opset)],
        doc_string=doc,
    )
    onnx.checker.check_model(model, full_check=True)
    inferred = onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True)
    onnx.checker.check_model(inferred)
    return model


# --------------------------------------------------------------------------- mlp
def build_mlp():
    b = Builder(seed=1)
    x = "x"
    dims = [784, 128, 64, 10]
    h = x
    for i in range(3):
        w = b.weight("fc%d.weight" % (i + 1), [dims[i + 1], dims[i]])
        bias = b.weight("fc%d.bias" % (i + 1), [dims[i + 1]], scale=0.01)
        out = "logits" if i == 2 else None
        h = b.op("Gemm", [h, w, bias], name=out or "fc%d" % (i + 1), transB=1)
        if i < 2:
            h = b.op("Relu", [h], name="relu%d" % (i + 1))
    return finish(
        b, "mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 784])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", 10])],
        13, "MLP 784-128-64-10 with Relu (ppc example)")


# --------------------------------------------------------------------------- cnn
def build_cnn():
    b = Builder(seed=2)

    def conv(x, name, cin, cout, group=1):
        w = b.weight(name + ".weight", [cout, cin // group, 3, 3])
        bias = b.weight(name + ".bias", [cout], scale=0.01)
        return b.op("Conv", [x, w, bias], name=name, kernel_shape=[3, 3],
                    pads=[1, 1, 1, 1], strides=[1, 1], dilations=[1, 1], group=group)

    def bn(x, name, c):
        scale = b.init(name + ".weight", (1.0 + 0.1 * b.rng.standard_normal(c)).astype(np.float32))
        bias = b.init(name + ".bias", (0.1 * b.rng.standard_normal(c)).astype(np.float32))
        mean = b.init(name + ".running_mean", (0.1 * b.rng.standard_normal(c)).astype(np.float32))
        var = b.init(name + ".running_var", (1.0 + 0.1 * b.rng.random_sample(c)).astype(np.float32))
        return b.op("BatchNormalization", [x, scale, bias, mean, var], name=name,
                    epsilon=1e-5, momentum=0.9)

    h = "image"
    h = conv(h, "conv1", 3, 16)
    h = bn(h, "bn1", 16)
    h = b.op("Relu", [h], name="relu1")
    h = b.op("MaxPool", [h], name="pool1", kernel_shape=[2, 2], strides=[2, 2])   # 16x16
    h = conv(h, "conv2", 16, 32)
    h = bn(h, "bn2", 32)
    h = b.op("Relu", [h], name="relu2")
    h = b.op("MaxPool", [h], name="pool2", kernel_shape=[2, 2], strides=[2, 2])   # 8x8
    h = conv(h, "conv3", 32, 32, group=4)
    h = b.op("Relu", [h], name="relu3")
    h = b.op("GlobalAveragePool", [h], name="gap")                                 # [N,32,1,1]
    h = b.op("Flatten", [h], name="flatten", axis=1)                               # [N,32]
    w = b.weight("fc.weight", [10, 32])
    bias = b.weight("fc.bias", [10], scale=0.01)
    b.op("Gemm", [h, w, bias], name="logits", transB=1)
    return finish(
        b, "cnn",
        [helper.make_tensor_value_info("image", TensorProto.FLOAT, ["N", 3, 32, 32])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", 10])],
        13, "Small CNN: Conv/BN/Relu/MaxPool x2, grouped Conv, GAP, Gemm (ppc example)")


# ------------------------------------------------------------------- transformer
SEQ, DIM, HEADS, HEAD_DIM, FF, VOCAB, LAYERS = 16, 32, 4, 8, 64, 100, 2


def build_transformer():
    b = Builder(seed=3)

    def batch_dim(x):
        """Shape(x) -> Gather(0) -> Unsqueeze: the [N] of a tensor, as exporters write it."""
        s = b.op("Shape", [x])
        n = b.op("Gather", [s, b.const(np.array(0, dtype=np.int64))], axis=0)   # scalar
        return b.op("Unsqueeze", [n, b.const(np.array([0], dtype=np.int64))])   # [1]

    def shape_of(x, tail):
        """Concat([N], tail constants) computed from x's runtime shape."""
        n = batch_dim(x)
        return b.op("Concat", [n, b.const(np.array(tail, dtype=np.int64))], axis=0)

    def linear(x, name, din, dout, bias=True):
        w = b.weight(name + ".weight", [din, dout], scale=1.0 / np.sqrt(din))  # MatMul layout
        y = b.op("MatMul", [x, w], name=name + ".matmul")
        if bias:
            bb = b.weight(name + ".bias", [dout], scale=0.01)
            y = b.op("Add", [y, bb], name=name + ".add")
        return y

    def layer_norm(x, name):
        g = b.init(name + ".weight", (1.0 + 0.05 * b.rng.standard_normal(DIM)).astype(np.float32))
        bb = b.init(name + ".bias", (0.05 * b.rng.standard_normal(DIM)).astype(np.float32))
        return b.op("LayerNormalization", [x, g, bb], name=name, axis=-1, epsilon=1e-5)

    # Embedding + learned positional embedding.
    emb = b.weight("embed.weight", [VOCAB, DIM], scale=0.1)
    pos = b.weight("pos_embed", [SEQ, DIM], scale=0.1)
    h = b.op("Gather", [emb, "tokens"], name="embed", axis=0)                   # [N,16,32]
    h = b.op("Add", [h, pos], name="embed.add_pos")

    inv_sqrt2 = b.const(np.array(np.sqrt(2.0), dtype=np.float32), name="sqrt2")
    half = b.const(np.array(0.5, dtype=np.float32), name="half")
    one = b.const(np.array(1.0, dtype=np.float32), name="one")
    scale = b.const(np.array(np.sqrt(HEAD_DIM), dtype=np.float32), name="sqrt_head_dim")

    for l in range(LAYERS):
        p = "layers.%d." % l
        x = h
        a = layer_norm(x, p + "ln1")
        # Reshape targets [N,16,4,8] from a Shape->Gather->Concat subgraph, one per
        # block (on the normalized input), shared by Q, K and V.
        heads_shape = shape_of(a, [SEQ, HEADS, HEAD_DIM])
        qkv = []
        for t in ("q", "k", "v"):
            y = linear(a, p + "attn." + t, DIM, DIM)
            y = b.op("Reshape", [y, heads_shape], name=p + "attn." + t + ".reshape")
            y = b.op("Transpose", [y], name=p + "attn." + t + ".transpose", perm=[0, 2, 1, 3])
            qkv.append(y)                                                        # [N,4,16,8]
        q, k, v = qkv
        kt = b.op("Transpose", [k], name=p + "attn.k_t", perm=[0, 1, 3, 2])      # [N,4,8,16]
        s = b.op("MatMul", [q, kt], name=p + "attn.scores")                      # [N,4,16,16]
        s = b.op("Div", [s, scale], name=p + "attn.scale")
        s = b.op("Softmax", [s], name=p + "attn.softmax", axis=-1)
        o = b.op("MatMul", [s, v], name=p + "attn.context")                      # [N,4,16,8]
        o = b.op("Transpose", [o], name=p + "attn.context.transpose", perm=[0, 2, 1, 3])
        # Back to [N,16,32]; this target comes from the token input's shape.
        o = b.op("Reshape", [o, shape_of("tokens", [SEQ, DIM])], name=p + "attn.merge_heads")
        o = linear(o, p + "attn.out", DIM, DIM)
        h = b.op("Add", [x, o], name=p + "residual1")

        x = h
        m = layer_norm(x, p + "ln2")
        m = linear(m, p + "mlp.fc1", DIM, FF)
        # GELU, decomposed erf form: x * 0.5 * (1 + erf(x / sqrt(2)))
        e = b.op("Div", [m, inv_sqrt2], name=p + "gelu.div")
        e = b.op("Erf", [e], name=p + "gelu.erf")
        e = b.op("Add", [e, one], name=p + "gelu.add")
        g = b.op("Mul", [m, e], name=p + "gelu.mul")
        g = b.op("Mul", [g, half], name=p + "gelu.mul_half")
        m = linear(g, p + "mlp.fc2", FF, DIM)
        h = b.op("Add", [x, m], name=p + "residual2")

    w = b.weight("lm_head.weight", [DIM, VOCAB], scale=1.0 / np.sqrt(DIM))
    b.op("MatMul", [h, w], name="logits")
    return finish(
        b, "transformer",
        [helper.make_tensor_value_info("tokens", TensorProto.INT64, ["N", SEQ])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", SEQ, VOCAB])],
        17, "Tiny transformer encoder LM: 2 blocks, d=32, 4 heads, ff=64, vocab 100 (ppc example)")


# ------------------------------------------------------------------------ report
def summarize(model):
    """(op histogram, trainable parameter count, non-trainable buffer count)."""
    ops = collections.Counter(n.op_type for n in model.graph.node)
    params = buffers = 0
    for t in model.graph.initializer:
        n = int(np.prod(t.dims))
        if t.name.endswith(".running_mean") or t.name.endswith(".running_var"):
            buffers += n
        else:
            params += n
    return ops, params, buffers


# -------------------------------------------------------------------------- tied
def build_tied():
    b = Builder(seed=4)
    w_in = b.weight("fc1.weight", [64, 32])
    w_tied = b.weight("tied.weight", [64, 64])
    bias = b.weight("shared.bias", [64], scale=0.01)
    h = "x"
    for i, w in enumerate([w_in, w_tied, w_tied]):
        h = b.op("Gemm", [h, w, bias], name="fc%d" % (i + 1), transB=1)
        h = b.op("Relu", [h], name="relu%d" % (i + 1))
    w_out = b.weight("out.weight", [10, 64])
    b_out = b.weight("out.bias", [10], scale=0.01)
    b.op("Gemm", [h, w_out, b_out], name="logits", transB=1)
    return finish(
        b, "tied",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 32])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", 10])],
        13, "MLP with a tied weight and a shared bias (ppc example)")


def main():
    outdir = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
    os.makedirs(outdir, exist_ok=True)
    for name, build in (("mlp", build_mlp), ("cnn", build_cnn), ("transformer", build_transformer),
                        ("tied", build_tied)):
        model = build()
        path = os.path.join(outdir, name + ".onnx")
        data = model.SerializeToString(deterministic=True)
        with open(path, "wb") as f:
            f.write(data)
        onnx.checker.check_model(path)  # reload from disk and check again
        ops, params, buffers = summarize(model)
        print("%s: %s, %d bytes, opset %d, %d nodes, %d initializers: %d trainable parameters"
              ", %d BatchNormalization running-statistics elements" % (
                  name, path, len(data), model.opset_import[0].version, len(model.graph.node),
                  len(model.graph.initializer), params, buffers))
        for op, n in sorted(ops.items()):
            print("    %-20s %d" % (op, n))


if __name__ == "__main__":
    main()
