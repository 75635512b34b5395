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


SEQ_LEN = 64


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
                        module, (example,), path,
                        input_names=["input"], output_names=["output"],
                        dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}},
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
