#!/usr/bin/env python3
"""Write the NumPy-made .npy fixtures of tests/test_npy.c.

    python3 tools/make_npy_fixtures.py     (needs numpy; run from anywhere)

The files land in tests/fixtures/npy/ and are committed, so the tests need
no Python.  Their values follow rules the C tests can recompute:

    arange(shape)  np.arange(n).reshape(shape) * 0.5 - 3   (exact in float32 too)

Files npy_read must accept:
    f8_1d f8_2d f8_3d f8_4d  float64 arange of (6,), (2, 3), (2, 3, 4), (2, 1, 3, 2)
    f4_3d                    float32 arange of (2, 3, 4): widening is exact
    f4_inexact               float32 [0.1, -2.5, 1/3, 2**-149, inf]: 0.1 and 1/3
                             are not floats, so C compares with (double)0.1f ...
    i8_1d i4_1d              valid_lens [3, 2] as int64 / int32, shape (2,)
    i8_2d i4_2d              valid_lens [[1, 2, 3, 4], [2, 2, 3, 3]], shape (2, 4)
    i8_edges                 [-7, 0, 2**53, 2**62, -2**63]: every one a double
    i4_edges                 [-2**31, 2**31 - 1, -1]
    v2_2d v3_2d              float64 arange (2, 3), format versions 2.0 and 3.0

Files npy_read must reject, each for one reason:
    i8_inexact               [1, 2**53 + 1]: the second is not a double
    fortran_2d               fortran_order True
    big_endian               descr '>f8'
    complex128 bool uint8 float16 object structured   other dtypes
    scalar_0d five_d empty   shapes (), (1, 1, 1, 1, 2) and (2, 0)

State dicts (.npz) for mha forward --state-dict (tests/test_cli_torch.c):
    state_dict               numpy.savez_compressed of in_proj_weight
                             arange((12, 4)) / 8, in_proj_bias arange((12,)) / 8,
                             out_proj.weight arange((4, 4)) / 8,
                             out_proj.bias arange((4,)) / 8: every member deflated
    state_dict_twice         the same members, in_proj_weight.npy listed twice
                             (the second its negation)
"""
import io
import os
import warnings
import zipfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "tests", "fixtures", "npy")


def arange(shape, dtype=np.float64):
    n = int(np.prod(shape))
    return (np.arange(n).reshape(shape) * 0.5 - 3).astype(dtype)


def save(name, array, version=None):
    path = os.path.join(OUT, name + ".npy")
    if version is None:
        np.save(path, array)
    else:
        with open(path, "wb") as f:
            np.lib.format.write_array(f, array, version=version)


def main():
    os.makedirs(OUT, exist_ok=True)

    # accepted
    save("f8_1d", arange((6,)))
    save("f8_2d", arange((2, 3)))
    save("f8_3d", arange((2, 3, 4)))
    save("f8_4d", arange((2, 1, 3, 2)))
    save("f4_3d", arange((2, 3, 4), np.float32))
    save("f4_inexact", np.array([0.1, -2.5, 1 / 3, 2.0**-149, np.inf],
                                dtype=np.float32))
    save("i8_1d", np.array([3, 2], dtype=np.int64))
    save("i4_1d", np.array([3, 2], dtype=np.int32))
    save("i8_2d", np.array([[1, 2, 3, 4], [2, 2, 3, 3]], dtype=np.int64))
    save("i4_2d", np.array([[1, 2, 3, 4], [2, 2, 3, 3]], dtype=np.int32))
    save("i8_edges", np.array([-7, 0, 2**53, 2**62, -2**63], dtype=np.int64))
    save("i4_edges", np.array([-2**31, 2**31 - 1, -1], dtype=np.int32))
    save("v2_2d", arange((2, 3)), version=(2, 0))
    save("v3_2d", arange((2, 3)), version=(3, 0))

    # rejected
    save("i8_inexact", np.array([1, 2**53 + 1], dtype=np.int64))
    save("fortran_2d", np.asfortranarray(arange((2, 3))))
    save("big_endian", arange((2, 3)).astype(">f8"))
    save("complex128", np.array([1 + 2j, 3 - 4j]))
    save("bool", np.array([True, False]))
    save("uint8", np.array([1, 2, 3], dtype=np.uint8))
    save("float16", np.array([1, 2], dtype=np.float16))
    save("object", np.array([1, "a"], dtype=object))
    save("structured", np.zeros(2, dtype=[("a", "<f8"), ("b", "<i4")]))
    save("scalar_0d", np.array(1.5))
    save("five_d", np.zeros((1, 1, 1, 1, 2)))
    save("empty", np.zeros((2, 0)))

    # state dicts
    sd = {"in_proj_weight": arange((12, 4)) / 8,
          "in_proj_bias": arange((12,)) / 8,
          "out_proj.weight": arange((4, 4)) / 8,
          "out_proj.bias": arange((4,)) / 8}
    np.savez_compressed(os.path.join(OUT, "state_dict.npz"), **sd)
    with zipfile.ZipFile(os.path.join(OUT, "state_dict_twice.npz"), "w",
                         zipfile.ZIP_DEFLATED) as z:
        for name, a in list(sd.items()) + [("in_proj_weight",
                                            -sd["in_proj_weight"])]:
            b = io.BytesIO()
            np.save(b, a)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # "Duplicate name"
                z.writestr(name + ".npy", b.getvalue())


if __name__ == "__main__":
    main()
