#!/usr/bin/env python3
"""Small sequence models with torch.nn.LSTM and torch.nn.GRU, exported by
torch.onnx as ONNX LSTM and GRU nodes (opset 14).

Writes DIR/lstm.onnx: a 2-layer bidirectional, batch_first LSTM over
x[N, T, F] (torch transposes to ONNX's sequence-first layout around the
node, slices the layers' h0/c0 and reorders the gates of its initializers
at export), the last step's features through a Linear to class logits;
DIR/gru.onnx: a sequence-first GRU (torch's linear_before_reset=1) whose
every step feeds a Linear, and whose initial state is an input;
DIR/rnn.onnx: a bidirectional, batch_first nn.RNN with ReLU (an ONNX RNN
with activations ["Relu", "Relu"]) whose summed final states feed a Linear.
Both have a symbolic batch: ppc-opt binds it with --batch-size. Each model's
inputs for a batch of 4 and torch's logits on them are saved next to it
(NAME.INPUT.npy, NAME.expected.npy) for a forward check.
usage: make_recurrent_models.py DIR
"""
import os
import sys

import numpy as np
import torch

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
torch.manual_seed(5)
T, F, H, C = 5, 6, 8, 3


class LstmClassifier(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = torch.nn.LSTM(F, H, num_layers=2, batch_first=True,
                                  bidirectional=True)
        self.head = torch.nn.Linear(2 * H, C)

    def forward(self, x):
        y, _ = self.lstm(x)
        return self.head(y[:, -1, :])


class GruTagger(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.gru = torch.nn.GRU(F, H)
        self.head = torch.nn.Linear(H, C)

    def forward(self, x, h0):
        y, h = self.gru(x, h0)
        return self.head(y) + self.head(h)


class ReluRnnClassifier(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = torch.nn.RNN(F, H, nonlinearity="relu", batch_first=True,
                                bidirectional=True)
        self.head = torch.nn.Linear(H, C)

    def forward(self, x):
        _, h = self.rnn(x)
        return self.head(h[0] + h[1])


def export(name, model, args, names, axes):
    model.eval()
    torch.onnx.export(model, args, os.path.join(out, name + ".onnx"),
                      opset_version=14, input_names=names,
                      output_names=["logits"], dynamic_axes=axes)
    for arg_name, arg in zip(names, args):
        np.save(os.path.join(out, f"{name}.{arg_name}.npy"), arg.numpy())
    with torch.no_grad():
        np.save(os.path.join(out, name + ".expected.npy"),
                model(*args).numpy())


export("lstm", LstmClassifier(), (torch.randn(4, T, F),), ["x"],
       {"x": {0: "N"}, "logits": {0: "N"}})
export("gru", GruTagger(), (torch.randn(T, 4, F), 0.5 * torch.randn(1, 4, H)),
       ["x", "h0"], {"x": {1: "N"}, "h0": {1: "N"}, "logits": {1: "N"}})
export("rnn", ReluRnnClassifier(), (torch.randn(4, T, F),), ["x"],
       {"x": {0: "N"}, "logits": {0: "N"}})
