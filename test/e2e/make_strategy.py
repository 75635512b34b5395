#!/usr/bin/env python3
"""Derive the e2e tests' strategies from a data-parallel strategy file.

Reads a strategy file written by --ppc-export-strategy (every op with its
iteration dims, their kinds and splittability) and writes one of:
  dp       the input as it is (data parallel);
  tensor   each op splits its first splittable parameter dim (output
           channels, hidden units) over the devices, else its first
           splittable reduction dim (row parallel), else runs whole on
           device 0;
  spatial  each op splits its first splittable attribute dim (height,
           sequence), else its sample dim;
  mixed    op i is data parallel, tensor parallel or whole on device
           i mod N, in turn, so that every kind of resharding appears;
  replicated
           op i is tensor parallel (as `tensor`) when i is even, else data
           parallel over N/2 devices with each half replicated twice (N
           even, sample dim allowing), else whole on every device
           (replicas N): replicated producers and consumers meet every
           other kind;
  zero1, zero2, zero3
           data parallel with the training state of every weight sharded
           over the ranks as ZeRO's stage 1 (optimizer state), 2 (and
           gradients) or 3 (and the weights: FSDP);
  recompute
           `mixed` with every op recomputed in backward but batch norms
           (their forward updates running statistics);
  scatter  ops with a parameter dim (linears, convolutions, matmuls) split
           their first splittable reduction dim and reduce-scatter the
           partial sums along result dim 0 (the batch); the others split
           as `spatial`, so the pieces meet consumers split along the
           batch, the sequence or the image height.
  key-blocks
           attention ops split their keys (T) in 2 and, on 4 or more
           devices, their query rows (S) over the rest (the log-sum-exp
           merge of key blocks); the others split as `spatial`.
  expert, expert-data, expert-tensor
           mixture of experts: the ops on the experts' slots (every op
           between a ppc.moe_dispatch and its ppc.moe_combine, whose dim 0
           is the experts) split it over the devices (expert parallel:
           the dispatch's pieces, split by samples, reach them by
           all-to-all), or over half of them and their sample dim
           (expert-data) or first parameter dim (expert-tensor) over two;
           the rest data parallel, but under expert-tensor the dispatch
           splits its experts and the combine its positions.
  ppS-SCHEDULE, ppS-tp-SCHEDULE, ppPxV-[tp-]interleaved-1f1b
           a pipeline of S stages (ops cut into S runs of equal length, in
           order) on N/S devices each, 4 micro-batches (--microbatches),
           SCHEDULE gpipe or 1f1b; or P x V stages dealt round-robin to P
           groups of N/P devices, interleaved; inside a stage data
           parallel, or with -tp tensor parallel (as `tensor`) over the
           stage's devices.
  ppA+B+...[-tp]-SCHEDULE
           a pipeline of unequal submeshes (as the stage DP finds): stage s
           on the next N_s devices (e.g. pp1+1+2-1f1b on 4 devices).
"""
import argparse
import json
import re
import sys

PIPELINE = re.compile(r"pp(\d+)(?:x(\d+))?(-tp)?-(gpipe|1f1b|interleaved-1f1b)$")
UNEQUAL = re.compile(r"pp(\d+(?:\+\d+)+)(-tp)?-(gpipe|1f1b)$")


def split_first(op, kinds, devices):
    """Degrees splitting the first splittable dim of one of `kinds`."""
    for kind in kinds:
        for d, dim in enumerate(op["dims"]):
            if (dim["kind"] == kind and dim.get("splittable", True)
                    and dim["size"] % devices == 0):
                degrees = [1] * len(op["dims"])
                degrees[d] = devices
                return degrees
    return None


def configure(op, kind, devices, index):
    whole = [1] * len(op["dims"])
    if kind in ("dp", "zero1", "zero2", "zero3"):
        return op["degrees"], op["start"]
    if kind == "tensor":
        return split_first(op, ["parameter", "reduction"], devices) or whole, 0
    if kind == "spatial":
        return split_first(op, ["attribute", "sample"], devices) or whole, 0
    if kind in ("mixed", "recompute"):
        turn = index % 3
        if turn == 0:
            return split_first(op, ["sample"], devices) or whole, 0
        if turn == 1:
            return split_first(op, ["parameter", "reduction"], devices) or whole, 0
        return whole, index % devices
    if kind == "replicated":
        if index % 2 == 0:
            return split_first(op, ["parameter", "reduction"], devices) or whole, 0
        half = devices // 2
        degrees = split_first(op, ["sample"], half) if half > 1 else None
        if degrees:
            return degrees, 0, devices // half
        return whole, 0, devices
    if kind == "scatter":
        kinds = [dim["kind"] for dim in op["dims"]]
        if "parameter" in kinds and kinds[0] == "sample":
            degrees = split_first(op, ["reduction"], devices)
            if degrees:
                return degrees, 0, 1, 0
        return split_first(op, ["attribute", "sample"], devices) or whole, 0
    if kind == "key-blocks":
        if op["kind"] == "ppc.attention":
            # dims: leading..., S, T, D, Dv
            degrees = [1] * len(op["dims"])
            s, t = len(op["dims"]) - 4, len(op["dims"]) - 3
            degrees[t] = 2
            degrees[s] = devices // 2
            return degrees, 0
        return split_first(op, ["attribute", "sample"], devices) or whole, 0
    if kind.startswith("expert"):
        return expert_config(op, kind, devices)
    sys.exit(f"make_strategy.py: unknown kind '{kind}'")


def expert_config(op, kind, devices):
    """`kind` expert*: op["on_experts"] marks the ops on the slots."""
    half = devices // 2 if kind != "expert" else devices
    if op["kind"] == "ppc.moe_dispatch" and kind == "expert-tensor":
        return split_first(op, ["parameter"], devices), 0  # its experts
    if op["kind"] == "ppc.moe_combine" and kind == "expert-tensor":
        return split_first(op, ["attribute"], devices), 0  # its positions
    if not op.get("on_experts"):
        return op["degrees"], op["start"]
    degrees = [1] * len(op["dims"])
    degrees[0] = half
    if kind != "expert":
        other = split_first(op, ["sample"] if kind == "expert-data"
                            else ["parameter"], 2) or [1] * len(degrees)
        degrees = [a * b for a, b in zip(degrees, other)]
    return degrees, 0


def mark_expert_ops(strategy):
    """Marks the ops between each dispatch and its combine (in op order)."""
    inside = False
    for op in strategy["ops"]:
        if op["kind"] == "ppc.moe_combine":
            inside = False
        op["on_experts"] = inside and op["kind"] != "ppc.weight"
        if op["kind"] == "ppc.moe_dispatch":
            inside = True


def pipeline(strategy, groups, chunks, tensor, schedule, microbatches):
    """Cuts the ops into groups x chunks runs, stage s on group s mod
    groups, and configures each on its devices."""
    devices = strategy["machine"]["devices"]
    if devices % groups:
        sys.exit(f"make_strategy.py: {devices} devices do not make {groups} "
                 "equal groups")
    per_group = devices // groups
    stages = groups * chunks
    place_stages(strategy, [((s % groups) * per_group, per_group)
                            for s in range(stages)],
                 tensor, schedule, microbatches)


def place_stages(strategy, blocks, tensor, schedule, microbatches):
    """Cuts the ops into len(blocks) runs of equal length, stage s on
    devices blocks[s] = (first, count), and configures each there."""
    ops = strategy["ops"]
    for index, op in enumerate(ops):
        stage = index * len(blocks) // len(ops)
        first, count = blocks[stage]
        kinds = ["parameter", "reduction"] if tensor else ["sample"]
        whole = [1] * len(op["dims"])
        op["degrees"] = (split_first(op, kinds, count) or whole
                         if count > 1 else whole)
        op["start"] = first
        op["stage"] = stage
        op["replicas"] = 1
    strategy["pipeline"] = {
        "microbatches": microbatches, "schedule": schedule,
        "stages": [{"first_device": first, "devices": count}
                   for first, count in blocks]}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    kinds = ["dp", "tensor", "spatial", "mixed", "replicated", "zero1",
             "zero2", "zero3", "recompute", "scatter", "key-blocks",
             "expert", "expert-data", "expert-tensor"]
    parser.add_argument("--kind", required=True,
                        help=", ".join(kinds) + ", ppS[-tp]-SCHEDULE or "
                        "ppA+B+...[-tp]-SCHEDULE")
    parser.add_argument("--microbatches", type=int, default=4,
                        help="micro-batches of a pipeline (4)")
    parser.add_argument("input")
    parser.add_argument("output")
    args = parser.parse_args()
    with open(args.input) as f:
        strategy = json.load(f)
    devices = strategy["machine"]["devices"]
    piped = PIPELINE.match(args.kind)
    unequal = UNEQUAL.match(args.kind)
    if unequal:
        sizes = [int(n) for n in unequal.group(1).split("+")]
        if sum(sizes) != devices:
            sys.exit(f"make_strategy.py: {args.kind}: the stages' devices "
                     f"add up to {sum(sizes)}, not {devices}")
        firsts = [sum(sizes[:s]) for s in range(len(sizes))]
        place_stages(strategy, list(zip(firsts, sizes)),
                     bool(unequal.group(2)), unequal.group(3),
                     args.microbatches)
        piped = unequal
    elif not piped and args.kind not in kinds:
        sys.exit(f"make_strategy.py: unknown kind '{args.kind}'")
    if args.kind.startswith("expert"):
        mark_expert_ops(strategy)
    for index, op in enumerate(strategy["ops"]):
        if piped:
            break
        config = configure(op, args.kind, devices, index)
        op["degrees"], op["start"] = config[0], config[1]
        op["replicas"] = config[2] if len(config) > 2 else 1
        if len(config) > 3:
            op["scatter"] = config[3]
        if args.kind.startswith("zero"):
            op["zero"] = int(args.kind[-1])
        if args.kind == "recompute" and op["kind"] != "ppc.batch_norm":
            op["recompute"] = True
    if piped and not unequal:
        pipeline(strategy, int(piped.group(1)), int(piped.group(2) or 1),
                 bool(piped.group(3)), piped.group(4), args.microbatches)
    for op in strategy["ops"]:
        op["strides"] = []
        op.pop("devices", None)
        op.pop("on_experts", None)
        op.pop("predicted_ms", None)
    strategy.pop("prediction", None)
    with open(args.output, "w") as f:
        json.dump(strategy, f, indent=1)


if __name__ == "__main__":
    main()
