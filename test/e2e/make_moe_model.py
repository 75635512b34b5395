#!/usr/bin/env python3
"""A Mixtral-style sparse MoE block as Hugging Face writes it, exported by
PyTorch, and PyTorch's own training losses on one batch.

The block (transformers' MixtralSparseMoeBlock, written out here): a router
linear and a softmax in float32, top-k, the k weights normalized, then for
each expert the tokens routed to it (torch.where of the one-hot mask), its
SwiGLU MLP, times the tokens' routing weights, index_add_ed into the result.
The model: tokens x [B, S, H] -> x + moe(x) -> a linear head to C classes,
per token. torch.onnx exports the loop with NonZero, Gathers and a
ScatterElements per expert; ppc's importer fuses it back into one MoE.

Writes into DIR:
  moe.onnx            opset 17, the shapes of one batch [B, S, H];
  x.npy, labels.npy   that batch and its classes [B, S];
  expected.txt        PyTorch's mean token cross-entropy at steps 1..STEPS
                      of SGD (lr 0.1, no momentum) on that batch, one per
                      line: ppc-run's must match;
  torch-trained.onnx  the model after those STEPS updates, exported again
                      (the same initializer names).
STYLE qwen writes Qwen2-MoE's block instead: the top-k weights not
normalized, and a shared expert on every token gated by a sigmoid; STYLE
gelu the Mixtral block with two-layer GELU experts (fairseq's and
DeepSpeed-MoE's examples; exact GELU, exported as erf), their linear
layers with biases (exported as Gemm with transposed weights).
usage: make_moe_model.py DIR [BATCH] [STEPS] [mixtral|qwen|gelu]
"""
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

EXPERTS, TOP_K, HIDDEN, FFN, SEQ, CLASSES = 8, 2, 16, 24, 8, 10


class Expert(nn.Module):
    def __init__(self):
        super().__init__()
        self.w1 = nn.Linear(HIDDEN, FFN, bias=False)
        self.w2 = nn.Linear(FFN, HIDDEN, bias=False)
        self.w3 = nn.Linear(HIDDEN, FFN, bias=False)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class GeluExpert(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(HIDDEN, FFN)
        self.fc2 = nn.Linear(FFN, HIDDEN)

    def forward(self, x):
        return self.fc2(F.gelu(self.fc1(x)))


class SparseMoeBlock(nn.Module):
    def __init__(self, normalize=True, expert=Expert):
        super().__init__()
        self.normalize = normalize
        self.gate = nn.Linear(HIDDEN, EXPERTS, bias=False)
        self.experts = nn.ModuleList([expert() for _ in range(EXPERTS)])

    def routed(self, flat):
        """The routed experts' sum for the [tokens, hidden] `flat`."""
        router_logits = self.gate(flat)
        routing_weights = F.softmax(router_logits, dim=1, dtype=torch.float)
        routing_weights, selected = torch.topk(routing_weights, TOP_K, dim=-1)
        if self.normalize:
            routing_weights /= routing_weights.sum(dim=-1, keepdim=True)
        routing_weights = routing_weights.to(flat.dtype)
        final = torch.zeros(flat.shape, dtype=flat.dtype)
        mask = F.one_hot(selected, num_classes=EXPERTS).permute(2, 1, 0)
        for e in range(EXPERTS):
            idx, top_x = torch.where(mask[e])
            current = flat[None, top_x].reshape(-1, flat.shape[1])
            out = self.experts[e](current) * routing_weights[top_x, idx, None]
            final.index_add_(0, top_x, out.to(flat.dtype))
        return final

    def forward(self, hidden_states):
        batch, seq, hidden = hidden_states.shape
        flat = hidden_states.view(-1, hidden)
        return self.routed(flat).reshape(batch, seq, hidden)


class QwenMoeBlock(SparseMoeBlock):
    """Qwen2-MoE's block: the top-k weights not normalized, and a shared
    SwiGLU expert on every token, gated by a sigmoid, beside the routed
    ones."""

    def __init__(self):
        super().__init__(normalize=False)
        self.shared_expert = Expert()
        self.shared_expert_gate = nn.Linear(HIDDEN, 1, bias=False)

    def forward(self, hidden_states):
        batch, seq, hidden = hidden_states.shape
        flat = hidden_states.view(-1, hidden)
        shared = self.shared_expert(flat)
        shared = torch.sigmoid(self.shared_expert_gate(flat)) * shared
        return (self.routed(flat) + shared).reshape(batch, seq, hidden)


class Net(nn.Module):
    def __init__(self, style):
        super().__init__()
        self.block_sparse_moe = (
            QwenMoeBlock() if style == "qwen" else
            SparseMoeBlock(expert=GeluExpert) if style == "gelu" else
            SparseMoeBlock())
        self.head = nn.Linear(HIDDEN, CLASSES)

    def forward(self, x):
        return self.head(x + self.block_sparse_moe(x))


def main():
    out = sys.argv[1]
    batch = int(sys.argv[2]) if len(sys.argv) > 2 else 4
    steps = int(sys.argv[3]) if len(sys.argv) > 3 else 3
    style = sys.argv[4] if len(sys.argv) > 4 else "mixtral"
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    model = Net(style)
    x = torch.randn(batch, SEQ, HIDDEN)
    labels = torch.randint(0, CLASSES, (batch, SEQ))
    torch.onnx.export(model, x, os.path.join(out, "moe.onnx"),
                      opset_version=17, input_names=["x"],
                      output_names=["logits"], do_constant_folding=True)
    np.save(os.path.join(out, "x.npy"), x.numpy())
    np.save(os.path.join(out, "labels.npy"), labels.numpy())
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    losses = []
    for _ in range(steps):
        optimizer.zero_grad()
        loss = F.cross_entropy(model(x).reshape(-1, CLASSES), labels.reshape(-1))
        losses.append(loss.item())
        loss.backward()
        optimizer.step()
    with open(os.path.join(out, "expected.txt"), "w") as f:
        f.write("".join("%.9g\n" % v for v in losses))
    # The trained weights, as the same export names them.
    torch.onnx.export(model, x, os.path.join(out, "torch-trained.onnx"),
                      opset_version=17, input_names=["x"],
                      output_names=["logits"], do_constant_folding=True)


if __name__ == "__main__":
    main()
