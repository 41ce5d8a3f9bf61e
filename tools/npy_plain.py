"""tools/npy_plain.py: float64 .npy files written and read by hand, with
no numpy, for the checks that run mha on files of their own
(tools/test-view.py, tools/test-handout.sh)."""
import re
import struct


def npy_write(path, shape, values):
    header = "{'descr': '<f8', 'fortran_order': False, 'shape': (%s), }" % (
        ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else ""))
    pad = 64 - (10 + len(header) + 1) % 64
    header += " " * pad + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)))
        f.write(header.encode("latin1"))
        f.write(struct.pack("<%dd" % len(values), *values))


def npy_read(path):
    with open(path, "rb") as f:
        data = f.read()
    assert data[:6] == b"\x93NUMPY"
    hlen = struct.unpack("<H", data[8:10])[0] if data[6] == 1 else \
        struct.unpack("<I", data[8:12])[0]
    start = (10 if data[6] == 1 else 12) + hlen
    header = data[start - hlen:start].decode("latin1")
    assert "'<f8'" in header and "False" in header, header
    shape = tuple(int(d) for d in re.search(r"\(([^)]*)\)", header).group(1)
                  .split(",") if d.strip())
    n = 1
    for d in shape:
        n *= d
    return shape, struct.unpack("<%dd" % n, data[start:start + 8 * n])
