#!/usr/bin/env python3
"""NumPy's view of the files tests/test_npy.c writes with npy_write.

    python3 tests/npy_numpy_check.py FILE.npy ...     (needs numpy)

Each file name says what it must hold; the values follow the rule of
tools/make_npy_fixtures.py, arange(shape) = np.arange(n).reshape(shape) * 0.5 - 3:

    a_6.npy, a_2_3_4_5.npy   arange of the shape in the name
    permuted.npy             arange((2, 3, 4)).transpose(2, 0, 1)
    specials.npy             [0, -0, 5e-324, 1e308, max, inf, -inf, nan]

For each: np.load must give float64 in C order with exactly these values
(signs of zero included, NaN as NaN), and the file must be byte for byte
what np.save writes for the same array.  Exit status 0 when all agree.
"""
import io
import os
import sys

import numpy as np


def arange(shape):
    n = int(np.prod(shape))
    return np.arange(n).reshape(shape) * 0.5 - 3


def expected(name):
    stem = os.path.basename(name)[:-4]
    if stem.startswith("a_"):
        return arange(tuple(int(d) for d in stem[2:].split("_")))
    if stem == "permuted":
        return arange((2, 3, 4)).transpose(2, 0, 1)
    if stem == "specials":
        return np.array([0.0, -0.0, 5e-324, 1e308, np.finfo(np.float64).max,
                         np.inf, -np.inf, np.nan])
    raise SystemExit(f"{name}: no expectation for this name")


def check(name):
    want = expected(name)
    got = np.load(name)
    problems = []
    if got.dtype != np.float64:
        problems.append(f"dtype {got.dtype}, expected float64")
    if got.shape != want.shape:
        problems.append(f"shape {got.shape}, expected {want.shape}")
    elif not np.array_equal(got, want, equal_nan=True) or \
            not np.array_equal(np.signbit(got), np.signbit(want)):
        problems.append(f"values {got.ravel()}, expected {want.ravel()}")
    saved = io.BytesIO()
    np.save(saved, np.ascontiguousarray(want))
    with open(name, "rb") as f:
        if f.read() != saved.getvalue():
            problems.append("bytes differ from what np.save writes")
    for p in problems:
        print(f"{name}: {p}", file=sys.stderr)
    return not problems


def main():
    ok = all([check(name) for name in sys.argv[1:]])
    sys.exit(0 if ok and len(sys.argv) > 1 else 1)


if __name__ == "__main__":
    main()
