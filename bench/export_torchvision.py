#!/usr/bin/python3
"""Export real models to ONNX for ppc's import checks (the acceptance models).

    /usr/bin/python3 bench/export_torchvision.py /tmp/ppc-models

Needs Debian's python3-torch (1.13), python3-torchvision (0.14) and python3-onnx:

    apt-get install -y python3-torch python3-torchvision python3-onnx

No network: every model is built with random initialization (weights=None), no
pretrained weights are downloaded.  The exported files are large (vgg16 is
~530 MB) and are NOT committed; this script is what reproduces them.

Every model gets a dynamic batch dimension: dynamic_axes
{"input": {0: "batch"}, "output": {0: "batch"}}, so ppc-opt's --batch-size binds it.

Written files (in OUTDIR):
    alexnet.onnx, resnet50.onnx, inception_v3.onnx (aux_logits=False, 299x299),
    vgg16.onnx, mobilenet_v2.onnx, transformer_lm.onnx      opset 13
    mobilenet_v2_opset11.onnx, mobilenet_v2_opset9.onnx,
    transformer_lm_opset11.onnx                              older opsets, for coverage
    manifest.json: per file: opset, size, export options used, op-type histogram,
                   parameter count, input/output shapes.

For each model the script tries the export options in order (see ATTEMPTS) and
records in the manifest which one worked.  Usage: export_torchvision.py OUTDIR [name...]
"""

import collections
import json
import math
import os
import sys
import time
import traceback

import torch
import torch.nn as nn
import torchvision
import onnx


# --------------------------------------------------------------------------- models
class TransformerLM(nn.Module):
    """Embedding(1000, 256) + learned positions + 2-layer TransformerEncoder + Linear."""

    def __init__(self, vocab=1000, d_model=256, nhead=4, dim_ff=1024, layers=2, seq=64):
        super().__init__()
        self.embed = nn.Embedding(vocab, d_model)
        self.pos = nn.Parameter(torch.randn(1, seq, d_model) * 0.02)
        layer = nn.TransformerEncoderLayer(d_model=d_model, nhead=nhead,
                                           dim_feedforward=dim_ff, dropout=0.1,
                                           batch_first=True)
        # enable_nested_tensor only matters with a padding mask; off keeps tracing plain.
        self.encoder = nn.TransformerEncoder(layer, num_layers=layers,
                                             enable_nested_tensor=False)
        # TransformerEncoder deep-copies one layer, so all layers start identical and the
        # exporter would share their weights through Identity nodes; re-draw each layer.
        for mod in self.encoder.modules():
            if isinstance(mod, nn.MultiheadAttention):
                mod._reset_parameters()
            elif isinstance(mod, (nn.Linear, nn.LayerNorm)):
                mod.reset_parameters()
        self.head = nn.Linear(d_model, vocab)

    def forward(self, tokens):
        h = self.embed(tokens) + self.pos
        h = self.encoder(h)
        return self.head(h)


class Seq2SeqTransformer(nn.Module):
    """Encoder-decoder nn.Transformer (2 + 2 layers) over token ids, causal decoder mask."""

    def __init__(self, vocab=1000, d_model=128, nhead=4, dim_ff=256, layers=2, seq=32):
        super().__init__()
        self.src_embed = nn.Embedding(vocab, d_model)
        self.tgt_embed = nn.Embedding(vocab, d_model)
        self.pos = nn.Parameter(torch.randn(1, seq, d_model) * 0.02)
        self.transformer = nn.Transformer(d_model=d_model, nhead=nhead,
                                          num_encoder_layers=layers,
                                          num_decoder_layers=layers,
                                          dim_feedforward=dim_ff, dropout=0.1,
                                          batch_first=True)
        for mod in self.transformer.modules():
            if isinstance(mod, nn.MultiheadAttention):
                mod._reset_parameters()
            elif isinstance(mod, (nn.Linear, nn.LayerNorm)):
                mod.reset_parameters()
        self.register_buffer("causal", nn.Transformer.generate_square_subsequent_mask(seq))
        self.head = nn.Linear(d_model, vocab)

    def forward(self, src, tgt):
        s = self.src_embed(src) + self.pos
        t = self.tgt_embed(tgt) + self.pos
        return self.head(self.transformer(s, t, tgt_mask=self.causal))


class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class LlamaBlock(nn.Module):
    """Pre-norm block as Llama writes it: RMSNorm, rotary q/k, grouped-query
    attention (kv_heads < heads), SwiGLU feed-forward."""

    def __init__(self, d_model, heads, kv_heads, ffn):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, d_model // heads
        self.attn_norm = RMSNorm(d_model)
        self.wq = nn.Linear(d_model, heads * self.head_dim, bias=False)
        self.wk = nn.Linear(d_model, kv_heads * self.head_dim, bias=False)
        self.wv = nn.Linear(d_model, kv_heads * self.head_dim, bias=False)
        self.wo = nn.Linear(heads * self.head_dim, d_model, bias=False)
        self.ffn_norm = RMSNorm(d_model)
        self.w1 = nn.Linear(d_model, ffn, bias=False)
        self.w3 = nn.Linear(d_model, ffn, bias=False)
        self.w2 = nn.Linear(ffn, d_model, bias=False)

    def forward(self, x, cos, sin, mask):
        b, s, _ = x.shape
        h = self.attn_norm(x)
        q = self.wq(h).view(b, s, self.heads, self.head_dim).transpose(1, 2)
        k = self.wk(h).view(b, s, self.kv_heads, self.head_dim).transpose(1, 2)
        v = self.wv(h).view(b, s, self.kv_heads, self.head_dim).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        # Each key/value head serves heads / kv_heads query heads (expand +
        # reshape, as Llama's repeat_kv; repeat_interleave exports as a Loop).
        rep = self.heads // self.kv_heads
        k = k[:, :, None].expand(b, self.kv_heads, rep, s, self.head_dim).reshape(
            b, self.heads, s, self.head_dim)
        v = v[:, :, None].expand(b, self.kv_heads, rep, s, self.head_dim).reshape(
            b, self.heads, s, self.head_dim)
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim) + mask
        a = torch.softmax(scores, dim=-1) @ v
        x = x + self.wo(a.transpose(1, 2).reshape(b, s, -1))
        h = self.ffn_norm(x)
        return x + self.w2(nn.functional.silu(self.w1(h)) * self.w3(h))


class LlamaLM(nn.Module):
    """A small Llama-style GPT: RMSNorm, rotary embeddings, SwiGLU, GQA."""

    def __init__(self, vocab=1000, d_model=256, heads=8, kv_heads=2, ffn=688, layers=2,
                 seq=64):
        super().__init__()
        self.embed = nn.Embedding(vocab, d_model)
        self.blocks = nn.ModuleList(LlamaBlock(d_model, heads, kv_heads, ffn)
                                    for _ in range(layers))
        self.norm = RMSNorm(d_model)
        self.head = nn.Linear(d_model, vocab, bias=False)
        head_dim = d_model // heads
        inv = 1.0 / (10000 ** (torch.arange(0, head_dim, 2).float() / head_dim))
        angles = torch.outer(torch.arange(seq).float(), inv)
        angles = torch.cat((angles, angles), dim=-1)
        self.register_buffer("cos", angles.cos()[None, None])
        self.register_buffer("sin", angles.sin()[None, None])
        self.register_buffer("mask", torch.full((seq, seq), float("-inf")).triu(1))

    def forward(self, tokens):
        x = self.embed(tokens)
        for block in self.blocks:
            x = block(x, self.cos, self.sin, self.mask)
        return self.head(self.norm(x))


class SegmentationOut(nn.Module):
    """torchvision's segmentation models return a dict; export its "out"."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, x):
        return self.model(x)["out"]


SEQ_LEN = 64
SEQ2SEQ_LEN = 32
# Small images keep a CPU training step of the segmentation models short.
SEGMENTATION_SIZE = 96


def perturb_constant_tensors(module):
    """Give constant-filled parameters and buffers random values, as a trained model has.

    Fresh BatchNorm/LayerNorm layers all hold the same ones/zeros; the exporter then
    deduplicates those initializers and writes hundreds of Identity nodes to share them
    (resnet50: 200).  Real checkpoints do not look like that, so break the ties.
    """
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for name, t in list(module.named_parameters()) + list(module.named_buffers()):
            if not t.is_floating_point() or t.numel() < 2:
                continue
            if bool((t == t.reshape(-1)[0]).all()):
                noise = torch.randn(t.shape, generator=g) * 0.1
                if name.endswith("running_var"):
                    t.copy_(1.0 + noise.abs())
                else:
                    t.add_(noise)


def make(name):
    module, example = _make(name)
    perturb_constant_tensors(module)
    return module, example


def _make(name):
    """(module, example input) for a model name."""
    tv = torchvision.models
    torch.manual_seed(0)
    if name == "alexnet":
        return tv.alexnet(weights=None), torch.randn(1, 3, 224, 224)
    if name == "resnet50":
        return tv.resnet50(weights=None), torch.randn(1, 3, 224, 224)
    if name == "inception_v3":
        m = tv.inception_v3(weights=None, aux_logits=False, init_weights=False)
        return m, torch.randn(1, 3, 299, 299)
    if name == "vgg16":
        return tv.vgg16(weights=None), torch.randn(1, 3, 224, 224)
    if name.startswith("mobilenet_v2"):
        return tv.mobilenet_v2(weights=None), torch.randn(1, 3, 224, 224)
    if name.startswith("transformer_lm"):
        return TransformerLM(seq=SEQ_LEN), torch.randint(0, 1000, (1, SEQ_LEN), dtype=torch.int64)
    if name == "mobilenet_v3_small":
        return tv.mobilenet_v3_small(weights=None), torch.randn(1, 3, 224, 224)
    if name == "fcn_resnet50":
        m = tv.segmentation.fcn_resnet50(weights=None, weights_backbone=None,
                                         num_classes=21, aux_loss=False)
        return SegmentationOut(m), torch.randn(1, 3, SEGMENTATION_SIZE, SEGMENTATION_SIZE)
    if name == "deeplabv3_resnet50":
        m = tv.segmentation.deeplabv3_resnet50(weights=None, weights_backbone=None,
                                               num_classes=21, aux_loss=False)
        return SegmentationOut(m), torch.randn(1, 3, SEGMENTATION_SIZE, SEGMENTATION_SIZE)
    if name == "seq2seq_transformer":
        tokens = torch.randint(0, 1000, (1, SEQ2SEQ_LEN), dtype=torch.int64)
        return Seq2SeqTransformer(seq=SEQ2SEQ_LEN), (tokens, tokens.roll(1, 1))
    if name == "llama_lm":
        return LlamaLM(seq=SEQ_LEN), torch.randint(0, 1000, (1, SEQ_LEN), dtype=torch.int64)
    raise ValueError(name)


# file name -> opset
MODELS = collections.OrderedDict([
    ("alexnet", 13),
    ("resnet50", 13),
    ("inception_v3", 13),
    ("vgg16", 13),
    ("mobilenet_v2", 13),
    ("transformer_lm", 13),
    ("mobilenet_v2_opset11", 11),
    ("mobilenet_v2_opset9", 9),
    ("transformer_lm_opset11", 11),
    # Front-end acceptance models (issue 15): HardSwish/HardSigmoid, Resize and
    # dilated convolutions, an encoder-decoder with masks, and a Llama-style GPT.
    ("mobilenet_v3_small", 13),
    ("fcn_resnet50", 13),
    ("deeplabv3_resnet50", 13),
    ("seq2seq_transformer", 13),
    ("llama_lm", 13),
])

# Export options tried in order; the first that exports and passes the checker wins.
# PRESERVE with the module in eval() comes first: it exports the inference graph
# (dropout gone, BatchNormalization with running statistics) but skips the EVAL-only
# peephole that folds BatchNormalization into the preceding Conv.  ppc trains the
# model, so it needs BatchNormalization as an op of its own.
ATTEMPTS = [
    dict(do_constant_folding=True, training=torch.onnx.TrainingMode.PRESERVE),
    dict(do_constant_folding=True, training=torch.onnx.TrainingMode.EVAL),
    dict(do_constant_folding=False, training=torch.onnx.TrainingMode.EVAL),
]
# ONNX_ATEN_FALLBACK is deliberately not tried: a graph with ATen ops is of no use to ppc.
FALLBACK_OPSETS = [13, 14, 17, 11]


# ------------------------------------------------------------------------ analysis
def op_histogram(graph, hist=None):
    """op_type counts, including nodes inside If/Loop/Scan subgraphs."""
    hist = hist if hist is not None else collections.Counter()
    for node in graph.node:
        key = node.op_type if node.domain in ("", "ai.onnx") else node.domain + "::" + node.op_type
        hist[key] += 1
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                op_histogram(attr.g, hist)
            elif attr.type == onnx.AttributeProto.GRAPHS:
                for g in attr.graphs:
                    op_histogram(g, hist)
    return hist


def dims(value_info):
    t = value_info.type.tensor_type
    out = []
    for d in t.shape.dim:
        out.append(d.dim_param if d.dim_param else d.dim_value)
    return {"name": value_info.name,
            "elem_type": onnx.TensorProto.DataType.Name(t.elem_type),
            "shape": out}


def describe(path):
    model = onnx.load(path)
    onnx.checker.check_model(path)
    params = 0
    for t in model.graph.initializer:
        n = 1
        for d in t.dims:
            n *= d
        params += n
    opset = [o.version for o in model.opset_import if o.domain in ("", "ai.onnx")][0]
    return {
        "file": os.path.basename(path),
        "bytes": os.path.getsize(path),
        "opset": opset,
        "nodes": sum(op_histogram(model.graph).values()),
        "parameters": params,
        "initializers": len(model.graph.initializer),
        "inputs": [dims(v) for v in model.graph.input
                   if v.name not in {t.name for t in model.graph.initializer}],
        "outputs": [dims(v) for v in model.graph.output],
        "ops": dict(sorted(op_histogram(model.graph).items())),
    }


# -------------------------------------------------------------------------- export
def export(name, opset, outdir):
    module, example = make(name)
    module.eval()
    # One example tensor, or a tuple of them for models with several inputs
    # (the encoder-decoder: "src", "tgt").
    examples = example if isinstance(example, tuple) else (example,)
    input_names = ["input"] if len(examples) == 1 else ["src", "tgt"][:len(examples)]
    dynamic_axes = {n: {0: "batch"} for n in input_names}
    dynamic_axes["output"] = {0: "batch"}
    path = os.path.join(outdir, name + ".onnx")
    errors = []
    opsets = [opset] + [o for o in FALLBACK_OPSETS if o != opset]
    # Models pinned to an old opset (coverage files) must not drift to another one.
    if name.endswith("_opset11") or name.endswith("_opset9"):
        opsets = [opset]
    for op in opsets:
        for opts in ATTEMPTS:
            try:
                # Grad stays enabled on purpose: with grad off (or no parameter needing
                # grad), torch 1.13's nn.TransformerEncoderLayer takes its "fast path"
                # (aten::_transformer_encoder_layer_fwd), which has no ONNX export.
                with torch.enable_grad():
                    torch.onnx.export(
                        module, examples, path,
                        input_names=input_names, output_names=["output"],
                        dynamic_axes=dynamic_axes,
                        opset_version=op, export_params=True, **opts)
                info = describe(path)
                foreign = [k for k in info["ops"] if "::" in k]
                if foreign:
                    raise RuntimeError("non-ONNX-domain ops in export: %s" % foreign)
                info["export_options"] = {
                    "opset_version": op,
                    **{k: (v.name if hasattr(v, "name") else v) for k, v in opts.items()}}
                if errors:
                    info["failed_attempts"] = errors
                return info
            except Exception as e:  # record and try the next option set
                msg = "opset %d %s: %s: %s" % (op, {k: str(v) for k, v in opts.items()},
                                               type(e).__name__, str(e).splitlines()[0][:300])
                errors.append(msg)
                print("  attempt failed: " + msg, file=sys.stderr)
    raise RuntimeError("all export attempts failed for %s:\n  %s" % (name, "\n  ".join(errors)))


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        sys.exit(2)
    outdir = sys.argv[1]
    wanted = sys.argv[2:] or list(MODELS)
    os.makedirs(outdir, exist_ok=True)
    manifest_path = os.path.join(outdir, "manifest.json")
    manifest = {}
    if os.path.exists(manifest_path):
        with open(manifest_path) as f:
            manifest = json.load(f)
    manifest["_meta"] = {"torch": torch.__version__, "torchvision": torchvision.__version__,
                         "onnx": onnx.__version__}
    failed = []
    for name in wanted:
        t0 = time.time()
        print("== %s (opset %d)" % (name, MODELS[name]), flush=True)
        try:
            info = export(name, MODELS[name], outdir)
        except Exception:
            traceback.print_exc()
            failed.append(name)
            manifest[name] = {"error": traceback.format_exc().splitlines()[-1]}
            continue
        info["export_seconds"] = round(time.time() - t0, 1)
        manifest[name] = info
        print("   %s: %.1f MB, opset %d, %d nodes, %d parameters, options %s" % (
            info["file"], info["bytes"] / 1e6, info["opset"], info["nodes"],
            info["parameters"], info["export_options"]))
        print("   inputs %s -> outputs %s" % (
            [(i["name"], i["shape"]) for i in info["inputs"]],
            [(o["name"], o["shape"]) for o in info["outputs"]]))
        for op, n in info["ops"].items():
            print("      %-24s %d" % (op, n))
        with open(manifest_path, "w") as f:
            json.dump(manifest, f, indent=1, sort_keys=True)
    print("manifest: " + manifest_path)
    if failed:
        print("FAILED: " + ", ".join(failed))
        sys.exit(1)


if __name__ == "__main__":
    main()
