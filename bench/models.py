#!/usr/bin/env python3
"""Writes benchmark models as ppc graph-dialect MLIR (no weight values).

    python3 bench/models.py bert --layers 24 --batch 64 > bert-large.mlir
    python3 bench/models.py resnet50 --batch 64 > resnet50.mlir
    python3 bench/models.py resnet101 --batch 1024 > resnet101.mlir
    python3 bench/models.py alexnet | vgg16 | inception_v3 | rnnlm | transformer

Models (sizes as published; --batch is the global batch of one step):
  bert          BERT-style encoder (--layers, --hidden, --heads, --ff, --seq,
                --vocab), untied output layer
  gpt           the same stack at GPT sizes (--size): 1.5b (GPT-2 XL: 48
                layers, hidden 1600, 32 heads of 50 instead of 25 of 64),
                8.3b (Megatron-LM: 72 layers, hidden 3072, 32 heads), 13b
                (GPT-3 13B: 40 layers, hidden 5120, 40 heads), 39b
                (Megatron-LM: 48 layers, hidden 8192, 64 heads), 145b
                (Megatron-LM: 80 layers, hidden 12288, 96 heads), 175b
                (GPT-3: 96 layers, hidden 12288, 96 heads); seq 1024
                (2048 from 13b on), ff 4 x hidden, vocab 51200 (GPT-2's
                50257 padded as Megatron-LM pads it); a decoder's causal mask
                changes no shape, so the graph is the encoder's
  moe           the llama decoder with mixture-of-experts feed-forward
                layers (--size mixtral-8x7b, the default; --experts 8,
                --top-k 2, --capacity-factor 1.25, --moe-every 1,
                --aux-loss-coef 0)
  llama         a Llama-2-shaped decoder (--size 7b or 70b; seq 4096 unless
                --seq): fused causal attention without biases, SwiGLU
                feed-forward, RMSNorm as layer norm, no rotary embedding,
                as many key/value heads as query heads
  transformer   the same encoder stack at Transformer-base size: 6 layers,
                hidden 512, 8 heads, ff 2048, seq 128, vocab 32000 (unless
                overridden)
  resnet50/101  torchvision ResNet, bottleneck blocks [3,4,6,3]/[3,4,23,3]
                (25.6 M / 44.5 M parameters, 4.1 / 7.8 GMAC at 224x224)
  alexnet       torchvision AlexNet: 5 conv + 3 fc, 224x224 (61.1 M
                parameters, 0.71 GMAC)
  vgg16         torchvision VGG-16 (configuration D): 13 conv 3x3 + 3 fc,
                224x224 (138.4 M parameters, 15.5 GMAC)
  inception_v3  torchvision Inception-v3 without the aux head, 299x299
                (23.8 M parameters, 5.7 GMAC)
  --exported    resnet*/inception_v3 as PyTorch's eval-mode ONNX export
                writes them: batch norm folded into the convolutions' biases,
                and identical initializers de-duplicated, so one zero bias
                tensor serves every convolution of the same width (shared
                weights, as in torchvision's ResNet-50/101 and Inception-v3
                exports)
  --image N     input height and width of resnet*/inception_v3 (224/299)
  mlp           --layers (8) times linear (--hidden, 1024) + ReLU, then a
                linear to 10 classes: the search's scaling with depth
  rnnlm         FlexFlow's RNNLM: embedding, 2-layer LSTM unrolled over
                --steps (20) time steps, hidden --hidden (1024 unless given),
                vocab 10000 (PTB), a linear to the vocab on every step's
                output; the LSTM weights are one ppc.weight used by all steps

The graphs are what ppc-opt's ONNX importer produces for the same models
(weights as `ppc.weight` without values), so the simulator and search see
the real iteration spaces; only the importer is skipped, which keeps
BERT-Large-sized models a few hundred KB and free of PyTorch.
"""
import argparse
import sys


# Element type of float tensors (--dtype): f32, or bf16 for mixed precision.
FLOAT = "f32"
# --exported: batch norm folded into biases, identical biases shared.
EXPORTED = False


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

    def multi(self, name, count, text):
        """An op with `count` results; returns their names."""
        v = self.value()
        self.emit('%s:%d = %s loc("%s")' % (v, count, text, name))
        return ["%s#%d" % (v, i) for i in range(count)]


def out_size(size, k, stride, pad_lo, pad_hi):
    return (size + pad_lo + pad_hi - k) // stride + 1


class Cnn:
    """Helpers for NCHW convolutional models: each returns (value, shape)."""

    def __init__(self, e):
        self.e = e
        self.shared_biases = {}  # width -> the one de-duplicated bias

    def conv(self, v, shape, cout, k, stride=1, pad=0, name="conv", bias=False):
        """k and pad: an int, or (kh, kw) and (ph, pw)."""
        e = self.e
        n, cin, h, w = shape
        kh, kw = (k, k) if isinstance(k, int) else k
        ph, pw = (pad, pad) if isinstance(pad, int) else pad
        out = [n, cout, out_size(h, kh, stride, ph, ph),
               out_size(w, kw, stride, pw, pw)]
        wt = e.weight(name + ".weight", [cout, cin, kh, kw])
        operands, types = [v, wt], [ty(shape), ty([cout, cin, kh, kw])]
        if EXPORTED:
            if cout not in self.shared_biases:
                self.shared_biases[cout] = e.weight("bias_%d" % cout, [cout])
            operands.append(self.shared_biases[cout])
            types.append(ty([cout]))
        elif bias:
            operands.append(e.weight(name + ".bias", [cout]))
            types.append(ty([cout]))
        r = e.op(name, "ppc.conv2d %s {pads = array<i64: %d, %d, %d, %d>, "
                 "strides = array<i64: %d, %d>} : (%s) -> %s"
                 % (", ".join(operands), ph, pw, ph, pw, stride, stride,
                    ", ".join(types), ty(out)))
        return r, out

    def bn(self, v, shape, name, relu=True):
        e = self.e
        c = shape[1]
        if EXPORTED:  # folded into the preceding convolution
            return self.relu(v, shape, name + ".relu") if relu else v
        ws = [e.weight(name + s, [c]) for s in (".weight", ".bias")]
        # Running statistics are state the optimizer does not train.
        ws += [e.weight(name + s, [c], frozen=True)
               for s in (".running_mean", ".running_var")]
        r = e.op(name, "ppc.batch_norm %s, %s, %s, %s, %s : (%s, %s, %s, %s, %s) -> %s"
                 % (v, ws[0], ws[1], ws[2], ws[3], ty(shape), ty([c]), ty([c]),
                    ty([c]), ty([c]), ty(shape)))
        if relu:
            r = self.relu(r, shape, name + ".relu")
        return r

    def relu(self, v, shape, name):
        return self.e.op(name, "ppc.relu %s : %s" % (v, ty(shape)))

    def pool(self, kind, v, shape, k, stride, pad=0, name="pool"):
        n, c, h, w = shape
        out = [n, c, out_size(h, k, stride, pad, pad), out_size(w, k, stride, pad, pad)]
        extra = ", count_include_pad = true" if kind == "avg" else ""
        r = self.e.op(name, "ppc.%s_pool2d %s {kernel = array<i64: %d, %d>, "
                      "pads = array<i64: %d, %d, %d, %d>, strides = array<i64: %d, %d>%s} : %s -> %s"
                      % (kind, v, k, k, pad, pad, pad, pad, stride, stride, extra,
                         ty(shape), ty(out)))
        return r, out

    def concat(self, parts, name):
        """parts: (value, shape) pairs, joined along channels."""
        shapes = [s for _, s in parts]
        out = list(shapes[0])
        out[1] = sum(s[1] for s in shapes)
        r = self.e.op(name, "ppc.concat %s {axis = 1 : i64} : (%s) -> %s"
                      % (", ".join(v for v, _ in parts),
                         ", ".join(ty(s) for s in shapes), ty(out)))
        return r, out

    def linear(self, v, din, dout, batch, name):
        e = self.e
        w = e.weight(name + ".weight", [dout, din])
        b = e.weight(name + ".bias", [dout])
        return e.op(name, "ppc.linear %s, %s, %s {transpose_weight = true} : "
                    "(%s, %s, %s) -> %s" % (v, w, b, ty([batch, din]), ty([dout, din]),
                                           ty([dout]), ty([batch, dout])))

    def head(self, v, shape, classes, name="fc"):
        """Global average pool, flatten, fully connected."""
        n, c = shape[0], shape[1]
        pooled = [n, c, 1, 1]
        x = self.e.op("avgpool", "ppc.global_avg_pool %s : %s -> %s" % (v, ty(shape), ty(pooled)))
        x = self.e.op("flatten", "ppc.reshape %s : %s -> %s" % (x, ty(pooled), ty([n, c])))
        return self.linear(x, c, classes, n, name), [n, classes]


def bert(layers, batch, seq, hidden, heads, ff, vocab, dropout=0.0,
         fused=False, causal=False, fused_qkv=False, layout="bshd"):
    """fused: the attention core as one ppc.attention (FlashAttention-style;
    causal for a decoder) instead of matmul, softmax, dropout, matmul;
    layout "bshd" reads the per-head [B, S, H, D] tensors as they are (no
    head transposes), "bhsd" transposes them to [B, H, S, D] around it.
    fused_qkv: one linear layer projects q, k and v (Megatron-LM's
    query_key_value: each head's q, k and v side by side), split per head."""
    e = Emitter()

    def drop(name, v, shape):
        # Megatron-LM's attention and hidden dropout, where asked for.
        if not dropout:
            return v
        return e.op(name, "ppc.dropout %s {ratio = %s : f64} : %s"
                    % (v, repr(float(dropout)), ty(shape)))

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

    # The fused op in layout bshd reads [B, S, H, D] as it is.
    transposed = not (fused and layout == "bshd")

    def heads_first(name, v):
        split = [batch, seq, heads, hd]
        r = e.op(name + ".split", "ppc.reshape %s : %s -> %s" % (v, ty(act), ty(split)))
        if not transposed:
            return r
        return e.op(name + ".t", "ppc.transpose %s {permutation = array<i64: 0, 2, 1, 3>} : %s -> %s"
                    % (r, ty(split), ty([batch, heads, seq, hd])))

    for l in range(layers):
        p = "layers.%d." % l
        h = layer_norm(p + "ln1", x)
        bh = [batch, heads, seq, hd] if transposed else [batch, seq, heads, hd]
        if fused_qkv:
            qkv = linear(p + "attn.qkv", h, hidden, 3 * hidden, act)
            grouped = [batch, seq, heads, 3 * hd]
            qkv = e.op(p + "qkv.split_heads", "ppc.reshape %s : %s -> %s"
                       % (qkv, ty([batch, seq, 3 * hidden]), ty(grouped)))
            part = [batch, seq, heads, hd]
            q, k, v = [
                e.op(p + n + ".t", "ppc.transpose %s {permutation = "
                     "array<i64: 0, 2, 1, 3>} : %s -> %s"
                     % (r, ty(part), ty(bh))) if transposed else r
                for n, r in zip("qkv", e.multi(
                    p + "qkv.split", 3, "ppc.split %s {axis = 3 : i64} : %s -> "
                    "%s, %s, %s" % (qkv, ty(grouped), ty(part), ty(part),
                                      ty(part))))]
        else:
            q = heads_first(p + "q", linear(p + "attn.q", h, hidden, hidden, act))
            k = heads_first(p + "k", linear(p + "attn.k", h, hidden, hidden, act))
            v = heads_first(p + "v", linear(p + "attn.v", h, hidden, hidden, act))
        if fused:
            attrs = ["scale = %r : f64" % (hd ** -0.5)]
            if causal:
                attrs.append("causal = true")
            if dropout:
                attrs.append("ratio = %r : f64" % float(dropout))
            if not transposed:
                attrs.append('layout = "bshd"')
            ctx = e.op(p + "attn.core", "ppc.attention %s, %s, %s {%s} : "
                       "(%s, %s, %s) -> %s" % (q, k, v, ", ".join(attrs),
                                               ty(bh), ty(bh), ty(bh), ty(bh)))
        else:
            ss = [batch, heads, seq, seq]
            scores = e.op(p + "attn.scores", "ppc.matmul %s, %s {transpose_rhs"
                          " = true} : (%s, %s) -> %s"
                          % (q, k, ty(bh), ty(bh), ty(ss)))
            probs = e.op(p + "attn.softmax", "ppc.softmax %s : %s"
                         % (scores, ty(ss)))
            probs = drop(p + "attn.dropout", probs, ss)
            ctx = e.op(p + "attn.context", "ppc.matmul %s, %s : (%s, %s) -> %s"
                       % (probs, v, ty(ss), ty(bh), ty(bh)))
        if transposed:
            ctx = e.op(p + "attn.merge.t", "ppc.transpose %s {permutation = array<i64: 0, 2, 1, 3>} : %s -> %s"
                       % (ctx, ty(bh), ty([batch, seq, heads, hd])))
        ctx = e.op(p + "attn.merge", "ppc.reshape %s : %s -> %s" % (ctx, ty([batch, seq, heads, hd]), ty(act)))
        o = drop(p + "attn.out.dropout",
                 linear(p + "attn.out", ctx, hidden, hidden, act), act)
        x = e.op(p + "residual1", "ppc.add %s, %s : (%s, %s) -> %s" % (x, o, ty(act), ty(act), ty(act)))
        h = layer_norm(p + "ln2", x)
        f = linear(p + "ff1", h, hidden, ff, act)
        f = e.op(p + "gelu", "ppc.gelu %s : %s" % (f, ty([batch, seq, ff])))
        f = drop(p + "ff.dropout",
                 linear(p + "ff2", f, ff, hidden, [batch, seq, ff]), act)
        x = e.op(p + "residual2", "ppc.add %s, %s : (%s, %s) -> %s" % (x, f, ty(act), ty(act), ty(act)))
    x = layer_norm("final_ln", x)
    logits = linear("lm_head", x, hidden, vocab, act)
    out = [batch, seq, vocab]
    header = "func.func @main(%%tokens: %s) -> %s {" % (ty([batch, seq], "i64"), ty(out))
    return header, e, logits, out


def llama(layers, batch, seq, hidden, heads, ff, vocab, moe=None):
    """A Llama-2-shaped decoder: pre-norm layers of fused causal attention
    (q, k, v and output projections without biases, layout bshd) and a
    SwiGLU feed-forward (down(silu(gate(x)) * up(x))), untied output layer.
    RMSNorm is written as ppc.layer_norm (the same bytes and nearly the same
    FLOPs), the rotary embedding is left out (an elementwise product on q
    and k), and keys and values have as many heads as queries: ppc.attention
    has no grouped-query form, so a 70B shape moves and keeps 8x the keys
    and values Llama-2-70B's 8 KV heads would.

    moe: dict(experts, top_k, capacity_factor, every[, aux_loss_coef]):
    every `every`-th layer's feed-forward is a mixture of SwiGLU experts
    (Mixtral): a router (linear to the experts, softmax), ppc.moe_dispatch
    (with the load-balancing loss at aux_loss_coef) to each expert's
    ceil(top_k * seq * capacity_factor / experts) slots per sample, the
    experts as batched matmuls over [experts, ...] weights, and
    ppc.moe_combine weighting the top_k outputs by their probabilities
    normalized over the k (Mixtral's softmax over the top-k logits)."""
    e = Emitter()
    hd = hidden // heads
    act = [batch, seq, hidden]
    emb = e.weight("embed.weight", [vocab, hidden])
    x = e.op("embed", "ppc.gather %s, %%tokens : (%s, %s) -> %s"
             % (emb, ty([vocab, hidden]), ty([batch, seq], "i64"), ty(act)))

    def linear(name, v, din, dout, shape):
        w = e.weight(name + ".weight", [dout, din])
        out = shape[:-1] + [dout]
        return e.op(name, "ppc.linear %s, %s {transpose_weight = true} : "
                    "(%s, %s) -> %s" % (v, w, ty(shape), ty([dout, din]),
                                       ty(out)))

    def norm(name, v):
        s_ = e.weight(name + ".weight", [hidden])
        b = e.weight(name + ".bias", [hidden])
        return e.op(name, "ppc.layer_norm %s, %s, %s : (%s, %s, %s) -> %s"
                    % (v, s_, b, ty(act), ty([hidden]), ty([hidden]), ty(act)))

    def experts(p, h):
        n, k = moe["experts"], moe["top_k"]
        cap = -(-k * seq * moe["capacity_factor"] // n)
        cap = int(cap)
        router = [batch, seq, n]
        probs = e.op(p + "gate.softmax", "ppc.softmax %s : %s"
                     % (linear(p + "gate", h, hidden, n, act), ty(router)))
        slots = [n, batch, cap, hidden]
        aux = moe.get("aux_loss_coef", 0.0)
        d = e.op(p + "dispatch", "ppc.moe_dispatch %s, %s {top_k = %d : i64%s} "
                 ": (%s, %s) -> %s" % (h, probs, k,
                                       ", aux_loss_coef = %r" % aux if aux else "",
                                       ty(act), ty(router), ty(slots)))
        rows = [n, batch * cap, hidden]
        d = e.op(p + "dispatch.rows", "ppc.reshape %s : %s -> %s"
                 % (d, ty(slots), ty(rows)))
        mid = [n, batch * cap, ff]

        def expert_matmul(name, v, din, dout):
            w = e.weight(p + "experts." + name, [n, din, dout])
            return e.op(p + "experts." + name, "ppc.matmul %s, %s : (%s, %s) "
                        "-> %s" % (v, w, ty([n, batch * cap, din]),
                                   ty([n, din, dout]),
                                   ty([n, batch * cap, dout])))
        gate = expert_matmul("w1", d, hidden, ff)
        up = expert_matmul("w3", d, hidden, ff)
        gate = e.op(p + "experts.silu", "ppc.silu %s : %s" % (gate, ty(mid)))
        f = e.op(p + "experts.mul", "ppc.mul %s, %s : (%s, %s) -> %s"
                 % (gate, up, ty(mid), ty(mid), ty(mid)))
        f = expert_matmul("w2", f, ff, hidden)
        f = e.op(p + "combine.slots", "ppc.reshape %s : %s -> %s"
                 % (f, ty(rows), ty(slots)))
        return e.op(p + "combine", "ppc.moe_combine %s, %s {normalize = true, "
                    "top_k = %d : i64} : (%s, %s) -> %s"
                    % (f, probs, k, ty(slots), ty(router), ty(act)))

    heads_shape = [batch, seq, heads, hd]
    for l in range(layers):
        p = "layers.%d." % l
        h = norm(p + "attention_norm", x)
        qkv = []
        for n in "qkv":
            r = linear(p + "attention.w" + n, h, hidden, hidden, act)
            qkv.append(e.op(p + n + ".split", "ppc.reshape %s : %s -> %s"
                            % (r, ty(act), ty(heads_shape))))
        ctx = e.op(p + "attention.core", "ppc.attention %s, %s, %s {scale = "
                   "%r : f64, causal = true, layout = \"bshd\"} : (%s, %s, %s) "
                   "-> %s" % (qkv[0], qkv[1], qkv[2], hd ** -0.5,
                              ty(heads_shape), ty(heads_shape),
                              ty(heads_shape), ty(heads_shape)))
        ctx = e.op(p + "attention.merge", "ppc.reshape %s : %s -> %s"
                   % (ctx, ty(heads_shape), ty(act)))
        o = linear(p + "attention.wo", ctx, hidden, hidden, act)
        x = e.op(p + "residual1", "ppc.add %s, %s : (%s, %s) -> %s"
                 % (x, o, ty(act), ty(act), ty(act)))
        h = norm(p + "ffn_norm", x)
        if moe and (l + 1) % moe["every"] == 0:
            f = experts(p + "block_sparse_moe.", h)
        else:
            mid = [batch, seq, ff]
            gate = linear(p + "feed_forward.w1", h, hidden, ff, act)
            up = linear(p + "feed_forward.w3", h, hidden, ff, act)
            gate = e.op(p + "feed_forward.silu", "ppc.silu %s : %s" % (gate, ty(mid)))
            f = e.op(p + "feed_forward.mul", "ppc.mul %s, %s : (%s, %s) -> %s"
                     % (gate, up, ty(mid), ty(mid), ty(mid)))
            f = linear(p + "feed_forward.w2", f, ff, hidden, mid)
        x = e.op(p + "residual2", "ppc.add %s, %s : (%s, %s) -> %s"
                 % (x, f, ty(act), ty(act), ty(act)))
    x = norm("norm", x)
    logits = linear("output", x, hidden, vocab, act)
    out = [batch, seq, vocab]
    header = "func.func @main(%%tokens: %s) -> %s {" % (ty([batch, seq], "i64"), ty(out))
    return header, e, logits, out


# Llama-2 sizes (Touvron et al. 2023, table 1 and the released configs):
# 7B: 32 layers, hidden 4096, 32 heads, ff 11008; 70B: 80 layers, hidden
# 8192, 64 heads (8 KV heads: not modeled), ff 28672; vocab 32000; seq 4096.
LLAMA_SIZES = {
    "7b": dict(layers=32, hidden=4096, heads=32, ff=11008),
    "70b": dict(layers=80, hidden=8192, heads=64, ff=28672),
}


# Mixtral 8x7B (Jiang et al. 2024, table 1): 32 layers, hidden 4096, 32
# heads (8 KV heads: not modeled), experts of ff 14336, vocab 32000.
MOE_SIZES = {
    "mixtral-8x7b": dict(layers=32, hidden=4096, heads=32, ff=14336),
}


# GPT sizes: GPT-2 XL (32 heads of 50 instead of 25 of 64, so that
# tensor-parallel degrees up to 8 divide them), Megatron-LM's 8.3B (Shoeybi et al.
# 2019, table 2), GPT-3 13B (Brown et al. 2020, hidden rounded from 5140 to
# 5120), Megatron-LM's 39.1B, 145.6B and 1T (Narayanan et al. 2021, table 1).
GPT_SIZES = {
    "1.5b": dict(layers=48, hidden=1600, heads=32, seq=1024),
    "8.3b": dict(layers=72, hidden=3072, heads=32, seq=1024),
    "13b": dict(layers=40, hidden=5120, heads=40, seq=2048),
    "39b": dict(layers=48, hidden=8192, heads=64, seq=2048),
    "145b": dict(layers=80, hidden=12288, heads=96, seq=2048),
    "175b": dict(layers=96, hidden=12288, heads=96, seq=2048),
    "1t": dict(layers=128, hidden=25600, heads=160, seq=2048),
}


RESNET_BLOCKS = {50: [3, 4, 6, 3], 101: [3, 4, 23, 3], 152: [3, 8, 36, 3]}


def resnet(depth, batch, classes=1000, image=224):
    """torchvision ResNet-50/101/152 (bottleneck blocks, stride in the 3x3)."""
    e = Emitter()
    c = Cnn(e)
    x, s = c.conv("%image", [batch, 3, image, image], 64, 7, 2, 3, "conv1")
    x = c.bn(x, s, "bn1")
    x, s = c.pool("max", x, s, 3, 2, 1, "maxpool")
    widths = [(64, 1), (128, 2), (256, 2), (512, 2)]
    for stage, ((width, stride), blocks) in enumerate(zip(widths, RESNET_BLOCKS[depth])):
        for b in range(blocks):
            p = "layer%d.%d." % (stage + 1, b)
            st = stride if b == 0 else 1
            y, ys = c.conv(x, s, width, 1, 1, 0, p + "conv1")
            y = c.bn(y, ys, p + "bn1")
            y, ys = c.conv(y, ys, width, 3, st, 1, p + "conv2")
            y = c.bn(y, ys, p + "bn2")
            y, ys = c.conv(y, ys, width * 4, 1, 1, 0, p + "conv3")
            y = c.bn(y, ys, p + "bn3", relu=False)
            if b == 0:
                sc, scs = c.conv(x, s, width * 4, 1, st, 0, p + "downsample.0")
                sc = c.bn(sc, scs, p + "downsample.1", relu=False)
            else:
                sc = x
            x = e.op(p + "add", "ppc.add %s, %s : (%s, %s) -> %s" % (y, sc, ty(ys), ty(ys), ty(ys)))
            x = c.relu(x, ys, p + "relu")
            s = ys
    x, out = c.head(x, s, classes)
    header = "func.func @main(%%image: %s) -> %s {" % (ty([batch, 3, image, image]), ty(out))
    return header, e, x, out


def alexnet(batch, classes=1000):
    """torchvision AlexNet (5 conv with bias + ReLU, 3 max pools, 3 fc)."""
    e = Emitter()
    c = Cnn(e)
    s = [batch, 3, 224, 224]
    x = "%image"
    convs = [(64, 11, 4, 2, True), (192, 5, 1, 2, True), (384, 3, 1, 1, False),
             (256, 3, 1, 1, False), (256, 3, 1, 1, True)]
    for i, (cout, k, stride, pad, pool) in enumerate(convs):
        name = "features.conv%d" % (i + 1)
        x, s = c.conv(x, s, cout, k, stride, pad, name, bias=True)
        x = c.relu(x, s, name + ".relu")
        if pool:
            x, s = c.pool("max", x, s, 3, 2, 0, name + ".pool")
    # At 224x224 the adaptive average pool to 6x6 is the identity.
    flat = s[1] * s[2] * s[3]
    x = e.op("flatten", "ppc.reshape %s : %s -> %s" % (x, ty(s), ty([batch, flat])))
    din = flat
    for i, dout in enumerate([4096, 4096]):
        name = "classifier.fc%d" % (i + 1)
        x = e.op(name + ".dropout", "ppc.dropout %s {ratio = 0.5 : f64} : %s"
                 % (x, ty([batch, din])))
        x = c.linear(x, din, dout, batch, name)
        x = c.relu(x, [batch, dout], name + ".relu")
        din = dout
    x = c.linear(x, din, classes, batch, "classifier.fc3")
    out = [batch, classes]
    header = "func.func @main(%%image: %s) -> %s {" % (ty([batch, 3, 224, 224]), ty(out))
    return header, e, x, out


def convnet(batch, classes=10, image=32):
    """A small CNN: conv/ReLU/max pool twice, conv/ReLU, global average pool,
    fully connected (examples/cnn.onnx without batch norm, for pipelines of
    micro-batches, under which batch norm does not lower)."""
    e = Emitter()
    c = Cnn(e)
    s = [batch, 3, image, image]
    x = "%image"
    for i, cout in enumerate([16, 32]):
        name = "conv%d" % (i + 1)
        x, s = c.conv(x, s, cout, 3, 1, 1, name, bias=True)
        x = c.relu(x, s, name + ".relu")
        x, s = c.pool("max", x, s, 2, 2, 0, name + ".pool")
    x, s = c.conv(x, s, 32, 3, 1, 1, "conv3", bias=True)
    x = c.relu(x, s, "conv3.relu")
    x, out = c.head(x, s, classes)
    header = "func.func @main(%%image: %s) -> %s {" % (ty([batch, 3, image, image]), ty(out))
    return header, e, x, out


def mlp(batch, layers, hidden, classes=10):
    """A deep MLP: `layers` times linear (hidden -> hidden) + ReLU, then a
    linear to the classes: 2 layers + 1 ops, for the search's scaling with
    depth (bench/search_depth.sh)."""
    e = Emitter()
    c = Cnn(e)
    x = "%x"
    for l in range(layers):
        name = "layers.%d" % l
        x = c.linear(x, hidden, hidden, batch, name + ".fc")
        x = e.op(name + ".relu", "ppc.relu %s : %s" % (x, ty([batch, hidden])))
    x = c.linear(x, hidden, classes, batch, "head")
    header = "func.func @main(%%x: %s) -> %s {" % (ty([batch, hidden]), ty([batch, classes]))
    return header, e, x, [batch, classes]


def vgg16(batch, classes=1000):
    """torchvision VGG-16 (configuration D: 13 conv 3x3 with bias + ReLU, 5 max
    pools, 3 fc with dropout)."""
    e = Emitter()
    c = Cnn(e)
    s = [batch, 3, 224, 224]
    x = "%image"
    stages = [[64, 64], [128, 128], [256, 256, 256], [512, 512, 512], [512, 512, 512]]
    n = 0
    for stage, widths in enumerate(stages):
        for cout in widths:
            n += 1
            name = "features.conv%d" % n
            x, s = c.conv(x, s, cout, 3, 1, 1, name, bias=True)
            x = c.relu(x, s, name + ".relu")
        x, s = c.pool("max", x, s, 2, 2, 0, "features.pool%d" % (stage + 1))
    # At 224x224 the adaptive average pool to 7x7 is the identity.
    flat = s[1] * s[2] * s[3]
    x = e.op("flatten", "ppc.reshape %s : %s -> %s" % (x, ty(s), ty([batch, flat])))
    din = flat
    for i, dout in enumerate([4096, 4096]):
        name = "classifier.fc%d" % (i + 1)
        x = c.linear(x, din, dout, batch, name)
        x = c.relu(x, [batch, dout], name + ".relu")
        x = e.op(name + ".dropout", "ppc.dropout %s {ratio = 0.5 : f64} : %s"
                 % (x, ty([batch, dout])))
        din = dout
    x = c.linear(x, din, classes, batch, "classifier.fc3")
    out = [batch, classes]
    header = "func.func @main(%%image: %s) -> %s {" % (ty([batch, 3, 224, 224]), ty(out))
    return header, e, x, out


def inception_v3(batch, classes=1000, image=299):
    """torchvision Inception-v3 (transform_input off, no aux head)."""
    e = Emitter()
    c = Cnn(e)

    def basic(v, shape, cout, k, stride=1, pad=0, name="conv"):
        # BasicConv2d: conv without bias, batch norm, ReLU.
        y, ys = c.conv(v, shape, cout, k, stride, pad, name + ".conv")
        return c.bn(y, ys, name + ".bn"), ys

    def pool_branch(v, s, cout, name):
        y, ys = c.pool("avg", v, s, 3, 1, 1, name + ".avgpool")
        return basic(y, ys, cout, 1, name=name)

    def block_a(v, s, pool_features, p):
        b1 = basic(v, s, 64, 1, name=p + "branch1x1")
        b5 = basic(v, s, 48, 1, name=p + "branch5x5_1")
        b5 = basic(*b5, 64, 5, pad=2, name=p + "branch5x5_2")
        b3 = basic(v, s, 64, 1, name=p + "branch3x3dbl_1")
        b3 = basic(*b3, 96, 3, pad=1, name=p + "branch3x3dbl_2")
        b3 = basic(*b3, 96, 3, pad=1, name=p + "branch3x3dbl_3")
        bp = pool_branch(v, s, pool_features, p + "branch_pool")
        return c.concat([b1, b5, b3, bp], p + "concat")

    def block_b(v, s, p):
        b3 = basic(v, s, 384, 3, stride=2, name=p + "branch3x3")
        bd = basic(v, s, 64, 1, name=p + "branch3x3dbl_1")
        bd = basic(*bd, 96, 3, pad=1, name=p + "branch3x3dbl_2")
        bd = basic(*bd, 96, 3, stride=2, name=p + "branch3x3dbl_3")
        bp = c.pool("max", v, s, 3, 2, 0, p + "branch_pool")
        return c.concat([b3, bd, bp], p + "concat")

    def block_c(v, s, c7, p):
        b1 = basic(v, s, 192, 1, name=p + "branch1x1")
        b7 = basic(v, s, c7, 1, name=p + "branch7x7_1")
        b7 = basic(*b7, c7, (1, 7), pad=(0, 3), name=p + "branch7x7_2")
        b7 = basic(*b7, 192, (7, 1), pad=(3, 0), name=p + "branch7x7_3")
        bd = basic(v, s, c7, 1, name=p + "branch7x7dbl_1")
        bd = basic(*bd, c7, (7, 1), pad=(3, 0), name=p + "branch7x7dbl_2")
        bd = basic(*bd, c7, (1, 7), pad=(0, 3), name=p + "branch7x7dbl_3")
        bd = basic(*bd, c7, (7, 1), pad=(3, 0), name=p + "branch7x7dbl_4")
        bd = basic(*bd, 192, (1, 7), pad=(0, 3), name=p + "branch7x7dbl_5")
        bp = pool_branch(v, s, 192, p + "branch_pool")
        return c.concat([b1, b7, bd, bp], p + "concat")

    def block_d(v, s, p):
        b3 = basic(v, s, 192, 1, name=p + "branch3x3_1")
        b3 = basic(*b3, 320, 3, stride=2, name=p + "branch3x3_2")
        b7 = basic(v, s, 192, 1, name=p + "branch7x7x3_1")
        b7 = basic(*b7, 192, (1, 7), pad=(0, 3), name=p + "branch7x7x3_2")
        b7 = basic(*b7, 192, (7, 1), pad=(3, 0), name=p + "branch7x7x3_3")
        b7 = basic(*b7, 192, 3, stride=2, name=p + "branch7x7x3_4")
        bp = c.pool("max", v, s, 3, 2, 0, p + "branch_pool")
        return c.concat([b3, b7, bp], p + "concat")

    def block_e(v, s, p):
        b1 = basic(v, s, 320, 1, name=p + "branch1x1")
        b3 = basic(v, s, 384, 1, name=p + "branch3x3_1")
        b3 = c.concat([basic(*b3, 384, (1, 3), pad=(0, 1), name=p + "branch3x3_2a"),
                       basic(*b3, 384, (3, 1), pad=(1, 0), name=p + "branch3x3_2b")],
                      p + "branch3x3.concat")
        bd = basic(v, s, 448, 1, name=p + "branch3x3dbl_1")
        bd = basic(*bd, 384, 3, pad=1, name=p + "branch3x3dbl_2")
        bd = c.concat([basic(*bd, 384, (1, 3), pad=(0, 1), name=p + "branch3x3dbl_3a"),
                       basic(*bd, 384, (3, 1), pad=(1, 0), name=p + "branch3x3dbl_3b")],
                      p + "branch3x3dbl.concat")
        bp = pool_branch(v, s, 192, p + "branch_pool")
        return c.concat([b1, b3, bd, bp], p + "concat")

    x = basic("%image", [batch, 3, image, image], 32, 3, stride=2, name="Conv2d_1a_3x3")
    x = basic(*x, 32, 3, name="Conv2d_2a_3x3")
    x = basic(*x, 64, 3, pad=1, name="Conv2d_2b_3x3")
    x = c.pool("max", *x, 3, 2, 0, "maxpool1")
    x = basic(*x, 80, 1, name="Conv2d_3b_1x1")
    x = basic(*x, 192, 3, name="Conv2d_4a_3x3")
    x = c.pool("max", *x, 3, 2, 0, "maxpool2")
    x = block_a(*x, 32, "Mixed_5b.")
    x = block_a(*x, 64, "Mixed_5c.")
    x = block_a(*x, 64, "Mixed_5d.")
    x = block_b(*x, "Mixed_6a.")
    for name, c7 in [("Mixed_6b.", 128), ("Mixed_6c.", 160), ("Mixed_6d.", 160),
                     ("Mixed_6e.", 192)]:
        x = block_c(*x, c7, name)
    x = block_d(*x, "Mixed_7a.")
    x = block_e(*x, "Mixed_7b.")
    x = block_e(*x, "Mixed_7c.")
    v, s = x
    n, ch = s[0], s[1]
    pooled = [n, ch, 1, 1]
    v = e.op("avgpool", "ppc.global_avg_pool %s : %s -> %s" % (v, ty(s), ty(pooled)))
    v = e.op("flatten", "ppc.reshape %s : %s -> %s" % (v, ty(pooled), ty([n, ch])))
    v = e.op("dropout", "ppc.dropout %s {ratio = 0.5 : f64} : %s" % (v, ty([n, ch])))
    v = c.linear(v, ch, classes, n, "fc")
    out = [n, classes]
    header = "func.func @main(%%image: %s) -> %s {" % (ty([batch, 3, image, image]), ty(out))
    return header, e, v, out


def rnnlm(batch, steps, hidden, vocab, layers=2):
    """FlexFlow's RNNLM: embedding, `layers` LSTM layers unrolled over `steps`
    time steps, a linear to the vocabulary on every step's output.

    Each LSTM cell is one linear on [x, h] (concat) to the 4 gates, a split,
    sigmoid/tanh and the elementwise state update. The weights of a layer (and
    of the output linear) are one ppc.weight used by every time step.
    """
    e = Emitter()
    bh = [batch, hidden]
    emb = e.weight("embed.weight", [vocab, hidden])
    x = e.op("embed", "ppc.gather %s, %%tokens : (%s, %s) -> %s"
             % (emb, ty([vocab, hidden]), ty([batch, steps], "i64"),
                ty([batch, steps, hidden])))
    pieces = e.multi("embed.split", steps, "ppc.split %s {axis = 1 : i64} : %s -> %s"
                     % (x, ty([batch, steps, hidden]),
                        ", ".join([ty([batch, 1, hidden])] * steps)))
    inputs = [e.op("embed.step%d" % t, "ppc.reshape %s : %s -> %s"
                   % (p, ty([batch, 1, hidden]), ty(bh)))
              for t, p in enumerate(pieces)]

    def elementwise(kind, name, *vs):
        if len(vs) == 1:
            return e.op(name, "ppc.%s %s : %s" % (kind, vs[0], ty(bh)))
        return e.op(name, "ppc.%s %s, %s : (%s, %s) -> %s"
                    % (kind, vs[0], vs[1], ty(bh), ty(bh), ty(bh)))

    for l in range(layers):
        p = "lstm%d." % l
        w = e.weight(p + "weight", [4 * hidden, 2 * hidden])
        b = e.weight(p + "bias", [4 * hidden])
        # h0 = c0 = 0, constants (replicated at no cost).
        h = cell = e.op(p + "zeros", "ppc.constant dense<0.0> : %s" % ty(bh))
        outputs = []
        for t, xt in enumerate(inputs):
            q = "%sstep%d." % (p, t)
            xh = e.op(q + "concat", "ppc.concat %s, %s {axis = 1 : i64} : (%s, %s) -> %s"
                      % (xt, h, ty(bh), ty(bh), ty([batch, 2 * hidden])))
            gates = e.op(q + "gates", "ppc.linear %s, %s, %s {transpose_weight = true} : "
                         "(%s, %s, %s) -> %s"
                         % (xh, w, b, ty([batch, 2 * hidden]), ty([4 * hidden, 2 * hidden]),
                            ty([4 * hidden]), ty([batch, 4 * hidden])))
            i, f, g, o = e.multi(q + "split", 4, "ppc.split %s {axis = 1 : i64} : %s -> %s"
                                 % (gates, ty([batch, 4 * hidden]), ", ".join([ty(bh)] * 4)))
            i = elementwise("sigmoid", q + "input_gate", i)
            f = elementwise("sigmoid", q + "forget_gate", f)
            g = elementwise("tanh", q + "cell_gate", g)
            o = elementwise("sigmoid", q + "output_gate", o)
            cell = elementwise("add", q + "cell", elementwise("mul", q + "f*c", f, cell),
                               elementwise("mul", q + "i*g", i, g))
            h = elementwise("mul", q + "hidden", o, elementwise("tanh", q + "tanh_cell", cell))
            outputs.append(h)
        inputs = outputs
    w = e.weight("decoder.weight", [vocab, hidden])
    b = e.weight("decoder.bias", [vocab])
    logits = []
    for t, h in enumerate(inputs):
        logits.append(e.op("decoder.step%d" % t, "ppc.linear %s, %s, %s {transpose_weight = true} : "
                           "(%s, %s, %s) -> %s" % (h, w, b, ty(bh), ty([vocab, hidden]),
                                                  ty([vocab]), ty([batch, vocab]))))
    out = [batch, steps * vocab]
    result = e.op("decoder.concat", "ppc.concat %s {axis = 1 : i64} : (%s) -> %s"
                  % (", ".join(logits), ", ".join([ty([batch, vocab])] * steps), ty(out)))
    header = "func.func @main(%%tokens: %s) -> %s {" % (ty([batch, steps], "i64"), ty(out))
    return header, e, result, out


def add_loss(header, e, logits, out, kind):
    """Mean softmax cross-entropy of the [batch, seq, vocab] logits against
    a new %labels argument, over batch x seq tokens; with ce-f32 the logits
    are cast to float32 first, as Megatron-LM's vocabulary-parallel
    cross-entropy computes it."""
    batch, seq, vocab = out
    rows = [batch * seq, vocab]
    flat = e.op("loss.flatten", "ppc.reshape %s : %s -> %s" % (logits, ty(out), ty(rows)))
    dtype = FLOAT
    if kind == "ce-f32" and FLOAT != "f32":
        flat = e.op("loss.cast", "ppc.cast %s : %s -> %s"
                    % (flat, ty(rows), ty(rows, "f32")))
        dtype = "f32"
    labels = e.op("loss.labels", "ppc.reshape %%labels : %s -> %s"
                  % (ty([batch, seq], "i64"), ty([batch * seq], "i64")))
    loss = e.op("loss", "ppc.softmax_cross_entropy %s, %s : (%s, %s) -> %s"
                % (flat, labels, ty(rows, dtype), ty([batch * seq], "i64"),
                   "tensor<%s>" % dtype))
    header = header.replace(") -> %s {" % ty(out),
                            ", %%labels: %s) -> tensor<%s> {"
                            % (ty([batch, seq], "i64"), dtype))
    return header, loss, "tensor<%s>" % dtype


def main():
    ap = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        epilog="\n".join(__doc__.splitlines()[1:]),
        formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model", choices=["bert", "gpt", "llama", "moe", "transformer", "resnet50", "resnet101",
                                      "resnet152", "alexnet", "vgg16", "inception_v3", "rnnlm",
                                      "convnet", "mlp"])
    ap.add_argument("--batch", type=int, default=64, help="global batch of one step")
    ap.add_argument("--layers", type=int)
    ap.add_argument("--seq", type=int)
    ap.add_argument("--hidden", type=int)
    ap.add_argument("--heads", type=int)
    ap.add_argument("--ff", type=int)
    ap.add_argument("--vocab", type=int)
    ap.add_argument("--dropout", type=float, default=0.0,
                    help="gpt/bert/transformer: dropout after the attention "
                    "probabilities and both sublayers (Megatron-LM's 0.1)")
    ap.add_argument("--fused-attention", dest="fused_attention",
                    action="store_true", default=True,
                    help="gpt/bert/transformer: the attention core as one "
                    "fused ppc.attention (FlashAttention-style; causal for "
                    "gpt), the default")
    ap.add_argument("--unfused-attention", dest="fused_attention",
                    action="store_false",
                    help="gpt/bert/transformer: the attention core as "
                    "matmul, softmax, dropout, matmul (a decoder's causal "
                    "mask left out: it changes no shape)")
    ap.add_argument("--attention-layout", choices=["bshd", "bhsd"],
                    default="bshd",
                    help="gpt/bert/transformer, fused attention: bshd reads "
                    "the per-head [batch, seq, heads, head dim] tensors as "
                    "they are (the default), bhsd transposes them to [batch, "
                    "heads, seq, head dim] and back around the attention")
    ap.add_argument("--fused-qkv", action="store_true",
                    help="gpt/bert/transformer: q, k and v from one linear "
                    "layer (Megatron-LM's query_key_value), split per head")
    ap.add_argument("--loss", choices=["none", "ce", "ce-f32"], default="none",
                    help="gpt/bert/transformer: end in the mean softmax "
                    "cross-entropy over the tokens (ce-f32: of the logits "
                    "cast to float32, as Megatron-LM) instead of the logits")
    ap.add_argument("--experts", type=int, default=8, help="moe: experts per MoE layer")
    ap.add_argument("--top-k", dest="top_k", type=int, default=2,
                    help="moe: experts per token")
    ap.add_argument("--capacity-factor", dest="capacity_factor", type=float,
                    default=1.25, help="moe: slots per expert over an even "
                    "share of the token choices (tokens over it are dropped)")
    ap.add_argument("--aux-loss-coef", dest="aux_loss_coef", type=float,
                    default=0.0, help="moe: the router's load-balancing loss "
                    "coefficient (ppc.moe_dispatch aux_loss_coef; 0: none; "
                    "Megatron-Core's Mixtral example uses 0.01)")
    ap.add_argument("--moe-every", dest="moe_every", type=int, default=1,
                    help="moe: every n-th layer's feed-forward is experts, "
                    "the others dense SwiGLU")
    ap.add_argument("--steps", type=int, default=20, help="rnnlm: unrolled time steps")
    ap.add_argument("--size", choices=sorted(GPT_SIZES) + sorted(LLAMA_SIZES)
                    + sorted(MOE_SIZES),
                    help="gpt: model size (default 1.5b); llama: 7b (default) "
                    "or 70b; moe: mixtral-8x7b")
    ap.add_argument("--dtype", choices=["f32", "bf16", "f16"], default="f32")
    ap.add_argument("--exported", action="store_true",
                    help="resnet*/inception_v3: BN folded, identical biases shared")
    ap.add_argument("--image", type=int, help="resnet*/inception_v3/convnet input size")
    a = ap.parse_args()
    global FLOAT, EXPORTED
    FLOAT = a.dtype
    EXPORTED = a.exported

    def pick(value, default):
        return default if value is None else value

    if a.model == "llama":
        if a.size and a.size not in LLAMA_SIZES:
            ap.error("llama sizes: " + ", ".join(sorted(LLAMA_SIZES)))
        d = LLAMA_SIZES[a.size or "7b"]
        header, e, result, out = llama(
            pick(a.layers, d["layers"]), a.batch, pick(a.seq, 4096),
            pick(a.hidden, d["hidden"]), pick(a.heads, d["heads"]),
            pick(a.ff, d["ff"]), pick(a.vocab, 32000))
    elif a.model == "moe":
        if a.top_k < 1 or a.top_k > a.experts or a.moe_every < 1 or \
                a.capacity_factor <= 0 or not 0 <= a.aux_loss_coef < float("inf"):
            ap.error("moe: need 1 <= --top-k <= --experts, --moe-every >= 1, "
                     "--capacity-factor > 0 and a finite --aux-loss-coef >= 0")
        d = MOE_SIZES[a.size or "mixtral-8x7b"]
        header, e, result, out = llama(
            pick(a.layers, d["layers"]), a.batch, pick(a.seq, 4096),
            pick(a.hidden, d["hidden"]), pick(a.heads, d["heads"]),
            pick(a.ff, d["ff"]), pick(a.vocab, 32000),
            moe=dict(experts=a.experts, top_k=a.top_k,
                     capacity_factor=a.capacity_factor, every=a.moe_every,
                     aux_loss_coef=a.aux_loss_coef))
    elif a.model == "gpt":
        if a.size and a.size not in GPT_SIZES:
            ap.error("gpt sizes: " + ", ".join(sorted(GPT_SIZES)))
        d = GPT_SIZES[a.size or "1.5b"]
        hidden = pick(a.hidden, d["hidden"])
        header, e, result, out = bert(
            pick(a.layers, d["layers"]), a.batch, pick(a.seq, d["seq"]),
            hidden, pick(a.heads, d["heads"]),
            pick(a.ff, 4 * hidden), pick(a.vocab, 51200), a.dropout,
            fused=a.fused_attention, causal=True, fused_qkv=a.fused_qkv,
            layout=a.attention_layout)
    elif a.model in ("bert", "transformer"):
        # BERT-Large by default; Transformer-base sizes for `transformer`.
        d = (dict(layers=24, seq=512, hidden=1024, heads=16, ff=4096, vocab=30522)
             if a.model == "bert" else
             dict(layers=6, seq=128, hidden=512, heads=8, ff=2048, vocab=32000))
        header, e, result, out = bert(
            pick(a.layers, d["layers"]), a.batch, pick(a.seq, d["seq"]),
            pick(a.hidden, d["hidden"]), pick(a.heads, d["heads"]), pick(a.ff, d["ff"]),
            pick(a.vocab, d["vocab"]), a.dropout, fused=a.fused_attention,
            fused_qkv=a.fused_qkv, layout=a.attention_layout)
    elif a.model.startswith("resnet"):
        header, e, result, out = resnet(int(a.model[len("resnet"):]), a.batch,
                                        image=pick(a.image, 224))
    elif a.model == "alexnet":
        header, e, result, out = alexnet(a.batch)
    elif a.model == "vgg16":
        header, e, result, out = vgg16(a.batch)
    elif a.model == "convnet":
        header, e, result, out = convnet(a.batch, image=pick(a.image, 32))
    elif a.model == "mlp":
        header, e, result, out = mlp(a.batch, pick(a.layers, 8), pick(a.hidden, 1024))
    elif a.model == "inception_v3":
        header, e, result, out = inception_v3(a.batch, image=pick(a.image, 299))
    else:
        header, e, result, out = rnnlm(a.batch, a.steps, pick(a.hidden, 1024),
                                       pick(a.vocab, 10000), pick(a.layers, 2))
    rtype = ty(out)
    if a.loss != "none":
        if len(out) != 3:
            ap.error("--loss needs a model with per-token logits (gpt, llama, bert, transformer)")
        header, result, rtype = add_loss(header, e, result, out, a.loss)
    sys.stdout.write("module {\n  " + header + "\n")
    sys.stdout.write("\n".join(e.lines) + "\n")
    sys.stdout.write("    return %s : %s\n  }\n}\n" % (result, rtype))


if __name__ == "__main__":
    main()
