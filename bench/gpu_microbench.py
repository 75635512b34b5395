#!/usr/bin/env python3
"""Measures what the simulator's GPU model needs, on the GPU it runs on.

    python3 bench/gpu_microbench.py --out gpu-measurements.json [--quick]

Needs PyTorch with CUDA (the lent GPU machines have it; Debian's CPU-only
torch does not run this). Every kernel time is the median of CUDA-event
timed replays of a CUDA graph that holds several launches, after warm-up,
on random data, with inputs rotated through enough copies to defeat the L2
cache where one copy would fit in it. Sections (all written to one JSON):

  gemm       bf16 GEMMs (torch.matmul -> cuBLAS/cuBLASLt, tensor cores) on
             a grid of M, N, K in {256 .. 16384} and at the shapes of the
             Megatron-LM H100 rows (bench/megatron_published.sh): forward
             x @ W^T, input gradient dy @ W, weight gradient dy^T @ x;
             fp16, tf32 and plain fp32 on the square sizes
  stream     memory-bound kernels (copy, add, gelu, layer norm, softmax,
             dropout) at 64 MiB - 1 GiB: achievable bandwidth
  attention  scaled_dot_product_attention, causal, bf16, flash and cuDNN
             backends, forward and forward+backward (--attention-shape:
             one batch,heads,seq,head_dim alone)
  loss       cross-entropy over a 131,072-word vocabulary, 4,096 tokens
  launch     one tiny kernel per launch: in a graph and eagerly
  gpt        a GPT of the bench's layer structure (bench/models.py gpt:
             separate q/k/v linears, fused causal attention, 4h GELU
             feed-forward, untied head, no loss), PyTorch eager, bf16:
             forward+backward of one micro-batch, and a fused Adam update
             of fp32 master weights of the same count
  step       (not run by default) the whole training step of gpu-check.sh's
             GPT (--step-shape) three ways: bf16 weights with matmul/
             softmax/matmul attention, autocast with SDPA and fused Adam,
             torch.compile of that; scripts/gpu-check.sh sets ppc-run's
             step beside them
  conv       (not run by default) cuDNN as PyTorch runs it, channels-last
             bf16 (cudnn.benchmark on): every distinct convolution of
             torchvision's ResNet-50 and VGG-16 at batch 32 and 256,
             forward, data gradient and weight gradient; ResNet-50's batch
             norms in training (forward + backward) and its pools
  resnet_step (not run by default) torchvision's ResNet-50 training step
             (SGD with momentum is what its recipe uses; Adam here, as
             ppc's plans) at --resnet-batches: eager channels-last with
             autocast, eager with bf16 weights, and torch.compile of the
             first at the first batch size; gpu-check.sh sets ppc-run's
             steps beside them

The numbers feed docs/simulator.md (device models) and the H100 preset.
"""
import argparse
import json
import math
import statistics
import sys
import time

import torch
import torch.nn.functional as F

DEV = "cuda"


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def graph_time(fn, launches, reps=7, warm=2):
    """Median seconds per call of fn(i) over graph replays of `launches`
    calls (i = 0 .. launches-1)."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for i in range(min(launches, 3)):
            fn(i)
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for i in range(launches):
            fn(i)
    return event_time(g.replay, reps, warm) / launches


def event_time(fn, reps=5, warm=2):
    """Median seconds per call of fn(), eagerly, timed with events."""
    for _ in range(warm):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        a = torch.cuda.Event(enable_timing=True)
        b = torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) / 1e3)
    return statistics.median(times)


def copies_for(nbytes, launches):
    # Enough distinct inputs that a graph's launches do not all hit in L2.
    return max(1, min(launches, math.ceil(160e6 / max(nbytes, 1))))


def time_gemm(m, n, k, dtype, layout):
    """One GEMM C[m,n] = A[m,k] B[k,n] with a linear layer's operand
    layouts: 'fwd' x @ W^T (W stored [n,k]), 'dgrad' dy @ W (W stored
    [k,n]), 'wgrad' dy^T @ x (dy stored [k,m])."""
    flops = 2.0 * m * n * k
    est = flops / 6e14 + 4e-6
    launches = max(1, min(40, int(4e-3 / est)))
    esz = torch.tensor([], dtype=dtype).element_size()
    nbytes = (m * k + n * k) * esz
    c = copies_for(nbytes, launches)
    if layout == "fwd":  # x @ W^T: A [m,k], B stored [n,k]
        A = [torch.randn(m, k, device=DEV, dtype=dtype) for _ in range(c)]
        B = [torch.randn(n, k, device=DEV, dtype=dtype) for _ in range(c)]
        fn = lambda i: torch.matmul(A[i % c], B[i % c].t(), out=out)
    elif layout == "dgrad":  # dy @ W: A [m,k], B stored [k,n]
        A = [torch.randn(m, k, device=DEV, dtype=dtype) for _ in range(c)]
        B = [torch.randn(k, n, device=DEV, dtype=dtype) for _ in range(c)]
        fn = lambda i: torch.matmul(A[i % c], B[i % c], out=out)
    else:  # wgrad dy^T @ x: A stored [k,m], B stored [k,n]
        A = [torch.randn(k, m, device=DEV, dtype=dtype) for _ in range(c)]
        B = [torch.randn(k, n, device=DEV, dtype=dtype) for _ in range(c)]
        fn = lambda i: torch.matmul(A[i % c].t(), B[i % c], out=out)
    out = torch.empty(m, n, device=DEV, dtype=dtype)
    t = graph_time(fn, launches)
    del A, B, out
    return {"m": m, "n": n, "k": k, "dtype": str(dtype).split(".")[-1],
            "layout": layout, "seconds": t, "tflops": flops / t / 1e12}


# Megatron-LM H100 rows: hidden, tensor-parallel degree (seq 4096, mbs 1).
MEGATRON_H100 = [(2048, 1), (4096, 2), (6144, 4), (7168, 8), (8192, 8),
                 (10240, 8), (12288, 8), (16384, 8), (18432, 8)]


def megatron_shapes():
    tokens, vocab = 4096, 131072
    shapes = set()
    for h, t in MEGATRON_H100:
        # (tokens, out, in) of q/k/v, attention out, ff1, ff2, the head.
        for n, k in [(h // t, h), (h, h // t), (4 * h // t, h),
                     (h, 4 * h // t), (vocab // t, h)]:
            shapes.add((tokens, n, k, "fwd"))    # y = x W^T
            shapes.add((tokens, k, n, "dgrad"))  # dx = dy W
            shapes.add((n, k, tokens, "wgrad"))  # dW = dy^T x
    return sorted(shapes)


def section_gemm(quick):
    rows = []
    sizes = [256, 512, 1024, 2048, 4096, 8192, 16384]
    if quick:
        sizes = [512, 4096]
    t0 = time.time()
    for m in sizes:
        for n in sizes:
            for k in sizes:
                rows.append(time_gemm(m, n, k, torch.bfloat16, "fwd"))
    log("gemm grid: %d in %.1f s" % (len(rows), time.time() - t0))
    for (m, n, k, layout) in ([] if quick else megatron_shapes()):
        r = time_gemm(m, n, k, torch.bfloat16, layout)
        r["megatron"] = True
        rows.append(r)
    # Other dtypes on the square sizes (and a few skinny ones).
    for dtype, tf32 in [(torch.float16, False), (torch.float32, True),
                        (torch.float32, False)]:
        torch.backends.cuda.matmul.allow_tf32 = tf32
        for s in sizes:
            r = time_gemm(s, s, s, dtype, "fwd")
            r["dtype"] = "tf32" if tf32 else r["dtype"]
            rows.append(r)
    torch.backends.cuda.matmul.allow_tf32 = False
    log("gemm: %d rows in %.1f s" % (len(rows), time.time() - t0))
    return rows


def section_stream(quick):
    rows = []
    hidden = 4096
    for dtype in [torch.bfloat16, torch.float32]:
        esz = torch.tensor([], dtype=dtype).element_size()
        for mib in ([256] if quick else [64, 256, 1024]):
            n = mib * 2**20 // esz
            rows_ = n // hidden
            x = torch.randn(rows_, hidden, device=DEV, dtype=dtype)
            y = torch.randn(rows_, hidden, device=DEV, dtype=dtype)
            o = torch.empty_like(x)
            w = torch.randn(hidden, device=DEV, dtype=dtype)
            b = torch.randn(hidden, device=DEV, dtype=dtype)
            kernels = {
                "copy": (lambda i: o.copy_(x), 2),
                "add": (lambda i: torch.add(x, y, out=o), 3),
                "gelu": (lambda i: o.copy_(F.gelu(x)), 4),  # gelu + copy
                "layer_norm": (lambda i: F.layer_norm(x, (hidden,), w, b), 2),
                "softmax": (lambda i: torch.softmax(x, -1), 2),
                "dropout": (lambda i: F.dropout(x, 0.1, True), 2),
            }
            for name, (fn, passes) in kernels.items():
                t = graph_time(fn, 5)
                nbytes = passes * n * esz
                rows.append({"kernel": name, "dtype": str(dtype).split(".")[-1],
                             "bytes": nbytes, "seconds": t,
                             "gbps": nbytes / t / 1e9})
            del x, y, o
    return rows


def section_attention(quick, shape=None):
    """`shape` (batch, heads, seq, head dim): that case alone."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    rows = []
    cases = [(1, 16, 4096, 128), (1, 32, 4096, 128), (1, 24, 2048, 128),
             (1, 32, 2048, 64)]
    if quick:
        cases = cases[:1]
    if shape:
        cases = [shape]
    for batch, heads, seq, d in cases:
        q, k, v = [torch.randn(batch, heads, seq, d, device=DEV,
                               dtype=torch.bfloat16, requires_grad=True)
                   for _ in range(3)]
        dy = torch.randn(batch, heads, seq, d, device=DEV,
                         dtype=torch.bfloat16)
        flops_fwd = 4.0 * batch * heads * seq * seq * d / 2  # causal half
        for backend in ["FLASH_ATTENTION", "CUDNN_ATTENTION"]:
            try:
                with sdpa_kernel(getattr(SDPBackend, backend)):
                    fwd = lambda: F.scaled_dot_product_attention(
                        q, k, v, is_causal=True)
                    tf = event_time(fwd)

                    def both():
                        o = F.scaled_dot_product_attention(q, k, v,
                                                           is_causal=True)
                        o.backward(dy)
                    tb = event_time(both)
                rows.append({"backend": backend, "batch": batch,
                             "heads": heads, "seq": seq,
                             "head_dim": d, "forward_s": tf,
                             "backward_s": tb - tf,
                             "forward_tflops": flops_fwd / tf / 1e12,
                             "backward_tflops":
                                 2.5 * flops_fwd / (tb - tf) / 1e12})
            except Exception as e:  # a backend this build lacks
                rows.append({"backend": backend, "batch": batch,
                             "heads": heads, "seq": seq,
                             "head_dim": d, "error": str(e)[:200]})
    return rows


def section_loss():
    rows = []
    tokens, vocab = 4096, 131072
    logits = torch.randn(tokens, vocab, device=DEV, dtype=torch.bfloat16,
                         requires_grad=True)
    labels = torch.randint(0, vocab, (tokens,), device=DEV)
    for upcast in [False, True]:
        def fwd():
            x = logits.float() if upcast else logits
            return F.cross_entropy(x, labels)
        tf = event_time(fwd)
        tb = event_time(lambda: fwd().backward())
        rows.append({"tokens": tokens, "vocab": vocab, "fp32": upcast,
                     "forward_s": tf, "forward_backward_s": tb})
    return rows


def section_launch():
    x = torch.randn(1, device=DEV)
    graph = graph_time(lambda i: x.add_(1), 200)

    def eager():
        for _ in range(200):
            x.add_(1)
    return {"graph_s_per_kernel": graph,
            "eager_s_per_kernel": event_time(eager) / 200}


class Layer(torch.nn.Module):
    """attention: "sdpa" (scaled_dot_product_attention, causal) or
    "matmul" (matmul, softmax, matmul without a mask: the graph of
    bench/models.py --unfused-attention)."""

    def __init__(self, h, heads, attention="sdpa"):
        super().__init__()
        self.heads = heads
        self.attention = attention
        self.ln1 = torch.nn.LayerNorm(h)
        self.q = torch.nn.Linear(h, h)
        self.k = torch.nn.Linear(h, h)
        self.v = torch.nn.Linear(h, h)
        self.o = torch.nn.Linear(h, h)
        self.ln2 = torch.nn.LayerNorm(h)
        self.ff1 = torch.nn.Linear(h, 4 * h)
        self.ff2 = torch.nn.Linear(4 * h, h)

    def forward(self, x):
        b, s, h = x.shape
        y = self.ln1(x)

        def split(t):
            return t.view(b, s, self.heads, h // self.heads).transpose(1, 2)
        q, k, v = split(self.q(y)), split(self.k(y)), split(self.v(y))
        if self.attention == "sdpa":
            c = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            scores = torch.matmul(q, k.transpose(-2, -1)) * (h // self.heads) ** -0.5
            c = torch.matmul(torch.softmax(scores, dim=-1), v)
        x = x + self.o(c.transpose(1, 2).reshape(b, s, h))
        return x + self.ff2(F.gelu(self.ff1(self.ln2(x))))


class Gpt(torch.nn.Module):
    def __init__(self, layers, h, heads, seq, vocab, attention="sdpa"):
        super().__init__()
        self.embed = torch.nn.Embedding(vocab, h)
        self.pos = torch.nn.Parameter(torch.randn(seq, h) * 0.02)
        self.layers = torch.nn.ModuleList(Layer(h, heads, attention)
                                          for _ in range(layers))
        self.ln = torch.nn.LayerNorm(h)
        self.head = torch.nn.Linear(h, vocab)

    def forward(self, tokens):
        x = self.embed(tokens) + self.pos
        for layer in self.layers:
            x = layer(x)
        return self.head(self.ln(x))


def section_gpt(quick):
    rows = []
    configs = [("h100/1.7b", 24, 2048, 16, 4096, 131072),
               ("layer-h4096", 1, 4096, 32, 4096, 131072),
               ("layer-h8192", 1, 8192, 64, 4096, 131072)]
    if quick:
        configs = [("tiny", 2, 1024, 8, 1024, 32768)]
    for name, layers, h, heads, seq, vocab in configs:
        torch.manual_seed(0)
        model = Gpt(layers, h, heads, seq, vocab).to(DEV, torch.bfloat16)
        params = sum(p.numel() for p in model.parameters())
        tokens = torch.randint(0, vocab, (1, seq), device=DEV)
        dy = torch.randn(1, seq, vocab, device=DEV, dtype=torch.bfloat16)

        def fwd():
            with torch.no_grad():
                model(tokens)

        def step():
            model(tokens).backward(dy)
        tf = event_time(fwd, reps=5)
        tfb = event_time(step, reps=5)
        model.zero_grad(set_to_none=True)
        del model, dy
        torch.cuda.empty_cache()
        # Adam over fp32 master weights, gradients and moments of that size.
        chunk = 2**26
        n = params
        sizes = [chunk] * (n // chunk) + ([n % chunk] if n % chunk else [])
        master = [torch.randn(s, device=DEV) for s in sizes]
        for p in master:
            p.grad = torch.randn_like(p)
        opt = torch.optim.Adam(master, lr=1e-4, fused=True)
        opt.step()
        tadam = event_time(opt.step, reps=5)
        del master, opt
        torch.cuda.empty_cache()
        rows.append({"model": name, "layers": layers, "hidden": h,
                     "heads": heads, "seq": seq, "vocab": vocab,
                     "micro_batch": 1, "parameters": params,
                     "forward_s": tf, "forward_backward_s": tfb,
                     "adam_fp32_s": tadam})
        log("gpt %s: fwd %.1f ms, fwd+bwd %.1f ms, adam %.1f ms" %
            (name, tf * 1e3, tfb * 1e3, tadam * 1e3))
    return rows


def train_step_time(model, tokens, labels, optimizer, autocast, steps=10):
    """Median seconds of one training step (forward, mean cross-entropy over
    the tokens, backward, optimizer step), after warm-up."""
    vocab = model.head.out_features

    def step():
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=autocast):
            logits = model(tokens)
            loss = F.cross_entropy(logits.reshape(-1, vocab).float()
                                   if autocast else logits.reshape(-1, vocab),
                                   labels.reshape(-1))
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    return event_time(step, reps=steps, warm=3)


def section_step(shape):
    """The training step of scripts/gpu-check.sh's GPT (bench/models.py gpt:
    separate q/k/v linears, GELU feed-forward of 4h, untied head, mean
    softmax cross-entropy over the tokens, Adam) in PyTorch, the ways a
    user would write it: weights in bf16 with attention as matmul, softmax,
    matmul (the graph of --unfused-attention); autocast to bf16 with
    scaled_dot_product_attention and fused Adam; torch.compile of that."""
    layers, h, heads, seq, vocab, batch = shape
    tokens = torch.randint(0, vocab, (batch, seq), device=DEV)
    labels = torch.randint(0, vocab, (batch, seq), device=DEV)
    rows = []
    for name in ("bf16-matmul-attention", "autocast-sdpa", "compile-sdpa"):
        torch.manual_seed(0)
        try:
            attention = "matmul" if name == "bf16-matmul-attention" else "sdpa"
            model = Gpt(layers, h, heads, seq, vocab, attention).to(DEV)
            if name == "bf16-matmul-attention":
                model = model.to(torch.bfloat16)
                optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)
            else:
                optimizer = torch.optim.Adam(model.parameters(), lr=1e-4,
                                             fused=True)
            if name == "compile-sdpa":
                model = torch.compile(model)
            seconds = train_step_time(model, tokens, labels, optimizer,
                                      autocast=name != "bf16-matmul-attention")
            rows.append({"variant": name, "step_s": seconds,
                         "tokens_per_s": batch * seq / seconds})
            log("step %s: %.1f ms" % (name, seconds * 1e3))
        except Exception as e:  # the others still count
            rows.append({"variant": name, "error": repr(e)[:300]})
        model = optimizer = None
        torch.cuda.empty_cache()
    return {"layers": layers, "hidden": h, "heads": heads, "seq": seq,
            "vocab": vocab, "batch": batch, "variants": rows}


def conv_shapes(model, image=224):
    """The model's convolutions as (C, H, W, K, R, S, stride, pad,
    dilation, groups) -> calls per forward, from a forward of one image on
    the host (only the shapes matter)."""
    shapes = {}

    def hook(m, inputs, output):
        x = inputs[0]
        key = (x.shape[1], x.shape[2], x.shape[3], m.out_channels,
               m.kernel_size[0], m.kernel_size[1], m.stride[0], m.padding[0],
               m.dilation[0], m.groups)
        shapes[key] = shapes.get(key, 0) + 1
    hooks = [m.register_forward_hook(hook) for m in model.modules()
             if isinstance(m, torch.nn.Conv2d)]
    with torch.no_grad():
        model(torch.zeros(1, 3, image, image))
    for h in hooks:
        h.remove()
    return shapes


def time_conv(batch, shape, calls):
    """Forward, data-gradient and weight-gradient seconds of one channels-last
    bf16 convolution, each the median of event-timed runs of several calls
    over rotated inputs."""
    c, h, w, k, r, s_, stride, pad, dil, groups = shape
    cl = torch.channels_last
    p = (h + 2 * pad - dil * (r - 1) - 1) // stride + 1
    q = (w + 2 * pad - dil * (s_ - 1) - 1) // stride + 1
    flops = 2.0 * batch * k * p * q * (c // groups) * r * s_
    bf = torch.bfloat16
    nbytes = batch * c * h * w * 2
    copies = max(1, min(4, math.ceil(160e6 / nbytes)))
    xs = [torch.randn(batch, c, h, w, device=DEV, dtype=bf).to(memory_format=cl)
          for _ in range(copies)]
    wt = torch.randn(k, c // groups, r, s_, device=DEV, dtype=bf).to(
        memory_format=cl)
    dy = torch.randn(batch, k, p, q, device=DEV, dtype=bf).to(memory_format=cl)
    kw = dict(stride=stride, padding=pad, dilation=dil, groups=groups)
    runs = {
        "forward": lambda i: F.conv2d(xs[i % copies], wt, **kw),
        "data_grad": lambda i: torch.nn.grad.conv2d_input(
            xs[0].shape, wt, dy, **kw),
        "weight_grad": lambda i: torch.nn.grad.conv2d_weight(
            xs[i % copies], wt.shape, dy, **kw),
    }
    row = {"batch": batch, "c": c, "h": h, "w": w, "k": k, "r": r, "s": s_,
           "stride": stride, "pad": pad, "dilation": dil, "groups": groups,
           "calls_per_step": calls, "flops": flops}
    for name, fn in runs.items():
        launches = 4
        t = event_time(lambda: [fn(i) for i in range(launches)]) / launches
        row[name + "_s"] = t
        row[name + "_tflops"] = flops / t / 1e12
    del xs, wt, dy
    return row


def section_conv(quick):
    import torchvision
    torch.backends.cudnn.benchmark = True
    models = {"resnet50": torchvision.models.resnet50(),
              "vgg16": torchvision.models.vgg16()}
    batches = [32] if quick else [32, 256]
    rows = []
    for name, model in models.items():
        shapes = conv_shapes(model)
        for batch in batches:
            for shape, calls in sorted(shapes.items()):
                row = time_conv(batch, shape, calls)
                row["model"] = name
                rows.append(row)
                log("conv %s b%d %s: fwd %.3f ms (%.0f TFLOP/s)" % (
                    name, batch, shape, row["forward_s"] * 1e3,
                    row["forward_tflops"]))
    # ResNet-50's batch norms (training, forward + backward) and pools.
    norms = []
    bn_shapes = sorted({(k, (h + 2 * pad - r) // st + 1)
                        for (c, h, w, k, r, s_, st, pad, d, g)
                        in conv_shapes(models["resnet50"])})
    for batch in batches:
        for channels, size in bn_shapes:
            x = torch.randn(batch, channels, size, size, device=DEV,
                            dtype=torch.bfloat16).to(
                memory_format=torch.channels_last).requires_grad_()
            bn = torch.nn.BatchNorm2d(channels).to(DEV)
            dy = torch.randn_like(x)

            def fb():
                with torch.autocast("cuda", dtype=torch.bfloat16):
                    y = bn(x)
                y.backward(dy)
            t = event_time(fb)
            norms.append({"batch": batch, "channels": channels,
                          "size": size, "forward_backward_s": t,
                          "bytes": 5 * x.numel() * 2})
        x = torch.randn(batch, 64, 112, 112, device=DEV,
                        dtype=torch.bfloat16).to(
            memory_format=torch.channels_last).requires_grad_()
        y = F.max_pool2d(x, 3, 2, 1)
        dy = torch.randn_like(y)
        norms.append({"batch": batch, "pool": "max_pool2d 3x3/2",
                      "forward_s": event_time(lambda: F.max_pool2d(x, 3, 2, 1)),
                      "forward_backward_s": event_time(
                          lambda: torch.autograd.grad(
                              F.max_pool2d(x, 3, 2, 1), x, dy))})
    return {"cudnn_benchmark": True, "layout": "channels_last",
            "dtype": "bfloat16", "convolutions": rows, "norms_and_pools": norms}


def section_resnet_step(batches):
    """torchvision's ResNet-50 step, images 224x224, 1000 classes, Adam."""
    import torchvision
    rows = []
    for i, batch in enumerate(batches):
        images = torch.randn(batch, 3, 224, 224, device=DEV)
        labels = torch.randint(0, 1000, (batch,), device=DEV)
        variants = ["autocast-channels-last", "bf16-channels-last"]
        if i == 0:
            variants.append("compile-autocast-channels-last")
        for name in variants:
            torch.manual_seed(0)
            try:
                model = torchvision.models.resnet50().to(DEV).to(
                    memory_format=torch.channels_last)
                x = images.to(memory_format=torch.channels_last)
                autocast = name != "bf16-channels-last"
                if not autocast:
                    model = model.to(torch.bfloat16)
                    x = x.to(torch.bfloat16)
                optimizer = torch.optim.Adam(model.parameters(), lr=1e-4,
                                             fused=autocast)
                if name.startswith("compile"):
                    model = torch.compile(model)

                def step():
                    with torch.autocast("cuda", dtype=torch.bfloat16,
                                        enabled=autocast):
                        loss = F.cross_entropy(model(x), labels)
                    loss.backward()
                    optimizer.step()
                    optimizer.zero_grad(set_to_none=True)
                seconds = event_time(step, reps=10, warm=3)
                rows.append({"variant": name, "batch": batch,
                             "step_s": seconds,
                             "images_per_s": batch / seconds})
                log("resnet50 b%d %s: %.1f ms" % (batch, name, seconds * 1e3))
            except Exception as e:  # the others still count
                rows.append({"variant": name, "batch": batch,
                             "error": repr(e)[:300]})
            model = optimizer = None
            torch.cuda.empty_cache()
    return {"model": "torchvision resnet50", "image": 224, "classes": 1000,
            "variants": rows}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--sections",
                    default="launch,stream,attention,loss,gemm,gpt")
    ap.add_argument("--step-shape", default="12,768,12,1024,50304,8",
                    help="step section: layers,hidden,heads,seq,vocab,batch")
    ap.add_argument("--resnet-batches", default="32,256",
                    help="resnet_step section: batch sizes")
    ap.add_argument("--attention-shape",
                    help="attention section: batch,heads,seq,head_dim alone")
    a = ap.parse_args()
    if not torch.cuda.is_available():
        sys.exit("gpu_microbench: no CUDA device visible to PyTorch")
    torch.backends.cuda.matmul.allow_tf32 = False
    p = torch.cuda.get_device_properties(0)
    result = {"device": p.name, "multiprocessors": p.multi_processor_count,
              "memory_bytes": p.total_memory, "torch": torch.__version__,
              "cuda": torch.version.cuda,
              "cudnn": torch.backends.cudnn.version(),
              "date": time.strftime("%Y-%m-%d")}
    for name in a.sections.split(","):
        t0 = time.time()
        try:
            args = ([a.quick, tuple(int(v) for v in a.attention_shape.split(","))
                     if a.attention_shape else None]
                    if name == "attention"
                    else [a.quick]
                    if name in ("gemm", "stream", "gpt", "conv")
                    else [tuple(int(v) for v in a.step_shape.split(","))]
                    if name == "step"
                    else [[int(v) for v in a.resnet_batches.split(",")]]
                    if name == "resnet_step" else [])
            result[name] = globals()["section_" + name](*args)
        except Exception as e:  # keep what the other sections measured
            result[name] = {"error": repr(e)[:500]}
        log("%s: %.1f s" % (name, time.time() - t0))
        with open(a.out, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
