#!/usr/bin/python3
"""tools/parity.py: build/mha forward against PyTorch, case by case.

    /usr/bin/python3 tools/parity.py [--mha build/mha] [--cases 60]
        [--gqa-cases 40] [--rope-cases 32] [--torch-cases 48]
        [--window-cases 40] [--seed S] [--quiet]
        [--grad build/mha-grad]

Draws random shapes and weights from a seed (drawn at random and printed
unless --seed replays a run), writes them as .npy
files in a temporary directory, runs `mha forward` on them, and compares
its OUT (B, Lq, D_out) and A (B, h, Lq, Lk) with
torch.nn.functional.multi_head_attention_forward in float64.  With
--grad build/mha-grad it also feeds a random dOUT backwards through the
C module and compares the gradients of the queries, keys, values and of
every weight and bias with torch's autograd on the same module written
out in torch operations (normwise over all of them, at most 1e-12).
OUT and A must agree to a normwise relative error of at most 1e-13:

    max |mha - torch| / max |torch|      (over all elements of OUT, and of A)

Then --rope-cases more cases (drawn from their own generator) run `mha
forward --rope`, half of them with a random --rope-base, against rotary
embeddings written as complex multiplications in torch (see the rope block
below); those must agree to 1e-12, and their gradients (with --grad) to
1e-12 too.

One line per case (with --quiet, only the failed ones), then the summary
`parity: N passed, M failed` as the last line; the exit status is 1 when
any case failed.

The cases cover B 1-4, Lq and Lk 1-40, h 1-8 heads of p 1-8 features
(D = h*p), query, key and value sizes Dq, Dk, Dv drawn independently, an
output size D_out that may differ from D, keys and values given or left
to default to the queries (self-attention), with and without biases, and
valid_lens absent, (B,) on the command line, (B,) in an int64 .npy file,
or (B, Lq) in an int64 or float64 .npy file.

Then --gqa-cases cases of grouped-query and causal attention (mha forward
--kv-heads G --causal): G a divisor of h drawn at random (G = h and G = 1
included), causal on in every other case with Lk >= Lq (a prompt
attending to its past), rotary embeddings (--rope) in every third,
valid_lens as above.  torch 1.13 has no
enable_gqa, so the reference is written out in torch operations,
independently of mha's folding: Q and K rotated as in the rope cases below
when the case has --rope, K and V split into G heads and copied
h/G times with repeat_interleave, one boolean mask (B, Lq, Lk) for
valid_lens and the causal rule (key j > query i + Lk - Lq), masked_fill
with -inf, softmax, the weighted values, W_o; the gradients are autograd's
on that code.

Then --torch-cases cases (48) of PyTorch's own options, `mha forward`
--attn-mask, --key-padding-mask, --in-proj-weight, --in-proj-bias,
--bias-k/--bias-v, --add-zero-attn, --average-attn-weights and
--state-dict, against F.multi_head_attention_forward itself: the index
cycles the projections (separate files, packed, a numpy.savez state
dict) and the attention mask (bool or float, (Lq, Lk) or (B*h, Lq, Lk),
or none); key padding (bool or float), valid_lens, --causal, grouped
key-value heads (separate projections only), biases, bias_kv, the zero
key and averaged weights are drawn.  Where torch 1.13 has no option of
its own the case is handed to it in the form it takes (see
torch_options_reference).  OUT and A must agree to 1e-12, relative and
absolute.  Every row keeps key 0 visible: torch gives NaN for a row with
none, which mha refuses.

Then --window-cases cases (40) of where a query may look, `mha forward`
--window, --keep-first, --alibi and --sinks in every combination, with
grouped key-value heads, valid_lens (raised where a window would leave a
row no key, which mha refuses), biases and self-attention drawn as in
the grouped-query cases, against torch_window: the module in torch
operations written from the papers (Mistral's window, StreamingLLM's
kept first keys, ALiBi's bias with BLOOM's get_slopes, gpt-oss's sink
logit appended to each row and dropped after the softmax).  OUT and A
must agree to 1e-12; the gradients are not compared there.

How the PyTorch side is set up, and why:

- Layout.  torch's functional form is sequence-first, (L, B, E); the
  inputs are transposed on the way in and the output on the way out.
  need_weights=True with average_attn_weights=False gives the per-head
  weights (B, h, Lq, Lk).  use_separate_proj_weight=True passes W_q, W_k,
  W_v as three matrices in the same (D, D_in) layout mha reads.

- Query size.  torch requires the query size to equal the embedding size
  (W_q must be (E, E)), while mha allows any Dq.  The script embeds the
  problem exactly: with E = h*p' for p' = p*k^2 (k the smallest power of
  two with E >= Dq; k = 1 whenever Dq <= D), queries are padded with zero
  features to E, and each head's p rows of W_q, W_k, W_v and of the biases
  go to the first p of that head's p' slots, the rest zero (W_o's columns
  likewise).  Zero slots add exact zeros to every dot product.  torch
  scales by 1/sqrt(p') = 1/(k*sqrt(p)), so W_q and b_q are multiplied by
  k, a power of two: exact, and sqrt(k^2 p) = k sqrt(p) exactly in IEEE
  arithmetic, so nothing is rounded differently because of the padding.

- valid_lens.  (B,) becomes key_padding_mask (B, Lk), True past
  valid_lens[b].  (B, Lq) becomes a boolean attn_mask of shape
  (B*h, Lq, Lk), row b*h + i for head i of example b (torch's head order,
  the same as repeat_interleave), True past valid_lens[b, q].  torch fills
  masked scores with -inf and mha leaves masked keys out of the softmax;
  both give masked weights of exactly 0.  They differ only on a row with
  valid_len 0: torch gives NaN (softmax of all -inf), mha d2l's uniform
  1/Lk.  So every drawn valid_len is at least 1.
"""
import argparse
import math
import os
import subprocess
import sys
import tempfile

try:
    import numpy as np
    import torch
    import torch.nn.functional as F
except ImportError as e:  # pragma: no cover - depends on the machine
    sys.exit(f"parity: {e}; install python3-numpy and python3-torch "
             f"(make parity does)")

TOLERANCE = 1e-13


def draw_case(rng, index):
    """One case's shapes and options; the index cycles through the
    variants so every combination shows up in the first 16 cases."""
    h = int(rng.integers(1, 9))
    p = int(rng.integers(1, 9))
    case = {
        "B": int(rng.integers(1, 5)),
        "Lq": int(rng.integers(1, 41)),
        "Lk": int(rng.integers(1, 41)),
        "h": h,
        "D": h * p,
        "Dq": int(rng.integers(1, 41)),
        "Dk": int(rng.integers(1, 41)),
        "Dv": int(rng.integers(1, 41)),
        "D_out": int(rng.integers(1, 41)),
        "bias": index % 2 == 1,
        # none, (B,) listed, (B,) int64 file, (B, Lq) int64 / float64 file
        "lens": ["none", "list", "file1", "file2i", "file2f"][index % 5],
        "self": index % 4 == 0,
    }
    if case["self"]:
        case["Lk"] = case["Lq"]
        case["Dk"] = case["Dv"] = case["Dq"]
    return case


def module_flags(c):
    """mha's options for the module's kind: --kv-heads G, --causal, --rope."""
    flags = []
    if c.get("G", c["h"]) != c["h"]:
        flags += ["--kv-heads", str(c["G"])]
    if c.get("causal"):
        flags.append("--causal")
    if c.get("rope"):
        flags.append("--rope")
    return flags


def make_arrays(rng, c):
    """Inputs N(0, 1); weights and biases U(-1/sqrt(fan_in), 1/sqrt(fan_in)),
    PyTorch's nn.Linear initialisation, so scores stay of order 1."""
    def lin(rows, cols):
        a = 1 / np.sqrt(cols)
        return rng.uniform(-a, a, size=(rows, cols)), rng.uniform(-a, a, size=rows)

    B, Lq, Lk, D = c["B"], c["Lq"], c["Lk"], c["D"]
    arr = {"q": rng.standard_normal((B, Lq, c["Dq"]))}
    if c["self"]:
        arr["k"] = arr["v"] = arr["q"]
    else:
        arr["k"] = rng.standard_normal((B, Lk, c["Dk"]))
        arr["v"] = rng.standard_normal((B, Lk, c["Dv"]))
    arr["wq"], arr["bq"] = lin(D, c["Dq"])
    D_kv = c.get("G", c["h"]) * (D // c["h"])  # G key-value heads of p
    arr["wk"], arr["bk"] = lin(D_kv, c["Dk"])
    arr["wv"], arr["bv"] = lin(D_kv, c["Dv"])
    arr["wo"], arr["bo"] = lin(c["D_out"], D)
    if c["lens"] in ("list", "file1"):
        arr["lens"] = rng.integers(1, Lk + 1, size=B)
    elif c["lens"] != "none":
        arr["lens"] = rng.integers(1, Lk + 1, size=(B, Lq))
    return arr


def run_mha(mha, tmp, c, arr, extra=()):
    """Write the case's files, run mha forward (with the extra options),
    read OUT and A back."""
    def path(name):
        return os.path.join(tmp, name + ".npy")

    cmd = [mha, "forward", "--heads", str(c["h"]), "--queries", path("q")]
    cmd += module_flags(c)
    names = ["q", "wq", "wk", "wv", "wo"]
    if not c["self"]:
        names += ["k", "v"]
        cmd += ["--keys", path("k"), "--values", path("v")]
    cmd += ["--wq", path("wq"), "--wk", path("wk"), "--wv", path("wv"),
            "--wo", path("wo")]
    if c["bias"]:
        names += ["bq", "bk", "bv", "bo"]
        for b in ("bq", "bk", "bv", "bo"):
            cmd += ["--" + b, path(b)]
    for n in names:
        np.save(path(n), arr[n])
    if c["lens"] == "list":
        cmd += ["--valid-lens", ",".join(str(int(x)) for x in arr["lens"])]
    elif c["lens"] != "none":
        lens = arr["lens"].astype(np.float64 if c["lens"] == "file2f" else np.int64)
        np.save(path("lens"), lens)
        cmd += ["--valid-lens-file", path("lens")]
    for f in ("out", "a"):
        if os.path.exists(path(f)):
            os.remove(path(f))
    cmd += ["--out", path("out"), "--attention-out", path("a")] + list(extra)
    run = subprocess.run(cmd, capture_output=True, text=True)
    if run.returncode != 0:
        raise RuntimeError(f"mha exited with {run.returncode}: {run.stderr.strip()}")
    return np.load(path("out")), np.load(path("a"))


def run_torch(c, arr):
    """The same case through F.multi_head_attention_forward (see the top of
    this file for the padding of the query size and the masks)."""
    h, D = c["h"], c["D"]
    p = D // h
    k = 1
    while h * p * k * k < c["Dq"]:
        k *= 2
    pp = p * k * k
    E = h * pp
    # slot j of head i in the padded embedding holds feature i*p + j
    rows = np.array([i * pp + j for i in range(h) for j in range(p)])

    def pad_rows(w, scale=1.0):
        out = np.zeros((E,) + w.shape[1:])
        out[rows] = w * scale
        return out

    t = lambda a: torch.from_numpy(np.ascontiguousarray(a))
    wq = np.zeros((E, E))
    wq[rows, :c["Dq"]] = arr["wq"] * k
    wk, wv = pad_rows(arr["wk"]), pad_rows(arr["wv"])
    wo = np.zeros((c["D_out"], E))
    wo[:, rows] = arr["wo"]
    in_bias = out_bias = None
    if c["bias"]:
        in_bias = t(np.concatenate([pad_rows(arr["bq"], k), pad_rows(arr["bk"]),
                                    pad_rows(arr["bv"])]))
        out_bias = t(arr["bo"])

    B, Lq = c["B"], c["Lq"]
    q = np.zeros((B, Lq, E))
    q[:, :, :c["Dq"]] = arr["q"]
    # torch is sequence-first: (L, B, features)
    query = t(q.transpose(1, 0, 2))
    key = t(arr["k"].transpose(1, 0, 2))
    value = t(arr["v"].transpose(1, 0, 2))

    key_padding_mask = attn_mask = None
    Lk = arr["k"].shape[1]
    positions = np.arange(Lk)
    if c["lens"] in ("list", "file1"):
        key_padding_mask = t(positions[None, :] >= arr["lens"][:, None])
    elif c["lens"] != "none":
        mask = positions[None, None, :] >= arr["lens"][:, :, None]  # (B, Lq, Lk)
        attn_mask = t(np.repeat(mask, h, axis=0))                   # (B*h, Lq, Lk)

    out, weights = F.multi_head_attention_forward(
        query, key, value, E, h,
        in_proj_weight=None, in_proj_bias=in_bias,
        bias_k=None, bias_v=None, add_zero_attn=False, dropout_p=0.0,
        out_proj_weight=t(wo), out_proj_bias=out_bias, training=False,
        key_padding_mask=key_padding_mask, need_weights=True,
        attn_mask=attn_mask, use_separate_proj_weight=True,
        q_proj_weight=t(wq), k_proj_weight=t(wk), v_proj_weight=t(wv),
        average_attn_weights=False)
    return out.numpy().transpose(1, 0, 2), weights.numpy()


GRAD_TOLERANCE = 1e-12
GQA_TOLERANCE = 1e-12
GRAD_NAMES = ["dq", "dk", "dv", "dwq", "dwk", "dwv", "dwo",
              "dbq", "dbk", "dbv", "dbo"]


def run_mha_grad(mha_grad, tmp, c, arr, dout, extra=()):
    """Run mha-grad on the files run_mha wrote plus dout; read the grads."""
    def path(name):
        return os.path.join(tmp, name + ".npy")

    np.save(path("dout"), dout)
    cmd = [mha_grad, "--heads", str(c["h"]), "--queries", path("q")]
    cmd += module_flags(c)
    if not c["self"]:
        cmd += ["--keys", path("k"), "--values", path("v")]
    cmd += ["--wq", path("wq"), "--wk", path("wk"), "--wv", path("wv"),
            "--wo", path("wo")]
    if c["bias"]:
        cmd += ["--bq", path("bq"), "--bk", path("bk"), "--bv", path("bv"),
                "--bo", path("bo")]
    if c["lens"] == "list":
        cmd += ["--valid-lens", ",".join(str(int(x)) for x in arr["lens"])]
    elif c["lens"] != "none":
        cmd += ["--valid-lens-file", path("lens")]
    gdir = os.path.join(tmp, "grads")
    os.makedirs(gdir, exist_ok=True)
    cmd += ["--grad-out", path("dout"), "--dir", gdir] + list(extra)
    run = subprocess.run(cmd, capture_output=True, text=True)
    if run.returncode != 0:
        raise RuntimeError(f"mha-grad exited {run.returncode}: {run.stderr.strip()}")
    names = GRAD_NAMES if c["bias"] else GRAD_NAMES[:7]
    return {n: np.load(os.path.join(gdir, n + ".npy")) for n in names}


def torch_grads(c, arr, dout):
    """The same module written out in torch operations, d2l's way (split
    heads by reshape and permute, scores masked with -inf past valid_len),
    differentiated by autograd.  Queries, keys and values are separate
    leaves, so each gets the gradient of its own role, as mha-grad
    reports them."""
    h, D = c["h"], c["D"]
    p = D // h
    leaf = lambda a: torch.tensor(a, dtype=torch.float64, requires_grad=True)
    x = {n: leaf(arr[n]) for n in ("q", "k", "v", "wq", "wk", "wv", "wo")}
    if c["bias"]:
        x.update({n: leaf(arr[n]) for n in ("bq", "bk", "bv", "bo")})

    def lin(inp, w, b):
        y = inp @ x[w].T
        return y + x[b] if c["bias"] else y

    def split(X):
        B, L, _ = X.shape
        return X.reshape(B, L, h, p).permute(0, 2, 1, 3).reshape(B * h, L, p)

    Q, K, V = (split(lin(x["q"], "wq", "bq")), split(lin(x["k"], "wk", "bk")),
               split(lin(x["v"], "wv", "bv")))
    scores = Q @ K.transpose(1, 2) / np.sqrt(p)
    if c["lens"] != "none":
        lens = torch.tensor(arr["lens"]).repeat_interleave(h, dim=0)
        if lens.dim() == 1:
            lens = lens[:, None].expand(-1, scores.shape[1])
        keep = torch.arange(scores.shape[2])[None, None, :] < lens[:, :, None]
        scores = torch.where(keep, scores, torch.tensor(-np.inf, dtype=torch.float64))
    O = torch.softmax(scores, dim=-1) @ V
    B, Lq = arr["q"].shape[0], arr["q"].shape[1]
    concat = O.reshape(B, h, Lq, p).permute(0, 2, 1, 3).reshape(B, Lq, D)
    out = lin(concat, "wo", "bo")
    out.backward(torch.tensor(dout))
    names = dict(zip(GRAD_NAMES, ["q", "k", "v", "wq", "wk", "wv", "wo",
                                  "bq", "bk", "bv", "bo"]))
    return {g: x[n].grad.numpy() for g, n in names.items() if n in x}


# --- rotary embeddings (mha forward --rope) -------------------------------
#
# The reference rotates in complex numbers, as Meta's llama reference
# (apply_rotary_emb) does: each head's interleaved pair (x[2k], x[2k+1]) is
# the complex number x[2k] + i x[2k+1], multiplied by
# exp(i * position * base^(-2k/p)) from torch.polar.  Keys sit at positions
# 0 .. Lk-1 and queries at Lk-Lq .. Lk-1 (negative when Lq > Lk).  The
# rotated Q and K then go through F.multi_head_attention_forward with
# identity projections (multiplying by 1 and adding 0 is exact), the
# biases having been added before the rotation.

ROPE_TOLERANCE = 1e-12


def draw_rope_case(rng, index):
    """A case of draw_case's kind with an even head size, and a base."""
    c = draw_case(rng, index)
    h = c["h"]
    p = 2 * int(rng.integers(1, 5))
    c["D"] = h * p
    c["lens"] = ["none", "list", "file2i"][index % 3]
    c["base"] = 10000.0 if index % 2 == 0 else float(rng.uniform(2.0, 1e5))
    return c


def rope_options(c):
    return ["--rope"] + ([] if c["base"] == 10000.0 else
                         ["--rope-base", repr(c["base"])])


def rotary(x, positions, h, base):
    """x (B, L, h*p) real, rotated per head and interleaved pair."""
    B, L, D = x.shape
    p = D // h
    pairs = torch.view_as_complex(x.reshape(B, L, h, p // 2, 2).contiguous())
    freqs = 1.0 / (base ** (torch.arange(0, p, 2, dtype=torch.float64) / p))
    angles = torch.outer(positions.to(torch.float64), freqs)       # (L, p/2)
    turn = torch.polar(torch.ones_like(angles), angles)            # (L, p/2)
    return torch.view_as_real(pairs * turn[None, :, None, :]).reshape(B, L, D)


def rope_projections(c, x):
    """Q, K, V (B, L, D) from the tensors in x, Q and K rotated."""
    def lin(inp, w, b):
        y = inp @ x[w].T
        return y + x[b] if c["bias"] else y

    Lq, Lk = x["q"].shape[1], x["k"].shape[1]
    Q = rotary(lin(x["q"], "wq", "bq"), torch.arange(Lk - Lq, Lk), c["h"], c["base"])
    K = rotary(lin(x["k"], "wk", "bk"), torch.arange(Lk), c["h"], c["base"])
    return Q, K, lin(x["v"], "wv", "bv")


def run_torch_rope(c, arr):
    h, D = c["h"], c["D"]
    x = {n: torch.from_numpy(np.ascontiguousarray(arr[n])) for n in arr
         if n != "lens"}
    Q, K, V = rope_projections(c, x)
    Lk = K.shape[1]
    key_padding_mask = attn_mask = None
    positions = np.arange(Lk)
    if c["lens"] == "list":
        key_padding_mask = torch.from_numpy(positions[None, :] >= arr["lens"][:, None])
    elif c["lens"] != "none":
        mask = positions[None, None, :] >= arr["lens"][:, :, None]
        attn_mask = torch.from_numpy(np.repeat(mask, h, axis=0))
    eye = torch.eye(D, dtype=torch.float64)
    out, weights = F.multi_head_attention_forward(
        Q.transpose(0, 1), K.transpose(0, 1), V.transpose(0, 1), D, h,
        in_proj_weight=None, in_proj_bias=None, bias_k=None, bias_v=None,
        add_zero_attn=False, dropout_p=0.0, out_proj_weight=x["wo"],
        out_proj_bias=x["bo"] if c["bias"] else None, training=False,
        key_padding_mask=key_padding_mask, need_weights=True,
        attn_mask=attn_mask, use_separate_proj_weight=True,
        q_proj_weight=eye, k_proj_weight=eye, v_proj_weight=eye,
        average_attn_weights=False)
    return out.numpy().transpose(1, 0, 2), weights.numpy()


def torch_rope_grads(c, arr, dout):
    """Autograd through the complex rotation and attention written out."""
    h, D = c["h"], c["D"]
    p = D // h
    leaf = lambda a: torch.tensor(a, dtype=torch.float64, requires_grad=True)
    names = ["q", "k", "v", "wq", "wk", "wv", "wo"]
    if c["bias"]:
        names += ["bq", "bk", "bv", "bo"]
    x = {n: leaf(arr[n]) for n in names}
    Q, K, V = rope_projections(c, x)
    B, Lq, Lk = Q.shape[0], Q.shape[1], K.shape[1]
    heads = lambda X: X.reshape(B, X.shape[1], h, p).transpose(1, 2)  # (B, h, L, p)
    scores = heads(Q) @ heads(K).transpose(-1, -2) / np.sqrt(p)
    if c["lens"] != "none":
        lens = torch.tensor(arr["lens"])
        lens = lens[:, None].expand(-1, Lq) if lens.dim() == 1 else lens
        keep = torch.arange(Lk)[None, None, None, :] < lens[:, None, :, None]
        scores = torch.where(keep, scores, torch.tensor(-np.inf, dtype=torch.float64))
    O = (torch.softmax(scores, dim=-1) @ heads(V)).transpose(1, 2).reshape(B, Lq, D)
    out = O @ x["wo"].T + (x["bo"] if c["bias"] else 0)
    out.backward(torch.tensor(dout))
    return {"d" + n: x[n].grad.numpy() for n in names}


def rope_label(c, arr, i):
    return (f"rope {i + 1:2d}: B {c['B']} Lq {c['Lq']:2d} "
            f"Lk {arr['k'].shape[1]:2d} h {c['h']} D {c['D']:2d} "
            f"base {c['base']:8.1f} bias {'yes' if c['bias'] else 'no '} "
            f"{'self ' if c['self'] else 'cross'} lens {c['lens']:6s}")


def rope_reference(c, arr, dout):
    t_out, t_a = run_torch_rope(c, arr)
    return t_out, t_a, None if dout is None else torch_rope_grads(c, arr, dout)


# --- grouped-query and causal attention ------------------------------

def draw_gqa_case(rng, index):
    """A grouped-query case: G divides h; causal in every other case, then
    with Lk >= Lq so that no query is left without a key."""
    h = int(rng.integers(1, 9))
    p = int(rng.integers(1, 9))
    divisors = [g for g in range(1, h + 1) if h % g == 0]
    Lq = int(rng.integers(1, 41))
    causal = index % 2 == 0
    rope = index % 3 == 2  # rotary embeddings too: then p is even
    if rope:
        p += p % 2
    case = {
        "B": int(rng.integers(1, 5)), "Lq": Lq,
        "Lk": Lq + int(rng.integers(0, 9)) if causal else int(rng.integers(1, 41)),
        "h": h, "G": int(rng.choice(divisors)), "D": h * p,
        "Dq": int(rng.integers(1, 25)), "Dk": int(rng.integers(1, 25)),
        "Dv": int(rng.integers(1, 25)), "D_out": int(rng.integers(1, 25)),
        "bias": index % 4 in (1, 2),
        "lens": ["none", "list", "file1", "file2i", "file2f"][index % 5],
        "self": index % 3 == 0, "causal": causal, "rope": rope,
    }
    if case["self"]:
        case["Lk"] = case["Lq"]
        case["Dk"] = case["Dv"] = case["Dq"]
    return case


def torch_gqa(c, arr, dout=None):
    """The grouped, causal module in torch operations: out (B, Lq, D_out),
    weights (B, h, Lq, Lk) and, given dout, every gradient by autograd."""
    h, G, D = c["h"], c["G"], c["D"]
    p = D // h
    leaf = lambda a: torch.tensor(a, dtype=torch.float64, requires_grad=True)
    names = ["q", "k", "v", "wq", "wk", "wv", "wo"]
    if c["bias"]:
        names += ["bq", "bk", "bv", "bo"]
    x = {n: leaf(arr[n]) for n in names}

    def lin(inp, w, b):
        y = inp @ x[w].T
        return y + x[b] if c["bias"] else y

    B, Lq, Lk = arr["q"].shape[0], arr["q"].shape[1], arr["k"].shape[1]
    Q, K = lin(x["q"], "wq", "bq"), lin(x["k"], "wk", "bk")
    if c["rope"]:  # the complex-number rotation of the rope cases, G heads
        Q = rotary(Q, torch.arange(Lk - Lq, Lk), h, 10000.0)
        K = rotary(K, torch.arange(Lk), G, 10000.0)
    Q = Q.reshape(B, Lq, h, p).transpose(1, 2)
    K = K.reshape(B, Lk, G, p).transpose(1, 2)
    V = lin(x["v"], "wv", "bv").reshape(B, Lk, G, p).transpose(1, 2)
    # query head i reads key-value head i // (h // G): copy each G head
    K = K.repeat_interleave(h // G, dim=1)                  # (B, h, Lk, p)
    V = V.repeat_interleave(h // G, dim=1)
    scores = Q @ K.transpose(-2, -1) / np.sqrt(p)           # (B, h, Lq, Lk)
    key = torch.arange(Lk)[None, None, :]
    query = torch.arange(Lq)[None, :, None]
    hidden = torch.zeros(B, Lq, Lk, dtype=torch.bool)
    if c["lens"] != "none":
        lens = torch.tensor(arr["lens"])
        lens = lens[:, None] if lens.dim() == 1 else lens   # (B, 1 or Lq)
        hidden |= key >= lens[:, :, None]
    if c["causal"]:
        hidden |= key > query + (Lk - Lq)
    weights = torch.softmax(scores.masked_fill(hidden[:, None], float("-inf")),
                            dim=-1)
    out = lin((weights @ V).transpose(1, 2).reshape(B, Lq, D), "wo", "bo")
    grads = None
    if dout is not None:
        out.backward(torch.tensor(dout))
        grads = {"d" + n: x[n].grad.numpy() for n in names}
    return out.detach().numpy(), weights.detach().numpy(), grads


def gqa_label(c, arr, i):
    return (f"gqa {i + 1:2d}: B {c['B']} Lq {c['Lq']:2d} "
            f"Lk {arr['k'].shape[1]:2d} h {c['h']} G {c['G']} "
            f"D {c['D']:2d} bias {'yes' if c['bias'] else 'no '} "
            f"{'self ' if c['self'] else 'cross'} "
            f"{'causal' if c['causal'] else '      '} "
            f"{'rope' if c['rope'] else '    '} lens {c['lens']:6s}")


def case_label(c, arr, i):
    return (f"case {i + 1:2d}: B {c['B']} Lq {c['Lq']:2d} "
            f"Lk {arr['k'].shape[1]:2d} h {c['h']} D {c['D']:2d} "
            f"Dq {c['Dq']:2d} Dk {c['Dk']:2d} Dv {c['Dv']:2d} "
            f"D_out {c['D_out']:2d} bias {'yes' if c['bias'] else 'no '} "
            f"{'self ' if c['self'] else 'cross'} lens {c['lens']:6s}")


def case_reference(c, arr, dout):
    t_out, t_a = run_torch(c, arr)
    return t_out, t_a, None if dout is None else torch_grads(c, arr, dout)


# --- PyTorch's own options: masks, packed projections, a state dict,
# add_bias_kv, add_zero_attn, averaged weights -------------------------

TORCH_TOLERANCE = 1e-12


def draw_torch_case(rng, index):
    """A case of nn.MultiheadAttention's options.  The index cycles the
    projections (separate --wq/--wk/--wv, packed --in-proj-weight, a .npz
    --state-dict) and the two mask shapes; the rest is drawn."""
    h = int(rng.integers(1, 5))
    p = int(rng.integers(1, 7))
    E = h * p
    proj = ["separate", "packed", "state-dict"][index % 3]
    selfatt = index % 4 == 0
    Lq = int(rng.integers(1, 13))
    causal = bool(rng.random() < 0.25)
    Lk = Lq + int(rng.integers(0, 5)) if causal else int(rng.integers(1, 13))
    kdim = vdim = E
    if proj != "packed" and not selfatt and rng.random() < 0.5:
        kdim, vdim = int(rng.integers(1, 13)), int(rng.integers(1, 13))
    divisors = [g for g in range(1, h + 1) if h % g == 0]
    G = int(rng.choice(divisors)) if proj == "separate" else h
    if selfatt:
        Lk = Lq
    c = {
        "B": int(rng.integers(1, 4)), "Lq": Lq, "Lk": Lk, "h": h, "G": G,
        "p": p, "E": E, "kdim": kdim, "vdim": vdim, "proj": proj,
        "self": selfatt, "causal": causal,
        "bias": bool(rng.random() < 0.7),
        "packed_bias": proj != "separate" or (G == h and rng.random() < 0.5),
        "attn": ["bool2", "bool3", "float2", "float3", "none"][
            (index // 3) % 5],
        "kpm": ["none", "bool", "float"][int(rng.integers(0, 3))],
        "lens": bool(rng.random() < 0.3),
        "bias_kv": bool(rng.random() < 0.5),
        "zero_attn": bool(rng.random() < 0.5),
        "average": bool(rng.random() < 0.5),
    }
    # causal with a key every query sees (add_bias_kv, add_zero_attn):
    # every other such case has fewer keys than queries, so its first
    # rows see none of the input's keys and give the added one all their
    # weight
    if causal and not selfatt and (c["bias_kv"] or c["zero_attn"]) and index % 2:
        c["Lk"] = max(1, Lq - 1 - index % 3)
    return c


def make_torch_arrays(rng, c):
    """Inputs N(0, 1), weights as nn.Linear draws them, masks with about a
    third of their entries hiding a key, then key 0 shown to every row so
    that no row is left empty (torch gives NaN there, mha refuses)."""
    B, Lq, Lk, h, E = c["B"], c["Lq"], c["Lk"], c["h"], c["E"]
    Ekv = c["G"] * c["p"]
    u = lambda n, *shape: rng.uniform(-1 / np.sqrt(n), 1 / np.sqrt(n), shape)
    a = {"q": rng.standard_normal((B, Lq, E))}
    if c["self"]:
        a["k"] = a["v"] = a["q"]
    else:
        a["k"] = rng.standard_normal((B, Lk, c["kdim"]))
        a["v"] = rng.standard_normal((B, Lk, c["vdim"]))
    a["wq"], a["wk"], a["wv"] = u(E, E, E), u(c["kdim"], Ekv, c["kdim"]), u(c["vdim"], Ekv, c["vdim"])
    a["wo"] = u(E, E, E)
    if c["bias"]:
        a["bq"], a["bk"], a["bv"], a["bo"] = u(E, E), u(E, Ekv), u(E, Ekv), u(E, E)
    if c["bias_kv"]:
        a["bias_k"] = rng.standard_normal((1, 1, Ekv))
        a["bias_v"] = rng.standard_normal((1, 1, Ekv))
    rows = {"bool2": (Lq, Lk), "float2": (Lq, Lk), "bool3": (B * h, Lq, Lk),
            "float3": (B * h, Lq, Lk)}
    if c["attn"] != "none":
        hide = rng.random(rows[c["attn"]]) < 0.35
        hide[..., 0] = False
        if c["attn"].startswith("bool"):
            a["attn_mask"] = hide
        else:
            a["attn_mask"] = np.where(hide, -np.inf, rng.standard_normal(hide.shape))
    if c["kpm"] != "none":
        hide = rng.random((B, Lk)) < 0.35
        hide[:, 0] = False
        if c["kpm"] == "bool":
            a["kpm"] = hide
        else:
            a["kpm"] = np.where(hide, -np.inf, rng.standard_normal(hide.shape))
    if c["lens"]:
        a["lens"] = rng.integers(1, Lk + 1, size=B)
    return a


def run_mha_torch(mha, tmp, c, a):
    """mha forward with PyTorch's options on the case's files."""
    def path(name, ext=".npy"):
        return os.path.join(tmp, name + ext)

    def put(name, x):
        np.save(path(name), x)
        return path(name)

    cmd = [mha, "forward", "--heads", str(c["h"]), "--queries", put("q", a["q"])]
    if not c["self"]:
        cmd += ["--keys", put("k", a["k"]), "--values", put("v", a["v"])]
    if c["G"] != c["h"]:
        cmd += ["--kv-heads", str(c["G"])]
    if c["proj"] == "state-dict":
        sd = {"out_proj.weight": a["wo"]}
        if c["kdim"] == c["E"] and c["vdim"] == c["E"]:
            sd["in_proj_weight"] = np.concatenate([a["wq"], a["wk"], a["wv"]])
        else:
            sd.update(q_proj_weight=a["wq"], k_proj_weight=a["wk"],
                      v_proj_weight=a["wv"])
        if c["bias"]:
            sd["in_proj_bias"] = np.concatenate([a["bq"], a["bk"], a["bv"]])
            sd["out_proj.bias"] = a["bo"]
        if c["bias_kv"]:
            sd["bias_k"], sd["bias_v"] = a["bias_k"], a["bias_v"]
        np.savez(path("model", ".npz"), **sd)
        cmd += ["--state-dict", path("model", ".npz")]
    else:
        if c["proj"] == "packed":
            cmd += ["--in-proj-weight",
                    put("ipw", np.concatenate([a["wq"], a["wk"], a["wv"]]))]
        else:
            cmd += ["--wq", put("wq", a["wq"]), "--wk", put("wk", a["wk"]),
                    "--wv", put("wv", a["wv"])]
        cmd += ["--wo", put("wo", a["wo"])]
        if c["bias"]:
            if c["packed_bias"]:
                cmd += ["--in-proj-bias",
                        put("ipb", np.concatenate([a["bq"], a["bk"], a["bv"]]))]
            else:
                cmd += ["--bq", put("bq", a["bq"]), "--bk", put("bk", a["bk"]),
                        "--bv", put("bv", a["bv"])]
            cmd += ["--bo", put("bo", a["bo"])]
        if c["bias_kv"]:
            cmd += ["--bias-k", put("bias_k", a["bias_k"]),
                    "--bias-v", put("bias_v", a["bias_v"])]
    if "attn_mask" in a:
        cmd += ["--attn-mask", put("attn", a["attn_mask"])]
    if "kpm" in a:
        cmd += ["--key-padding-mask", put("kpm", a["kpm"])]
    if c["lens"]:
        cmd += ["--valid-lens", ",".join(str(int(x)) for x in a["lens"])]
    if c["causal"]:
        cmd.append("--causal")
    if c["zero_attn"]:
        cmd.append("--add-zero-attn")
    if c["average"]:
        cmd.append("--average-attn-weights")
    for f in ("out", "a"):
        if os.path.exists(path(f)):
            os.remove(path(f))
    cmd += ["--out", path("out"), "--attention-out", path("a")]
    run = subprocess.run(cmd, capture_output=True, text=True)
    if run.returncode != 0:
        raise RuntimeError(f"mha exited with {run.returncode}: {run.stderr.strip()}")
    return np.load(path("out")), np.load(path("a"))


def torch_options_reference(c, a):
    """F.multi_head_attention_forward with the same options.  Where torch
    1.13 has no option of its own, the case is put in the form it takes:
    G < h key-value heads as W_k, W_v (and b_k, b_v, bias_k, bias_v) with
    each head's rows repeated h/G times; valid_lens and a bool key padding
    mask as one bool key_padding_mask; a float key padding mask, the
    lengths and the causal rule (is_causal came in torch 2.0) added into a
    float attn_mask of shape (B*h, Lq, Lk)."""
    B, Lq, Lk, h, G, p, E = (c[n] for n in ("B", "Lq", "Lk", "h", "G", "p", "E"))
    t = lambda x: torch.from_numpy(np.ascontiguousarray(x))
    rep = lambda w: np.repeat(w.reshape((G, p) + w.shape[1:]), h // G,
                              axis=0).reshape((h * p,) + w.shape[1:])
    wk, wv = rep(a["wk"]), rep(a["wv"])
    in_bias = out_bias = bias_k = bias_v = None
    if c["bias"]:
        in_bias = t(np.concatenate([a["bq"], rep(a["bk"]), rep(a["bv"])]))
        out_bias = t(a["bo"])
    if c["bias_kv"]:
        bias_k = t(rep(a["bias_k"][0, 0])[None, None, :])
        bias_v = t(rep(a["bias_v"][0, 0])[None, None, :])
    key = np.arange(Lk)
    kpm = np.zeros((B, Lk), dtype=bool)
    if c["kpm"] == "bool":
        kpm |= a["kpm"]
    if c["lens"]:
        kpm |= key[None, :] >= a["lens"][:, None]
    extra = np.zeros((B * h, Lq, Lk))
    if c["kpm"] == "float":
        extra += np.repeat(a["kpm"], h, axis=0)[:, None, :]
    if c["causal"]:
        extra[:, key[None, :] > np.arange(Lq)[:, None] + (Lk - Lq)] = -np.inf
    attn = a.get("attn_mask")
    if attn is not None and attn.dtype == bool:
        attn = np.where(attn, -np.inf, 0.0)
    if attn is not None and attn.ndim == 2:
        attn = np.repeat(attn[None], B * h, axis=0)
    if c["kpm"] == "float" or c["causal"]:
        attn = extra if attn is None else attn + extra
    out, w = F.multi_head_attention_forward(
        t(a["q"].transpose(1, 0, 2)), t(a["k"].transpose(1, 0, 2)),
        t(a["v"].transpose(1, 0, 2)), E, h,
        in_proj_weight=None, in_proj_bias=in_bias,
        bias_k=bias_k, bias_v=bias_v, add_zero_attn=c["zero_attn"],
        dropout_p=0.0, out_proj_weight=t(a["wo"]), out_proj_bias=out_bias,
        training=False,
        key_padding_mask=t(kpm) if kpm.any() else None, need_weights=True,
        attn_mask=None if attn is None else t(attn),
        use_separate_proj_weight=True,
        q_proj_weight=t(a["wq"]), k_proj_weight=t(wk), v_proj_weight=t(wv),
        average_attn_weights=c["average"])
    return out.numpy().transpose(1, 0, 2), w.numpy()


def torch_options_label(c, i):
    return (f"torch {i + 1:2d}: B {c['B']} Lq {c['Lq']:2d} Lk {c['Lk']:2d} "
            f"h {c['h']} G {c['G']} E {c['E']:2d} {c['proj']:10s} "
            f"bias {'packed' if c['bias'] and c['packed_bias'] else 'yes' if c['bias'] else 'no'}"
            f" attn {c['attn']:6s} kpm {c['kpm']:5s}"
            f"{' lens' if c['lens'] else ''}{' causal' if c['causal'] else ''}"
            f"{' bias_kv' if c['bias_kv'] else ''}"
            f"{' zero_attn' if c['zero_attn'] else ''}"
            f"{' average' if c['average'] else ''}")


def run_torch_options_block(args, tmp, count):
    """count cases of PyTorch's options from their own generator (block
    29): (passed, failed, largest relative error, largest absolute
    difference of OUT and A)."""
    rng = np.random.default_rng([args.seed, 29])
    passed = failed = 0
    worst = worst_abs = 0.0
    for i in range(count):
        c = draw_torch_case(rng, i)
        a = make_torch_arrays(rng, c)
        try:
            out, w = run_mha_torch(args.mha, tmp, c, a)
            t_out, t_w = torch_options_reference(c, a)
            e_out, e_w = rel_error(out, t_out), rel_error(w, t_w)
            d = max(np.abs(out - t_out).max(), np.abs(w - t_w).max())
            ok = max(e_out, e_w, d) <= TORCH_TOLERANCE
            worst, worst_abs = max(worst, e_out, e_w), max(worst_abs, d)
            note = f"out {e_out:.1e}  A {e_w:.1e}  |diff| {d:.1e}"
        except Exception as e:  # report the case, go on with the rest
            ok, note = False, f"error: {e}"
        passed += ok
        failed += not ok
        if not ok or not args.quiet:
            print(f"{torch_options_label(c, i)}  {note}  {'ok' if ok else 'FAILED'}",
                  flush=True)
    return passed, failed, worst, worst_abs


# --- where a query may look: --window, --keep-first, --alibi, --sinks --

WINDOW_TOLERANCE = 1e-12


def bloom_slopes(n):
    """ALiBi's slopes as BLOOM's get_slopes computes them (Press et al.'s
    geometric sequence; for n not a power of two, the slopes of the
    closest power of two below it, then every other slope of twice as
    many)."""
    def power_of_2(n):
        start = 2 ** (-2 ** -(math.log2(n) - 3))
        return [start * start ** i for i in range(n)]
    if math.log2(n).is_integer():
        return power_of_2(n)
    closest = 2 ** math.floor(math.log2(n))
    return power_of_2(closest) + bloom_slopes(2 * closest)[0::2][:n - closest]


def draw_window_case(rng, index):
    """A case of a window, ALiBi and sinks: the index cycles through their
    7 combinations (bit 0 a window, 1 ALiBi, 2 sinks), the first keys kept
    in every other case with a window, with grouped key-value heads,
    valid_lens and self-attention as in the grouped-query cases; causal
    always with a window or ALiBi, in every other case otherwise."""
    combo = 1 + index % 7
    h = int(rng.integers(1, 13))
    p = int(rng.integers(1, 9))
    divisors = [g for g in range(1, h + 1) if h % g == 0]
    Lq = int(rng.integers(1, 25))
    window = int(rng.integers(1, 9)) if combo & 1 else 0
    alibi = bool(combo & 2)
    case = {
        "B": int(rng.integers(1, 5)), "Lq": Lq,
        "Lk": Lq + int(rng.integers(0, 9)),
        "h": h, "G": int(rng.choice(divisors)), "D": h * p,
        "Dq": int(rng.integers(1, 25)), "Dk": int(rng.integers(1, 25)),
        "Dv": int(rng.integers(1, 25)), "D_out": int(rng.integers(1, 25)),
        "bias": index % 4 in (1, 2),
        "lens": ["none", "list", "file1", "file2i", "file2f"][index % 5],
        "self": index % 3 == 0,
        "causal": bool(window or alibi or index % 2),
        "window": window,
        "keep": int(rng.integers(1, 4)) if window and index % 14 >= 7 else 0,
        "alibi": alibi, "sinks": bool(combo & 4),
    }
    if case["self"]:
        case["Lk"] = case["Lq"]
        case["Dk"] = case["Dv"] = case["Dq"]
    return case


def window_lens(c, arr):
    """Raise the drawn valid lengths so that every row sees a key: a row
    at position i' with a window and no kept key needs i' - W + 2."""
    if "lens" not in arr or not c["window"] or c["keep"]:
        return
    Lq, Lk, W = c["Lq"], c["Lk"], c["window"]
    need = np.maximum(1, np.arange(Lq) + Lk - Lq - W + 2)  # per row
    if arr["lens"].ndim == 1:
        arr["lens"] = np.maximum(arr["lens"], need.max())
    else:
        arr["lens"] = np.maximum(arr["lens"], need[None, :])


def window_options(c, tmp, arr):
    """mha's options of the case; --sinks writes its file."""
    flags = []
    if c["window"]:
        flags += ["--window", str(c["window"])]
    if c["keep"]:
        flags += ["--keep-first", str(c["keep"])]
    if c["alibi"]:
        flags.append("--alibi")
    if c["sinks"]:
        path = os.path.join(tmp, "sinks.npy")
        np.save(path, arr["sinks"])
        flags += ["--sinks", path]
    return flags


def torch_window(c, arr):
    """The module with the case's window, ALiBi and sinks in torch
    operations, from the papers: Mistral's window (key j seen when
    i' - W < j <= i'), StreamingLLM's kept first keys, ALiBi's
    m_h (j - i') added to the scaled scores, gpt-oss's sink appended to
    each row's logits and dropped after the softmax.  out (B, Lq, D_out),
    weights (B, h, Lq, Lk)."""
    h, G, D = c["h"], c["G"], c["D"]
    p = D // h
    t = lambda a: torch.tensor(a, dtype=torch.float64)

    def lin(x, w, b):
        y = t(x) @ t(arr[w]).T
        return y + t(arr[b]) if c["bias"] else y

    B, Lq, Lk = arr["q"].shape[0], arr["q"].shape[1], arr["k"].shape[1]
    Q = lin(arr["q"], "wq", "bq").reshape(B, Lq, h, p).transpose(1, 2)
    K = lin(arr["k"], "wk", "bk").reshape(B, Lk, G, p).transpose(1, 2)
    V = lin(arr["v"], "wv", "bv").reshape(B, Lk, G, p).transpose(1, 2)
    K = K.repeat_interleave(h // G, dim=1)
    V = V.repeat_interleave(h // G, dim=1)
    scores = Q @ K.transpose(-2, -1) / np.sqrt(p)           # (B, h, Lq, Lk)
    key = torch.arange(Lk)[None, None, :]
    query = (torch.arange(Lq) + Lk - Lq)[None, :, None]      # i'
    hidden = torch.zeros(B, Lq, Lk, dtype=torch.bool)
    if c["lens"] != "none":
        lens = torch.tensor(arr["lens"])
        lens = lens[:, None] if lens.dim() == 1 else lens
        hidden |= key >= lens[:, :, None]
    if c["causal"]:
        hidden |= key > query
    if c["window"]:
        hidden |= (key <= query - c["window"]) & (key >= c["keep"])
    if c["alibi"]:
        m = t(bloom_slopes(h))[None, :, None, None]
        scores = scores + m * (key - query)[:, None].double()
    scores = scores.masked_fill(hidden[:, None], float("-inf"))
    if c["sinks"]:
        sink = t(arr["sinks"])[None, :, None, None].expand(B, h, Lq, 1)
        weights = torch.softmax(torch.cat([scores, sink], dim=-1), dim=-1)[..., :-1]
    else:
        weights = torch.softmax(scores, dim=-1)
    out = lin((weights @ V).transpose(1, 2).reshape(B, Lq, D).numpy(), "wo", "bo")
    return out.numpy(), weights.numpy()


def window_label(c, arr, i):
    what = " ".join(x for x in (
        f"window {c['window']}" if c["window"] else "",
        f"keep {c['keep']}" if c["keep"] else "",
        "alibi" if c["alibi"] else "", "sinks" if c["sinks"] else "",
        "causal" if c["causal"] and not c["window"] else "") if x)
    return (f"window {i + 1:2d}: B {c['B']} Lq {c['Lq']:2d} "
            f"Lk {arr['k'].shape[1]:2d} h {c['h']:2d} G {c['G']:2d} "
            f"lens {c['lens']:6s} {what}")


def run_window_block(args, tmp, count):
    """count cases of draw_window_case from their own generator, through
    mha forward and torch_window.  Returns (passed, failed, largest
    error of OUT and A)."""
    rng = np.random.default_rng([args.seed, 19])
    passed = failed = 0
    worst = 0.0
    for i in range(count):
        c = draw_window_case(rng, i)
        arr = make_arrays(rng, c)
        arr["sinks"] = rng.standard_normal(c["h"])
        window_lens(c, arr)
        try:
            out, a = run_mha(args.mha, tmp, c, arr,
                             window_options(c, tmp, arr))
            t_out, t_a = torch_window(c, arr)
            e_out, e_a = rel_error(out, t_out), rel_error(a, t_a)
            ok = e_out <= WINDOW_TOLERANCE and e_a <= WINDOW_TOLERANCE
            worst = max(worst, e_out, e_a)
            note = f"out {e_out:.1e}  A {e_a:.1e}"
        except Exception as e:  # report the case, go on with the rest
            ok, note = False, f"error: {e}"
        passed += ok
        failed += not ok
        if not ok or not args.quiet:
            print(f"{window_label(c, arr, i)}  {note}  {'ok' if ok else 'FAILED'}",
                  flush=True)
    return passed, failed, worst


def run_block(args, tmp, block, count, draw, label, extra, reference,
              tolerance):
    """count cases drawn by draw(rng, i) from the block's own generator, each
    run through mha (with the options extra(c)) and compared with
    reference(c, arr, dout) -> (OUT, A, gradients or None); with --grad, a
    random dOUT through mha-grad too.  Returns (passed, failed, largest
    error of OUT and A, largest error of the gradients)."""
    rng = np.random.default_rng([args.seed, block])
    passed = failed = 0
    worst = worst_grad = 0.0
    for i in range(count):
        c = draw(rng, i)
        arr = make_arrays(rng, c)
        try:
            out, a = run_mha(args.mha, tmp, c, arr, extra(c))
            dout = None
            if args.grad:
                dout = np.random.default_rng([args.seed, block, i, 1]).standard_normal(out.shape)
            t_out, t_a, want = reference(c, arr, dout)
            e_out, e_a = rel_error(out, t_out), rel_error(a, t_a)
            ok = e_out <= tolerance and e_a <= tolerance
            worst = max(worst, e_out, e_a)
            note = f"out {e_out:.1e}  A {e_a:.1e}"
            if args.grad:
                got = run_mha_grad(args.grad, tmp, c, arr, dout, extra(c))
                # one normwise error over all the gradients together: b_k's
                # gradient is zero in exact arithmetic (a shift common to
                # every key of a row leaves its softmax as it is), so on its
                # own it would be rounding over rounding
                e_g = grads_error(got, want)
                ok = ok and e_g <= GRAD_TOLERANCE
                worst_grad = max(worst_grad, e_g)
                note += f"  grads {e_g:.1e}"
        except Exception as e:  # report the case, go on with the rest
            ok, note = False, f"error: {e}"
        passed += ok
        failed += not ok
        if not ok or not args.quiet:
            print(f"{label(c, arr, i)}  {note}  {'ok' if ok else 'FAILED'}",
                  flush=True)
    return passed, failed, worst, worst_grad


def grads_error(got, want):
    """One normwise error over all the gradients together (see main)."""
    if set(got) != set(want) or any(got[n].shape != want[n].shape for n in got):
        return float("inf")
    return (max(np.abs(got[n] - want[n]).max() for n in got)
            / max(np.abs(want[n]).max() for n in got))


def rel_error(got, want):
    if got.shape != want.shape:
        return float("inf")
    if np.isnan(got).any() or np.isnan(want).any():
        return float("inf")
    ref = np.abs(want).max()
    diff = np.abs(got - want).max()
    return diff / ref if ref > 0 else diff


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mha", default="build/mha")
    ap.add_argument("--cases", type=int, default=60)
    ap.add_argument("--gqa-cases", type=int, default=40,
                    help="grouped-query and causal cases (default 40)")
    ap.add_argument("--seed", type=int, default=None,
                    help="replay the cases of a run (default: drawn at "
                         "random and printed)")
    ap.add_argument("--quiet", action="store_true",
                    help="print only failed cases and the summary")
    ap.add_argument("--rope-cases", type=int, default=32,
                    help="cases with --rope, against a complex-number "
                         "rotation in torch")
    ap.add_argument("--torch-cases", type=int, default=48,
                    help="cases of PyTorch's own options: masks, packed "
                         "projections, a state dict, bias_kv, zero_attn, "
                         "averaged weights (default 48)")
    ap.add_argument("--window-cases", type=int, default=40,
                    help="cases of --window, --keep-first, --alibi and "
                         "--sinks against a reference from the papers "
                         "(default 40)")
    ap.add_argument("--grad", metavar="MHA_GRAD",
                    help="also compare every gradient that MHA_GRAD "
                         "(build/mha-grad) computes with torch's autograd")
    args = ap.parse_args()
    if not os.access(args.mha, os.X_OK):
        sys.exit(f"parity: {args.mha} is not an executable (run make first)")
    torch.set_num_threads(1)
    if args.seed is None:
        args.seed = int(np.random.SeedSequence().entropy % 1_000_000_000)
    print(f"parity: {args.cases} cases, {args.gqa_cases} grouped-query "
          f"and causal cases, {args.rope_cases} with rope and "
          f"{args.torch_cases} of PyTorch's options, {args.mha} against torch "
          f"{torch.__version__} in float64 (seed {args.seed}); every "
          f"valid_len >= 1, since torch gives NaN where d2l's mask gives "
          f"uniform weights for 0; replay with --seed {args.seed}", flush=True)
    none = lambda c: []
    with tempfile.TemporaryDirectory(prefix="mha-parity-") as tmp:
        results = [
            run_block(args, tmp, 0, args.cases, draw_case, case_label, none,
                      case_reference, TOLERANCE),
            run_block(args, tmp, 17, args.gqa_cases, draw_gqa_case, gqa_label,
                      none, torch_gqa, GQA_TOLERANCE),
            run_block(args, tmp, 15, args.rope_cases, draw_rope_case,
                      rope_label, rope_options, rope_reference,
                      ROPE_TOLERANCE),
        ]
        t_pass, t_fail, t_worst, t_abs = run_torch_options_block(
            args, tmp, args.torch_cases)
        w_pass, w_fail, w_worst = run_window_block(args, tmp,
                                                   args.window_cases)
    passed = sum(r[0] for r in results) + t_pass + w_pass
    failed = sum(r[1] for r in results) + t_fail + w_fail
    worst_grad = max(r[3] for r in results)
    (_, _, worst, _), (_, _, g_worst, _), (_, _, r_worst, r_grad) = results
    print(f"largest relative error {worst:.1e} (tolerance {TOLERANCE:.0e}); "
          f"grouped-query and causal cases {g_worst:.1e} (tolerance "
          f"{GQA_TOLERANCE:.0e})")
    print(f"rope: {args.rope_cases} cases, largest relative error "
          f"{r_worst:.1e} (tolerance {ROPE_TOLERANCE:.0e})"
          + (f", of a gradient {r_grad:.1e}" if args.grad else ""))
    if args.grad:
        print(f"largest relative error of a gradient {worst_grad:.1e} "
              f"(tolerance {GRAD_TOLERANCE:.0e}), against torch autograd")
    print(f"PyTorch's options: {args.torch_cases} cases, largest relative "
          f"error {t_worst:.1e}, largest difference {t_abs:.1e} (tolerance "
          f"{TORCH_TOLERANCE:.0e})")
    print(f"windows, ALiBi and sinks: {args.window_cases} cases, largest "
          f"relative error {w_worst:.1e} (tolerance {WINDOW_TOLERANCE:.0e})")
    print(f"parity: {passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
