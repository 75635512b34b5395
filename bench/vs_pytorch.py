#!/usr/bin/python3
"""ppc-run against PyTorch on this host: the same models, batch and optimizer.

    /usr/bin/python3 bench/vs_pytorch.py [BUILD_DIR]
        [--models cnn,mlp,mobilenet_v2,resnet50,gpt] [--ranks 1,2]
        [--steps 20] [--strategy data-parallel] [--dtype f32|bf16]

Each model is built in PyTorch (random initialization, fixed seed) and
exported to ONNX with its batch norms kept, so both sides train the same
layers (batch norms with batch statistics on both). For each rank count,
one after the other (never at once):
  - PyTorch 1.13 (Debian's python3-torch): one process per rank with one
    thread (torch.set_num_threads(1) and OPENBLAS_NUM_THREADS=1: Debian's
    torch calls the system OpenBLAS, which otherwise takes every core
    whatever set_num_threads says), DistributedDataParallel over gloo
    (ranks > 1), Adam,
    softmax cross-entropy, the global batch split over the ranks;
  - ppc: ppc-opt --ppc-auto-parallel (machine cpuxR, --strategy, Adam,
    the same loss) and `mpirun -np R ppc-run` with one OpenBLAS thread per
    rank.
With --dtype bf16 both sides train in mixed precision: ppc-opt's dtype=bf16
(bf16 activations, weights and gradients, float32 master weights and
optimizer state) and PyTorch's CPU autocast to bfloat16 around the forward
and the loss (float32 parameters, gradients and optimizer).
Prints the median step time (the first 3 steps excluded; the slowest rank
of each step), the ratio ppc / PyTorch (below 1: ppc is faster) and the
peak resident memory per rank (the largest rank's).
"""

import argparse
import warnings
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time

import torch
import torch.nn as nn

MODELS = {
    # name: (global batch, what the row is)
    "cnn": (16, "examples/cnn.onnx's layers, 32x32"),
    "mlp": (64, "MLP 1024-4096-4096-1024-10, 100 MB of weights"),
    "mobilenet_v2": (8, "torchvision MobileNetV2, 64x64"),
    "resnet50": (4, "torchvision ResNet-50, 64x64"),
    "gpt": (8, "GPT, 2 layers, hidden 256, 4 heads, seq 64, vocab 2000"),
}
WARMUP = 3


class Gpt(nn.Module):
    """A small causal GPT of plain layers (pre-norm, GELU, untied head)."""

    def __init__(self, vocab=2000, seq=64, hidden=256, heads=4, layers=2):
        super().__init__()
        self.heads = heads
        self.tokens = nn.Embedding(vocab, hidden)
        self.positions = nn.Parameter(torch.randn(1, seq, hidden) * 0.02)
        self.blocks = nn.ModuleList()
        for _ in range(layers):
            self.blocks.append(nn.ModuleDict({
                "ln1": nn.LayerNorm(hidden), "qkv": nn.Linear(hidden, 3 * hidden),
                "out": nn.Linear(hidden, hidden), "ln2": nn.LayerNorm(hidden),
                "ff1": nn.Linear(hidden, 4 * hidden),
                "ff2": nn.Linear(4 * hidden, hidden)}))
        self.ln = nn.LayerNorm(hidden)
        self.head = nn.Linear(hidden, vocab)
        mask = torch.full((seq, seq), -1e9).triu(1)
        self.register_buffer("mask", mask)

    def forward(self, tokens):
        b, s = tokens.shape
        x = self.tokens(tokens) + self.positions
        h, d = self.heads, x.shape[-1] // self.heads
        for blk in self.blocks:
            q, k, v = blk["qkv"](blk["ln1"](x)).split(x.shape[-1], dim=-1)
            q, k, v = (t.reshape(b, s, h, d).transpose(1, 2) for t in (q, k, v))
            att = torch.softmax(q @ k.transpose(-1, -2) / d ** 0.5 + self.mask,
                                dim=-1)
            x = x + blk["out"]((att @ v).transpose(1, 2).reshape(b, s, h * d))
            x = x + blk["ff2"](torch.nn.functional.gelu(blk["ff1"](blk["ln2"](x))))
        return self.head(self.ln(x))


def build(name):
    """(module, example input, classes) of a model, seeded."""
    torch.manual_seed(0)
    import torchvision
    if name == "cnn":
        model = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
            nn.MaxPool2d(2), nn.Conv2d(16, 32, 3, padding=1),
            nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(32, 32, 3, padding=1, groups=4), nn.ReLU(),
            nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, 10))
        return model, torch.randn(1, 3, 32, 32), 10
    if name == "mlp":
        model = nn.Sequential(
            nn.Linear(1024, 4096), nn.ReLU(), nn.Linear(4096, 4096), nn.ReLU(),
            nn.Linear(4096, 1024), nn.ReLU(), nn.Linear(1024, 10))
        return model, torch.randn(1, 1024), 10
    if name == "mobilenet_v2":
        return torchvision.models.mobilenet_v2(), torch.randn(1, 3, 64, 64), 1000
    if name == "resnet50":
        return torchvision.models.resnet50(), torch.randn(1, 3, 64, 64), 1000
    if name == "gpt":
        return Gpt(), torch.randint(0, 2000, (1, 64)), 2000
    raise SystemExit("unknown model " + name)


def batch_of(name, example, classes, rows):
    """A random batch of `rows` and its labels."""
    g = torch.Generator().manual_seed(1)
    if example.dtype == torch.int64:
        x = torch.randint(0, classes, (rows,) + tuple(example.shape[1:]),
                          generator=g)
        return x, torch.randint(0, classes, (rows,) + tuple(example.shape[1:]),
                                generator=g)
    x = torch.randn((rows,) + tuple(example.shape[1:]), generator=g)
    return x, torch.randint(0, classes, (rows,), generator=g)


def peak_resident_bytes():
    """VmHWM: ru_maxrss would keep the high-water mark of the process that
    forked this one (this script, after building ResNet-50)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return float(line.split()[1]) * 1024.0
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024.0


def torch_worker(name, rank, ranks, steps, port, out, dtype):
    torch.set_num_threads(1)
    if ranks > 1:
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        torch.distributed.init_process_group("gloo", rank=rank,
                                             world_size=ranks)
    model, example, classes = build(name)
    model.train()
    if ranks > 1:
        model = nn.parallel.DistributedDataParallel(model)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    x, y = batch_of(name, example, classes, MODELS[name][0] // ranks)
    loss_fn = nn.CrossEntropyLoss()
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16,
                            enabled=dtype == "bf16"):
            logits = model(x)
            loss = loss_fn(logits.reshape(-1, classes), y.reshape(-1))
        loss.backward()
        optimizer.step()
        times.append(time.perf_counter() - start)
    rss = peak_resident_bytes()
    if ranks > 1:
        t = torch.tensor(times + [rss], dtype=torch.float64)
        torch.distributed.all_reduce(t, op=torch.distributed.ReduceOp.MAX)
        times, rss = t[:-1].tolist(), t[-1].item()
        torch.distributed.destroy_process_group()
    if rank == 0:
        with open(out, "w") as f:
            json.dump({"ms": statistics.median(times[WARMUP:]) * 1e3,
                       "mib": rss / 2**20}, f)


def run_torch(name, ranks, steps, work, dtype):
    out = os.path.join(work, "torch-%s-%d.json" % (name, ranks))
    port = 29500 + os.getpid() % 1000
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1",
               MKL_NUM_THREADS="1")
    procs = [subprocess.Popen([sys.executable, __file__, "--worker", name,
                               str(rank), str(ranks), str(steps), str(port),
                               out, dtype], env=env)
             for rank in range(ranks)]
    if any([p.wait() != 0 for p in procs]):
        return None  # e.g. PyTorch 1.13 has no bf16 backward of hardtanh
    with open(out) as f:
        return json.load(f)


def run_ppc(build_dir, name, ranks, steps, strategy, work, dtype):
    model, example, _ = build(name)
    onnx_path = os.path.join(work, name + ".onnx")
    if not os.path.exists(onnx_path):
        model.eval()
        # PRESERVE keeps the batch norms (an eval-mode export folds them
        # into the convolutions: ppc would train fewer layers).
        torch.onnx.export(model, example, onnx_path, opset_version=17,
                          input_names=["input"], output_names=["output"],
                          dynamic_axes={"input": {0: "batch"},
                                        "output": {0: "batch"}},
                          training=torch.onnx.TrainingMode.PRESERVE)
    plan = os.path.join(work, "%s-%d-%s.pb" % (name, ranks, dtype))
    search = "search=" + strategy
    subprocess.run([os.path.join(build_dir, "bin", "ppc-opt"), onnx_path,
                    "--batch-size=%d" % MODELS[name][0],
                    "--ppc-auto-parallel=machine=cpux%d %s optimizer=adam "
                    "dtype=%s plan=%s" % (ranks, search, dtype, plan), "-o",
                    os.devnull],
                   check=True, stderr=subprocess.DEVNULL)
    log = os.path.join(work, "%s-%d.jsonl" % (name, ranks))
    command = ["mpirun", "-np", str(ranks), "--oversubscribe"]
    if os.getuid() == 0:
        command.append("--allow-run-as-root")
    command += [os.path.join(build_dir, "bin", "ppc-run"), plan, "--steps",
                str(steps), "--log", log]
    text = subprocess.run(command, check=True, capture_output=True,
                          text=True).stdout
    times = [json.loads(line)["time_ms"] for line in open(log)]
    mib = float(re.search(r"peak resident memory ([0-9.]+) MiB", text)[1])
    return {"ms": statistics.median(times[WARMUP:]), "mib": mib}


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        name, rank, ranks, steps, port, out, dtype = sys.argv[2:]
        torch_worker(name, int(rank), int(ranks), int(steps), int(port), out,
                     dtype)
        return
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    parser = argparse.ArgumentParser()
    parser.add_argument("build", nargs="?", default=os.path.join(root, "build"))
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--ranks", default="1,2")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--strategy", default="data-parallel",
                        help="ppc-opt's search= (data-parallel, mcmc, ...)")
    parser.add_argument("--dtype", default="f32", choices=["f32", "bf16"],
                        help="bf16: mixed precision on both sides")
    args = parser.parse_args()
    # torch.onnx warns about constant folding in PRESERVE mode; the models
    # are exported in eval mode, where folding touches no parameter.
    warnings.filterwarnings("ignore", category=UserWarning)
    print("| model | batch | ranks | ppc-run ms | PyTorch ms | ppc / PyTorch "
          "| ppc MiB per rank | PyTorch MiB per rank |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as work:
        for name in args.models.split(","):
            for ranks in map(int, args.ranks.split(",")):
                ppc = run_ppc(args.build, name, ranks, args.steps,
                              args.strategy, work, args.dtype)
                ref = run_torch(name, ranks, args.steps, work, args.dtype)
                if ref is None:
                    print("| %s (%s) | %d | %d | %.1f | PyTorch fails | | %.0f "
                          "| |" % (name, MODELS[name][1], MODELS[name][0],
                                   ranks, ppc["ms"], ppc["mib"]), flush=True)
                    continue
                print("| %s (%s) | %d | %d | %.1f | %.1f | %.2f | %.0f | %.0f |"
                      % (name, MODELS[name][1], MODELS[name][0], ranks,
                         ppc["ms"], ref["ms"], ppc["ms"] / ref["ms"],
                         ppc["mib"], ref["mib"]), flush=True)


if __name__ == "__main__":
    main()
