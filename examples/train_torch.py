"""A PyTorch model from nn.Module to trained weights with ppc, in one Python
script and no shell: ppc.parallelize searches a strategy for two CPU
processes and writes the plan, ppc.train runs it under mpirun on real
arrays and loads the trained weights back into the module, and PyTorch
checks that its own loss on the data fell.

    PYTHONPATH=build/python /usr/bin/python3 examples/train_torch.py
"""

import sys

import numpy

try:
    import torch
except ImportError:
    print("skipped: no PyTorch (Debian: python3-torch)")
    sys.exit(77)

import ppc


def main():
    torch.manual_seed(0)
    rng = numpy.random.default_rng(0)
    # Two classes of points either side of a random hyperplane.
    records, features = 512, 20
    x = rng.standard_normal((records, features)).astype(numpy.float32)
    labels = (x @ rng.standard_normal(features) > 0).astype(numpy.int64)

    model = torch.nn.Sequential(torch.nn.Linear(features, 64), torch.nn.ReLU(),
                                torch.nn.Linear(64, 2))
    loss_fn = torch.nn.CrossEntropyLoss()

    def pytorch_loss():
        with torch.no_grad():
            return float(loss_fn(model(torch.from_numpy(x)),
                                 torch.from_numpy(labels)))

    before = pytorch_loss()
    found = ppc.parallelize(model, torch.randn(32, features),
                            machine="cpux2", budget=200, threads=1,
                            optimizer="adam", lr=0.01)
    print(f"strategy: {found.predicted_time_s * 1e3:.3f} ms a step predicted "
          f"on {found.machine}; report in {found.report_dir}")
    # The plan's inputs: the model's (input0, as parallelize exports it) and
    # the loss's labels.
    run = ppc.train(found, data={"input0": x, "labels": labels}, steps=100,
                    module=model)
    after = pytorch_loss()
    print(f"ppc-run loss {run.losses[0]:.4f} -> {run.losses[-1]:.4f}; "
          f"PyTorch's loss on the data with the trained weights "
          f"{before:.4f} -> {after:.4f}")
    if not after < 0.5 * before:
        print("FAILED: the loss did not fall", file=sys.stderr)
        return 1
    print("trained")
    return 0


if __name__ == "__main__":
    sys.exit(main())
