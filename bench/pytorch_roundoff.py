#!/usr/bin/env python3
"""How far PyTorch's own float32 gradients are from its float64 ones.

For a model of bench/export_torchvision.py (training mode, dropout off,
batch 4 at 96x96, loss = mean(output * fixed random weights)), prints the
median and largest over the weights of max|g32 - g64| / max|g64|: the
scale of float32 round-off, kinks included, that a partitioned step's
gradients can be expected to differ by (docs/onnx-coverage.md).
usage: /usr/bin/python3 bench/pytorch_roundoff.py [MODEL]   (fcn_resnet50)
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import export_torchvision  # noqa: E402

name = sys.argv[1] if len(sys.argv) > 1 else "fcn_resnet50"
model = export_torchvision.make(name)
model = model[0] if isinstance(model, tuple) else model
model.train()
for module in model.modules():
    if isinstance(module, torch.nn.Dropout):
        module.p = 0.0
torch.manual_seed(3)
image = torch.randn(4, 3, 96, 96)


def gradients(dtype):
    m = model.to(dtype)
    m.zero_grad()
    out = m(image.to(dtype))
    out = out["out"] if isinstance(out, dict) else out
    weights = torch.randn(out.shape, generator=torch.Generator().manual_seed(5))
    (out * weights.to(dtype)).mean().backward()
    return {k: p.grad.detach().double().clone()
            for k, p in m.named_parameters()}


g64 = gradients(torch.float64)
g32 = gradients(torch.float32)
errors = sorted(((g32[k] - g64[k]).abs().max() /
                 g64[k].abs().max().clamp_min(1e-30)).item() for k in g64)
print(f"{name}: float32 vs float64 gradients over {len(errors)} weights: "
      f"median {errors[len(errors) // 2]:.3g}, largest {errors[-1]:.3g} "
      "(relative to each gradient's largest value)")
