#!/usr/bin/env python3
"""A small segmentation-style CNN with the activations and resizes that
MobileNetV3, YOLO-style and segmentation exports use, exported by PyTorch.

Writes PATH (ONNX, opset 14): conv, HardSwish,
ELU, SELU, Softplus, Mish (as x * tanh(softplus(x))),
PReLU (a trained slope per channel), a bilinear 2x Resize (align_corners
false), a nearest 2x Resize, strided convolutions back down, global
average pooling and a linear head. model-e2e.sh trains it under mpirun.
usage: make_activations_model.py PATH BATCH
"""
import sys

import torch
from torch import nn


class Activations(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 8, 3, padding=1)
        self.conv1 = nn.Conv2d(8, 8, 3, padding=1)
        self.prelu = nn.PReLU(8)
        self.conv2 = nn.Conv2d(8, 8, 3, stride=2, padding=1)
        self.conv3 = nn.Conv2d(8, 16, 3, stride=2, padding=1)
        self.head = nn.Linear(16, 10)

    def forward(self, x):
        x = nn.functional.hardswish(self.stem(x))
        x = nn.functional.elu(x)
        x = nn.functional.interpolate(x, scale_factor=2, mode="bilinear",
                                      align_corners=False)
        x = nn.functional.selu(self.conv1(x))
        x = nn.functional.softplus(x)
        x = self.prelu(nn.functional.mish(self.conv2(x)))
        x = nn.functional.interpolate(x, scale_factor=2, mode="nearest")
        x = nn.functional.hardsigmoid(self.conv3(x))
        return self.head(x.mean(dim=(2, 3)))


path, batch = sys.argv[1], int(sys.argv[2])
torch.manual_seed(0)
model = Activations()
torch.onnx.export(model, torch.randn(batch, 3, 16, 16), path,
                  opset_version=14, input_names=["image"],
                  output_names=["logits"], do_constant_folding=True)
