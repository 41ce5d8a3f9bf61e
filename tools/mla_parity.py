#!/usr/bin/python3
"""Multi-head latent attention (src/nn/mla.c) against a PyTorch reference.

    tools/mla_parity.py --run build/mla-run [--cases 40] [--seed S] [--quiet]

The reference below follows the shapes, names and steps of DeepSeek-V3's
published inference code (inference/model.py, class MLA): wq (or wq_a,
q_norm, wq_b), wkv_a, kv_norm, wkv_b, wo; the queries split into q_nope
and q_pe, the latent into kv and k_pe; RoPE as a complex multiplication of
interleaved pairs; and both of its paths, "naive" (keys and values
up-projected by wkv_b and cached per head) and "absorb" (W_UK folded into
the query, W_UV applied after attention, the latent and k_pe cached),
each run as the published code runs it: the first positions at once with
a causal mask, then one position per step through its cache.  It is
written here in float64 torch operations, independently of the C code.

Every case draws its sizes (B, n, d_model, h, d_nope, d_r, d_v, d_c, and
a query rank of 0 or more) and its numbers afresh (from --seed, or from
the operating system's entropy when no seed is given, printed so that a
failure can be replayed), writes them as .npy, runs mla-run on them and
holds mla-run's naive forward, absorbed forward and latent-cache decoding
to the reference's output, and the reference's two paths to each other,
to 1e-12.  Exit status 0 when every case agrees, 1 otherwise.
"""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch

TOLERANCE = 1e-12


def rms_norm(x, weight, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight


def precompute_freqs_cis(dim, seqlen, base):
    freqs = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim))
    t = torch.arange(seqlen, dtype=torch.float64)
    return torch.polar(torch.ones(seqlen, dim // 2, dtype=torch.float64),
                       torch.outer(t, freqs))


def apply_rotary_emb(x, freqs_cis):
    # x (bsz, seqlen, heads, dim): pairs (2k, 2k + 1) as complex numbers
    y = torch.view_as_complex(x.clone().view(*x.shape[:-1], -1, 2))
    y = y * freqs_cis.view(1, x.size(1), 1, x.size(-1) // 2)
    return torch.view_as_real(y).flatten(3)


class MLA:
    """The published class MLA's forward, one layer, no parallelism."""

    def __init__(self, w, n_heads, nope, rope, v_dim, eps, base, impl,
                 bsz, max_seq_len):
        self.w = w
        self.n_heads, self.nope, self.rope, self.v_dim = n_heads, nope, rope, v_dim
        self.kv_lora_rank = w["wkv_b"].shape[1]
        self.qk_head_dim = nope + rope
        self.softmax_scale = self.qk_head_dim ** -0.5
        self.eps, self.impl = eps, impl
        self.freqs = precompute_freqs_cis(rope, max_seq_len, base)
        z = lambda *s: torch.zeros(*s, dtype=torch.float64)
        if impl == "naive":
            self.k_cache = z(bsz, max_seq_len, n_heads, self.qk_head_dim)
            self.v_cache = z(bsz, max_seq_len, n_heads, v_dim)
        else:
            self.kv_cache = z(bsz, max_seq_len, self.kv_lora_rank)
            self.pe_cache = z(bsz, max_seq_len, rope)

    def forward(self, x, start_pos):
        w = self.w
        bsz, seqlen, _ = x.size()
        end_pos = start_pos + seqlen
        freqs_cis = self.freqs[start_pos:end_pos]
        if "wq" in w:
            q = x @ w["wq"].T
        else:
            q = rms_norm(x @ w["wq_a"].T, w["q_norm"], self.eps) @ w["wq_b"].T
        q = q.view(bsz, seqlen, self.n_heads, self.qk_head_dim)
        q_nope, q_pe = torch.split(q, [self.nope, self.rope], dim=-1)
        q_pe = apply_rotary_emb(q_pe, freqs_cis)
        kv = x @ w["wkv_a"].T
        kv, k_pe = torch.split(kv, [self.kv_lora_rank, self.rope], dim=-1)
        k_pe = apply_rotary_emb(k_pe.unsqueeze(2), freqs_cis)
        if self.impl == "naive":
            q = torch.cat([q_nope, q_pe], dim=-1)
            kv = rms_norm(kv, w["kv_norm"], self.eps) @ w["wkv_b"].T
            kv = kv.view(bsz, seqlen, self.n_heads, self.nope + self.v_dim)
            k_nope, v = torch.split(kv, [self.nope, self.v_dim], dim=-1)
            k = torch.cat([k_nope, k_pe.expand(-1, -1, self.n_heads, -1)], dim=-1)
            self.k_cache[:bsz, start_pos:end_pos] = k
            self.v_cache[:bsz, start_pos:end_pos] = v
            scores = torch.einsum("bshd,bthd->bsht", q,
                                  self.k_cache[:bsz, :end_pos]) * self.softmax_scale
        else:
            wkv_b = w["wkv_b"].view(self.n_heads, -1, self.kv_lora_rank)
            q_nope = torch.einsum("bshd,hdc->bshc", q_nope, wkv_b[:, :self.nope])
            self.kv_cache[:bsz, start_pos:end_pos] = rms_norm(kv, w["kv_norm"],
                                                              self.eps)
            self.pe_cache[:bsz, start_pos:end_pos] = k_pe.squeeze(2)
            scores = (torch.einsum("bshc,btc->bsht", q_nope,
                                   self.kv_cache[:bsz, :end_pos]) +
                      torch.einsum("bshr,btr->bsht", q_pe,
                                   self.pe_cache[:bsz, :end_pos])) * self.softmax_scale
        if seqlen > 1:  # the published Transformer's mask for a prefill
            mask = torch.full((seqlen, seqlen), float("-inf"),
                              dtype=torch.float64).triu_(1)
            mask = torch.hstack([torch.zeros(seqlen, start_pos,
                                             dtype=torch.float64), mask])
            scores += mask.unsqueeze(1)
        scores = scores.softmax(dim=-1)
        if self.impl == "naive":
            x = torch.einsum("bsht,bthd->bshd", scores, self.v_cache[:bsz, :end_pos])
        else:
            x = torch.einsum("bsht,btc->bshc", scores, self.kv_cache[:bsz, :end_pos])
            x = torch.einsum("bshc,hdc->bshd", x, wkv_b[:, -self.v_dim:])
        return x.flatten(2) @ w["wo"].T


def draw_case(rng):
    c = {"B": int(rng.integers(1, 4)), "n": int(rng.integers(1, 9)),
         "h": int(rng.integers(1, 5)), "nope": int(rng.integers(1, 7)),
         "rope": 2 * int(rng.integers(1, 4)), "v": int(rng.integers(1, 7)),
         "dc": int(rng.integers(1, 13)), "dim": int(rng.integers(2, 17))}
    c["q_lora"] = int(rng.choice([0, int(rng.integers(1, 13))]))
    c["prefill"] = int(rng.integers(1, c["n"] + 1))
    h, qk = c["h"], c["nope"] + c["rope"]
    u = lambda *s: rng.uniform(-1, 1, size=s) / np.sqrt(s[-1])
    w = {}
    if c["q_lora"] == 0:
        w["wq"] = u(h * qk, c["dim"])
    else:
        w["wq_a"] = u(c["q_lora"], c["dim"])
        w["q_norm"] = rng.uniform(0.5, 1.5, size=c["q_lora"])
        w["wq_b"] = u(h * qk, c["q_lora"])
    w["wkv_a"] = u(c["dc"] + c["rope"], c["dim"])
    w["kv_norm"] = rng.uniform(0.5, 1.5, size=c["dc"])
    w["wkv_b"] = u(h * (c["nope"] + c["v"]), c["dc"])
    w["wo"] = u(c["dim"], h * c["v"])
    x = rng.normal(size=(c["B"], c["n"], c["dim"]))
    return c, w, x


def reference(c, w, x, impl, prefill):
    """The published code's decoding: prefill positions, then one a step."""
    tw = {k: torch.from_numpy(v) for k, v in w.items()}
    m = MLA(tw, c["h"], c["nope"], c["rope"], c["v"], 1e-6, 10000.0, impl,
            c["B"], c["n"])
    tx = torch.from_numpy(x)
    outs, at = [], 0
    while at < c["n"]:
        step = prefill if at == 0 else 1
        outs.append(m.forward(tx[:, at:at + step], at))
        at += step
    return torch.cat(outs, dim=1).numpy()


def run_case(args, tmp, c, w, x):
    tmp = tempfile.mkdtemp(dir=tmp)  # a case's own files only
    for name, a in list(w.items()) + [("x", x)]:
        np.save(os.path.join(tmp, name + ".npy"), a)
    r = subprocess.run([args.run, tmp, str(c["h"]), str(c["nope"]),
                        str(c["rope"]), str(c["v"]), str(c["prefill"])],
                       capture_output=True, text=True)
    if r.returncode != 0:
        return None, r.stderr.strip()
    got = {k: np.load(os.path.join(tmp, k + ".npy"))
           for k in ("naive", "absorbed", "decoded")}
    return got, ""


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run", default="build/mla-run")
    ap.add_argument("--cases", type=int, default=40)
    ap.add_argument("--seed", type=int)
    ap.add_argument("--quiet", action="store_true")
    args = ap.parse_args()
    seed = args.seed if args.seed is not None else \
        int.from_bytes(os.urandom(4), "little")
    rng = np.random.default_rng(seed)
    worst, bad = 0.0, 0
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.cases):
            c, w, x = draw_case(rng)
            ref = reference(c, w, x, "naive", c["n"])
            ref_abs = reference(c, w, x, "absorb", c["prefill"])
            got, err = run_case(args, tmp, c, w, x)
            label = (f"mla {i + 1:2d}: B {c['B']} n {c['n']} d_model "
                     f"{c['dim']:2d} h {c['h']} d_nope {c['nope']} d_r "
                     f"{c['rope']} d_v {c['v']} d_c {c['dc']:2d} q_lora "
                     f"{c['q_lora']:2d} prefill {c['prefill']}")
            if got is None:
                print(f"{label}: mla-run failed: {err}")
                bad += 1
                continue
            diffs = [np.abs(ref_abs - ref).max()] + \
                    [np.abs(got[k] - ref).max()
                     for k in ("naive", "absorbed", "decoded")]
            d = max(diffs)
            worst = max(worst, d)
            ok = d <= TOLERANCE
            bad += not ok
            if not args.quiet or not ok:
                print(f"{label}: largest difference {d:.2e} "
                      f"{'ok' if ok else 'FAIL'}")
    print(f"mla parity: {args.cases - bad} of {args.cases} cases agree to "
          f"{TOLERANCE:g} (seed {seed}; largest difference {worst:.2e})")
    return 0 if bad == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
