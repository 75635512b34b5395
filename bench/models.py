#!/usr/bin/env python3
"""Writes benchmark models as ppc graph-dialect MLIR (no weight values).

    python3 bench/models.py bert --layers 24 --batch 64 > bert-large.mlir
    python3 bench/models.py resnet50 --batch 64 > resnet50.mlir

The graphs are what ppc-opt's ONNX importer produces for the same models
(weights as `ppc.weight` without values), so the simulator and search see
the real iteration spaces; only the importer is skipped, which keeps
BERT-Large-sized models a few hundred KB and free of PyTorch.
"""
import argparse
import sys


# Element type of float tensors (--dtype): f32, or bf16 for mixed precision.
FLOAT = "f32"


def ty(shape, dtype=None):
    dtype = dtype or FLOAT
    return "tensor<" + "x".join(str(d) for d in shape) + "x" + dtype + ">"


class Emitter:
    def __init__(self):
        self.lines = []
        self.n = 0

    def value(self):
        self.n += 1
        return "%%v%d" % self.n

    def emit(self, text):
        self.lines.append("    " + text)

    def weight(self, name, shape, frozen=False):
        v = self.value()
        self.emit('%s = ppc.weight "%s"%s : %s'
                  % (v, name, " frozen" if frozen else "", ty(shape)))
        return v

    def op(self, name, text):
        v = self.value()
        self.emit('%s = %s loc("%s")' % (v, text, name))
        return v


def bert(layers, batch, seq, hidden, heads, ff, vocab):
    e = Emitter()
    hd = hidden // heads
    act = [batch, seq, hidden]
    emb = e.weight("embed.weight", [vocab, hidden])
    pos = e.weight("pos_embed", [seq, hidden])
    x = e.op("embed", "ppc.gather %s, %%tokens : (%s, %s) -> %s"
             % (emb, ty([vocab, hidden]), ty([batch, seq], "i64"), ty(act)))
    x = e.op("embed.pos", "ppc.add %s, %s : (%s, %s) -> %s"
             % (x, pos, ty(act), ty([seq, hidden]), ty(act)))

    def linear(name, v, din, dout, shape):
        w = e.weight(name + ".weight", [dout, din])
        b = e.weight(name + ".bias", [dout])
        out = shape[:-1] + [dout]
        return e.op(name, "ppc.linear %s, %s, %s {transpose_weight = true} : "
                    "(%s, %s, %s) -> %s" % (v, w, b, ty(shape), ty([dout, din]),
                                           ty([dout]), ty(out)))

    def layer_norm(name, v):
        s = e.weight(name + ".weight", [hidden])
        b = e.weight(name + ".bias", [hidden])
        return e.op(name, "ppc.layer_norm %s, %s, %s : (%s, %s, %s) -> %s"
                    % (v, s, b, ty(act), ty([hidden]), ty([hidden]), ty(act)))

    def heads_first(name, v):
        split = [batch, seq, heads, hd]
        r = e.op(name + ".split", "ppc.reshape %s : %s -> %s" % (v, ty(act), ty(split)))
        return e.op(name + ".t", "ppc.transpose %s {permutation = array<i64: 0, 2, 1, 3>} : %s -> %s"
                    % (r, ty(split), ty([batch, heads, seq, hd])))

    for l in range(layers):
        p = "layers.%d." % l
        h = layer_norm(p + "ln1", x)
        q = heads_first(p + "q", linear(p + "attn.q", h, hidden, hidden, act))
        k = heads_first(p + "k", linear(p + "attn.k", h, hidden, hidden, act))
        v = heads_first(p + "v", linear(p + "attn.v", h, hidden, hidden, act))
        bh = [batch, heads, seq, hd]
        scores = e.op(p + "attn.scores", "ppc.matmul %s, %s {transpose_rhs = true} : (%s, %s) -> %s"
                      % (q, k, ty(bh), ty(bh), ty([batch, heads, seq, seq])))
        probs = e.op(p + "attn.softmax", "ppc.softmax %s : %s" % (scores, ty([batch, heads, seq, seq])))
        ctx = e.op(p + "attn.context", "ppc.matmul %s, %s : (%s, %s) -> %s"
                   % (probs, v, ty([batch, heads, seq, seq]), ty(bh), ty(bh)))
        ctx = e.op(p + "attn.merge.t", "ppc.transpose %s {permutation = array<i64: 0, 2, 1, 3>} : %s -> %s"
                   % (ctx, ty(bh), ty([batch, seq, heads, hd])))
        ctx = e.op(p + "attn.merge", "ppc.reshape %s : %s -> %s" % (ctx, ty([batch, seq, heads, hd]), ty(act)))
        o = linear(p + "attn.out", ctx, hidden, hidden, act)
        x = e.op(p + "residual1", "ppc.add %s, %s : (%s, %s) -> %s" % (x, o, ty(act), ty(act), ty(act)))
        h = layer_norm(p + "ln2", x)
        f = linear(p + "ff1", h, hidden, ff, act)
        f = e.op(p + "gelu", "ppc.gelu %s : %s" % (f, ty([batch, seq, ff])))
        f = linear(p + "ff2", f, ff, hidden, [batch, seq, ff])
        x = e.op(p + "residual2", "ppc.add %s, %s : (%s, %s) -> %s" % (x, f, ty(act), ty(act), ty(act)))
    x = layer_norm("final_ln", x)
    logits = linear("lm_head", x, hidden, vocab, act)
    out = [batch, seq, vocab]
    header = "func.func @main(%%tokens: %s) -> %s {" % (ty([batch, seq], "i64"), ty(out))
    return header, e, logits, out


def resnet50(batch, classes=1000):
    e = Emitter()

    def conv(v, shape, cout, k, stride, pad, name):
        n, cin, h, w = shape
        oh = (h + 2 * pad - k) // stride + 1
        ow = (w + 2 * pad - k) // stride + 1
        wt = e.weight(name + ".weight", [cout, cin, k, k])
        out = [n, cout, oh, ow]
        r = e.op(name, "ppc.conv2d %s, %s {pads = array<i64: %d, %d, %d, %d>, strides = array<i64: %d, %d>} : (%s, %s) -> %s"
                 % (v, wt, pad, pad, pad, pad, stride, stride, ty(shape), ty([cout, cin, k, k]), ty(out)))
        return r, out

    def bn(v, shape, name, relu=True):
        c = shape[1]
        ws = [e.weight(name + s, [c]) for s in (".weight", ".bias")]
        # Running statistics are state the optimizer does not train.
        ws += [e.weight(name + s, [c], frozen=True)
               for s in (".running_mean", ".running_var")]
        r = e.op(name, "ppc.batch_norm %s, %s, %s, %s, %s : (%s, %s, %s, %s, %s) -> %s"
                 % (v, ws[0], ws[1], ws[2], ws[3], ty(shape), ty([c]), ty([c]), ty([c]), ty([c]), ty(shape)))
        if relu:
            r = e.op(name + ".relu", "ppc.relu %s : %s" % (r, ty(shape)))
        return r

    x, s = conv("%image", [batch, 3, 224, 224], 64, 7, 2, 3, "conv1")
    x = bn(x, s, "bn1")
    ps = [batch, 64, 56, 56]
    x = e.op("maxpool", "ppc.max_pool2d %s {kernel = array<i64: 3, 3>, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : %s -> %s"
             % (x, ty(s), ty(ps)))
    s = ps
    cin = 64
    for stage, (width, blocks, stride) in enumerate([(64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)]):
        for b in range(blocks):
            p = "layer%d.%d." % (stage + 1, b)
            st = stride if b == 0 else 1
            y, ys = conv(x, s, width, 1, 1, 0, p + "conv1")
            y = bn(y, ys, p + "bn1")
            y, ys = conv(y, ys, width, 3, st, 1, p + "conv2")
            y = bn(y, ys, p + "bn2")
            y, ys = conv(y, ys, width * 4, 1, 1, 0, p + "conv3")
            y = bn(y, ys, p + "bn3", relu=False)
            if b == 0:
                sc, scs = conv(x, s, width * 4, 1, st, 0, p + "downsample.0")
                sc = bn(sc, scs, p + "downsample.1", relu=False)
            else:
                sc = x
            x = e.op(p + "add", "ppc.add %s, %s : (%s, %s) -> %s" % (y, sc, ty(ys), ty(ys), ty(ys)))
            x = e.op(p + "relu", "ppc.relu %s : %s" % (x, ty(ys)))
            s = ys
    pooled = [batch, 2048, 1, 1]
    x = e.op("avgpool", "ppc.global_avg_pool %s : %s -> %s" % (x, ty(s), ty(pooled)))
    x = e.op("flatten", "ppc.reshape %s : %s -> %s" % (x, ty(pooled), ty([batch, 2048])))
    w = e.weight("fc.weight", [classes, 2048])
    bias = e.weight("fc.bias", [classes])
    out = [batch, classes]
    x = e.op("fc", "ppc.linear %s, %s, %s {transpose_weight = true} : (%s, %s, %s) -> %s"
             % (x, w, bias, ty([batch, 2048]), ty([classes, 2048]), ty([classes]), ty(out)))
    header = "func.func @main(%%image: %s) -> %s {" % (ty([batch, 3, 224, 224]), ty(out))
    return header, e, x, out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model", choices=["bert", "resnet50"])
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--layers", type=int, default=24)
    ap.add_argument("--seq", type=int, default=512)
    ap.add_argument("--hidden", type=int, default=1024)
    ap.add_argument("--heads", type=int, default=16)
    ap.add_argument("--ff", type=int, default=4096)
    ap.add_argument("--vocab", type=int, default=30522)
    ap.add_argument("--dtype", choices=["f32", "bf16", "f16"], default="f32")
    a = ap.parse_args()
    global FLOAT
    FLOAT = a.dtype
    if a.model == "bert":
        header, e, result, out = bert(a.layers, a.batch, a.seq, a.hidden, a.heads, a.ff, a.vocab)
    else:
        header, e, result, out = resnet50(a.batch)
    sys.stdout.write("module {\n  " + header + "\n")
    sys.stdout.write("\n".join(e.lines) + "\n")
    sys.stdout.write("    return %s : %s\n  }\n}\n" % (result, ty(out)))


if __name__ == "__main__":
    main()
