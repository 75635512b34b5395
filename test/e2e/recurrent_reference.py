#!/usr/bin/env python3
"""ONNX LSTM, GRU and RNN forms past ONNX's node tests, against a numpy
reference written from the operator spec: bidirectional, reverse, layout 1,
initial states, peepholes, input_forget, clip, linear_before_reset 0 and 1,
no bias, and every activation ppc takes, with activation_alpha/beta
consumed in order by the activations that use them (onnxruntime's reading).
Each model (W, R, B, states as graph inputs) is imported, lowered to a
forward plan and run by ppc-run; every output must match to 1e-4.
usage: recurrent_reference.py PPC_OPT PPC_RUN WORKDIR
"""
import glob
import os
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper

PPC_OPT, PPC_RUN, WORK = sys.argv[1:4]
rng = np.random.default_rng(0)

NUM_GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}
DEFAULT_ACTIVATIONS = {"LSTM": ["Sigmoid", "Tanh", "Tanh"],
                       "GRU": ["Sigmoid", "Tanh"], "RNN": ["Tanh"]}
ACTIVATIONS = {
    "Sigmoid": lambda x, a, b: 1 / (1 + np.exp(-x)),
    "Tanh": lambda x, a, b: np.tanh(x),
    "Relu": lambda x, a, b: np.maximum(x, 0),
    "LeakyRelu": lambda x, a, b: np.where(x < 0, a * x, x),
    "HardSigmoid": lambda x, a, b: np.clip(a * x + b, 0, 1),
    "Elu": lambda x, a, b: np.where(x > 0, x, a * (np.exp(x) - 1)),
    "Softplus": lambda x, a, b: np.log1p(np.exp(x)),
    "Softsign": lambda x, a, b: x / (1 + np.abs(x)),
    "Affine": lambda x, a, b: a * x + b,
    "ScaledTanh": lambda x, a, b: a * np.tanh(b * x),
}
# How many of alpha, beta each activation takes, and their defaults.
PARAMS = {"LeakyRelu": (1, 0.01, 0), "Elu": (1, 1.0, 0),
          "HardSigmoid": (2, 0.2, 0.5), "Affine": (2, 1.0, 0.0),
          "ScaledTanh": (2, 1.0, 1.0)}


def reference(op, x, w, r, b, h0, c0, p, attrs):
    """Y, Y_h, Y_c of the ONNX operator, as its spec defines them."""
    num_dirs, hidden = w.shape[0], r.shape[2]
    batch_first = attrs.get("layout", 0) == 1
    if batch_first:
        x = x.transpose(1, 0, 2)
        h0 = None if h0 is None else h0.transpose(1, 0, 2)
        c0 = None if c0 is None else c0.transpose(1, 0, 2)
    seq, batch = x.shape[:2]
    gates = NUM_GATES[op]
    per_dir = len(DEFAULT_ACTIVATIONS[op])
    names = list(attrs.get("activations", DEFAULT_ACTIVATIONS[op]))
    if len(names) == per_dir:
        names *= num_dirs
    alphas = list(attrs.get("activation_alpha", []))
    betas = list(attrs.get("activation_beta", []))
    acts = []
    for name in names:
        count, alpha, beta = PARAMS.get(name, (0, 0, 0))
        if count >= 1 and alphas:
            alpha = alphas.pop(0)
        if count >= 2 and betas:
            beta = betas.pop(0)
        acts.append((ACTIVATIONS[name], alpha, beta))
    clip = attrs.get("clip")

    def act(i, v, d):
        fn, alpha, beta = acts[d * per_dir + i]
        if clip is not None:
            v = np.clip(v, -clip, clip)
        return fn(v, alpha, beta)

    y = np.zeros((seq, num_dirs, batch, hidden))
    y_h = np.zeros((num_dirs, batch, hidden))
    y_c = np.zeros((num_dirs, batch, hidden))
    H = hidden
    for d in range(num_dirs):
        h = np.zeros((batch, H)) if h0 is None else h0[d]
        c = np.zeros((batch, H)) if c0 is None else c0[d]
        wb = np.zeros(gates * H) if b is None else b[d, :gates * H]
        rb = np.zeros(gates * H) if b is None else b[d, gates * H:]
        reverse = attrs.get("direction") == "reverse" or d == 1
        for t in range(seq - 1, -1, -1) if reverse else range(seq):
            xw = x[t] @ w[d].T + wb
            if op == "RNN":
                h = act(0, xw + h @ r[d].T + rb, d)
            elif op == "GRU":
                rd = r[d]
                z = act(0, xw[:, :H] + h @ rd[:H].T + rb[:H], d)
                reset = act(0, xw[:, H:2 * H] + h @ rd[H:2 * H].T
                            + rb[H:2 * H], d)
                if attrs.get("linear_before_reset", 0):
                    rh = reset * (h @ rd[2 * H:].T + rb[2 * H:])
                else:
                    rh = (reset * h) @ rd[2 * H:].T + rb[2 * H:]
                h = (1 - z) * act(1, xw[:, 2 * H:] + rh, d) + z * h
            else:
                g = xw + h @ r[d].T + rb
                pi, po, pf = (0, 0, 0) if p is None else (
                    p[d, :H], p[d, H:2 * H], p[d, 2 * H:])
                i = act(0, g[:, :H] + pi * c, d)
                if attrs.get("input_forget", 0):
                    f = 1 - i
                else:
                    f = act(0, g[:, 2 * H:3 * H] + pf * c, d)
                c = f * c + i * act(1, g[:, 3 * H:], d)
                o = act(0, g[:, H:2 * H] + po * c, d)
                h = o * act(2, c, d)
            y[t, d] = h
        y_h[d], y_c[d] = h, c
    if batch_first:
        return (y.transpose(2, 0, 1, 3), y_h.transpose(1, 0, 2),
                y_c.transpose(1, 0, 2))
    return y, y_h, y_c


def run(name, op, seq, batch, input_size, hidden, attrs, bias=True,
        init=False, peep=False):
    """Runs one model through ppc; True if every output matches."""
    num_dirs = 2 if attrs.get("direction") == "bidirectional" else 1
    gates = NUM_GATES[op]
    batch_first = attrs.get("layout", 0) == 1

    def normal(shape, scale=1.0):
        return rng.normal(0, scale, shape).astype(np.float32)
    x = normal((batch, seq, input_size) if batch_first
               else (seq, batch, input_size))
    w = normal((num_dirs, gates * hidden, input_size), 0.5)
    r = normal((num_dirs, gates * hidden, hidden), 0.5)
    b = normal((num_dirs, 2 * gates * hidden), 0.5) if bias else None
    state = (batch, num_dirs, hidden) if batch_first else (
        num_dirs, batch, hidden)
    h0 = normal(state) if init else None
    c0 = normal(state) if init and op == "LSTM" else None
    p = normal((num_dirs, 3 * hidden), 0.5) if peep else None
    inputs = [("X", x), ("W", w), ("R", r), ("B", b), ("sequence_lens", None),
              ("initial_h", h0), ("initial_c", c0), ("P", p)]
    if op != "LSTM":
        inputs = inputs[:6]
    input_names = [n if v is not None else "" for n, v in inputs]
    while input_names[-1] == "":
        input_names.pop()
    outputs = ["Y", "Y_h"] + (["Y_c"] if op == "LSTM" else [])
    node = helper.make_node(op, input_names, outputs, hidden_size=hidden,
                            **attrs)
    graph = helper.make_graph(
        [node], name,
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, v.shape)
         for n, v in inputs if v is not None],
        [helper.make_tensor_value_info(o, TensorProto.FLOAT, None)
         for o in outputs])
    model = onnx.shape_inference.infer_shapes(helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 14)]))
    work = os.path.join(WORK, name)
    os.makedirs(work, exist_ok=True)
    onnx.save(model, os.path.join(work, "model.onnx"))
    plan = os.path.join(work, "plan.pb")
    proc = subprocess.run(
        [PPC_OPT, os.path.join(work, "model.onnx"),
         f"--ppc-lower-to-plan=plan={plan}", "-o", os.devnull],
        capture_output=True, text=True)
    if proc.returncode:
        print(name, "import failed:", proc.stderr[:500])
        return False
    args = [PPC_RUN, plan, "--steps", "1", "--quiet", "--save-outputs",
            os.path.join(work, "out")]
    for n, v in inputs:
        if v is not None:
            np.save(os.path.join(work, n + ".npy"), v)
            args += ["--input", f"{n}={os.path.join(work, n + '.npy')}"]
    proc = subprocess.run(args, capture_output=True, text=True)
    if proc.returncode:
        print(name, "ppc-run failed:", proc.stderr[-500:])
        return False
    expected = reference(op, x, w, r, b, h0, c0, p, attrs)
    ok = True
    for i, (output, want) in enumerate(zip(outputs, expected)):
        found = glob.glob(os.path.join(work, "out", f"output_{i}_*.npy"))
        got = np.load(found[0])
        if got.shape != want.shape:
            print(name, output, "has shape", got.shape, "expected",
                  want.shape)
            ok = False
        elif not np.allclose(got, want, rtol=1e-4, atol=1e-4):
            print(name, output, "differs by up to",
                  np.max(np.abs(got - want)))
            ok = False
    print(name, "ok" if ok else "FAILED")
    return ok


CASES = [
    ("lstm_bidirectional_peepholes_input_forget_clip_layout1", "LSTM", 3, 2,
     3, 4, dict(direction="bidirectional", layout=1, input_forget=1,
                clip=0.3), dict(init=True, peep=True)),
    ("lstm_reverse_activations", "LSTM", 3, 2, 3, 4,
     dict(direction="reverse",
          activations=["HardSigmoid", "Affine", "ScaledTanh"],
          activation_alpha=[0.3, 0.8, 1.5],
          activation_beta=[0.4, 0.1, 0.7]), dict(init=True)),
    ("lstm_softplus_no_bias", "LSTM", 2, 1, 2, 2,
     dict(activations=["Sigmoid", "Softplus", "Tanh"]), dict(bias=False)),
    ("gru_bidirectional_clip", "GRU", 4, 3, 2, 3,
     dict(direction="bidirectional", clip=1.0), dict(init=True)),
    ("gru_bidirectional_linear_before_reset_layout1", "GRU", 4, 3, 2, 3,
     dict(direction="bidirectional", linear_before_reset=1, layout=1), {}),
    ("gru_linear_before_reset_no_bias", "GRU", 2, 2, 2, 3,
     dict(linear_before_reset=1), dict(bias=False, init=True)),
    ("rnn_bidirectional_two_activations", "RNN", 3, 2, 3, 2,
     dict(direction="bidirectional", activations=["Relu", "LeakyRelu"],
          activation_alpha=[0.2]), dict(init=True)),
    ("rnn_softsign_elu_layout1", "RNN", 3, 2, 3, 2,
     dict(direction="bidirectional", activations=["Softsign", "Elu"],
          layout=1), {}),
]
results = [run(name, op, seq, batch, input_size, hidden, attrs, **options)
           for name, op, seq, batch, input_size, hidden, attrs, options
           in CASES]
if all(results):
    print("recurrent reference passed")
sys.exit(0 if all(results) else 1)
