#!/usr/bin/env python3
"""Writes Fashion-MNIST as a ppc-run dataset directory (--data DIR).

Reads the IDX files of Debian's dataset-fashion-mnist package
(/usr/share/datasets/fashion-mnist) and writes, for the bundled models:

  --model mlp   DIR/x/NNN.npy       float32 [n, 784], pixels / 255
  --model cnn   DIR/image/NNN.npy   float32 [n, 3, 32, 32]: the 28x28 image
                                    padded by 2 with zeros, in all 3 channels
  both          DIR/labels/NNN.npy  int64 [n], classes 0-9

in shards of --shard records. Python's standard library only (no numpy).

    python3 examples/fashion_mnist.py --model mlp OUT_DIR
    python3 examples/fashion_mnist.py --model cnn --split test --limit 2000 DIR
"""

import argparse
import array
import gzip
import os
import struct
import sys

SOURCE = "/usr/share/datasets/fashion-mnist"


def read_idx(path):
    """(dims, bytes) of an IDX file of unsigned bytes, gzipped or not."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    if len(data) < 4 or data[0] != 0 or data[1] != 0 or data[2] != 0x08:
        sys.exit("%s: not an IDX file of unsigned bytes" % path)
    rank = data[3]
    dims = struct.unpack(">%dI" % rank, data[4:4 + 4 * rank])
    body = data[4 + 4 * rank:]
    count = 1
    for d in dims:
        count *= d
    if len(body) != count:
        sys.exit("%s: %d bytes of data for shape %s" % (path, len(body), dims))
    return dims, body


def write_npy(path, descr, shape, payload):
    """A .npy file (format 1.0) of C-order `payload` bytes."""
    dims = ", ".join("%d" % d for d in shape) + ("," if len(shape) == 1 else "")
    header = "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }" % (
        descr, dims)
    header += " " * ((64 - (10 + len(header) + 1) % 64) % 64) + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)))
        f.write(header.encode("latin1"))
        f.write(payload)


def image_record(pixels, model):
    """float32 values of one 28x28 image for the model's input."""
    if model == "mlp":
        return [p / 255.0 for p in pixels]
    padded = [0.0] * (32 * 32)
    for r in range(28):
        for c in range(28):
            padded[(r + 2) * 32 + c + 2] = pixels[r * 28 + c] / 255.0
    return padded * 3


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("out", help="the dataset directory to write")
    parser.add_argument("--model", choices=["mlp", "cnn"], default="mlp")
    parser.add_argument("--split", choices=["train", "test"], default="train")
    parser.add_argument("--source", default=SOURCE,
                        help="the IDX files' directory (%(default)s)")
    parser.add_argument("--limit", type=int, default=0,
                        help="the first N records only (0: all)")
    parser.add_argument("--shard", type=int, default=10000,
                        help="records per .npy file (%(default)s)")
    args = parser.parse_args()
    prefix = "train" if args.split == "train" else "t10k"
    images_path = os.path.join(args.source, prefix + "-images-idx3-ubyte.gz")
    labels_path = os.path.join(args.source, prefix + "-labels-idx1-ubyte.gz")
    for path in (images_path, labels_path):
        if not os.path.exists(path):
            sys.exit("%s is missing: apt-get install dataset-fashion-mnist, or "
                     "give --source" % path)
    (n, rows, cols), images = read_idx(images_path)
    (m,), labels = read_idx(labels_path)
    if (rows, cols) != (28, 28) or m != n:
        sys.exit("unexpected shapes: images %s, labels %d" % ((n, rows, cols), m))
    if args.limit > 0:
        n = min(n, args.limit)
    name = "x" if args.model == "mlp" else "image"
    shape = [784] if args.model == "mlp" else [3, 32, 32]
    for folder in (name, "labels"):
        os.makedirs(os.path.join(args.out, folder), exist_ok=True)
    for first in range(0, n, args.shard):
        count = min(args.shard, n - first)
        values = array.array("f")
        for i in range(first, first + count):
            values.extend(image_record(images[i * 784:(i + 1) * 784],
                                       args.model))
        classes = array.array("q", list(labels[first:first + count]))
        if sys.byteorder != "little":
            values.byteswap()
            classes.byteswap()
        shard = "%03d.npy" % (first // args.shard)
        write_npy(os.path.join(args.out, name, shard), "<f4", [count] + shape,
                  values.tobytes())
        write_npy(os.path.join(args.out, "labels", shard), "<i8", [count],
                  classes.tobytes())
    print("%s: %d %s records of %s as '%s' and 'labels'" %
          (args.out, n, args.split, args.model, name))


if __name__ == "__main__":
    main()
