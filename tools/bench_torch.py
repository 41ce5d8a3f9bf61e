"""tools/bench_torch.py THREADS [L REPS [BATCH]]: time PyTorch's float64
multi-head attention for tools/bench.c, on the same problem, in the same
run.

With L and REPS, one measurement in a process of its own, as someone
timing torch alone would take it: both ways in (below) are timed and the
faster is printed, "L MEDIAN_MS PATH", and the script ends.  bench runs
it between its own measurements, while its threads sleep.

Without them, bench starts this script once and keeps it waiting on
stdin, so that each of torch's measurements sits right next to ours in
time (the machine's load drifts).  Protocol, one line each way:

    bench -> torch:  "L REPS"
    torch -> bench:  "L MEDIAN_MS PATH"
    bench -> torch:  "quit" (or end of input)

The problem: self-attention, B = 8, d_model = 512, h = 8, biases on, batch
first, evaluation mode, no gradients, need_weights=False.  Two ways in
and the faster one (decided at the first L, then kept: torch is slow
enough here that timing both everywhere would double the run) is
reported, with its name:
  - nn.MultiheadAttention(...)(x, x, x, need_weights=False), which takes
    torch's native fused path (torch._native_multi_head_attention) when
    its conditions hold;
  - torch.nn.functional.multi_head_attention_forward, the plain one.
torch.set_num_threads(THREADS): the same thread count as ours.
"""
import statistics
import sys
import time

import torch
import torch.nn.functional as F

B, D, H = 8, 512, 8


def median_ms(fn, reps):
    fn()  # warm-up
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return 1e3 * statistics.median(times)


def paths_for(mha, batch, L):
    """The two ways in, on X (batch, L, D) ~ N(0, 1)."""
    x = torch.randn(batch, L, D, dtype=torch.float64)
    xt = x.transpose(0, 1)  # (L, B, D): the functional form is length-first

    def module():
        return mha(x, x, x, need_weights=False)[0]

    def functional():
        return F.multi_head_attention_forward(
            xt, xt, xt, D, H, mha.in_proj_weight, mha.in_proj_bias,
            None, None, False, 0.0, mha.out_proj.weight,
            mha.out_proj.bias, training=False, need_weights=False)[0]

    return {"nn.MultiheadAttention": module,
            "F.multi_head_attention_forward": functional}


def main():
    threads = int(sys.argv[1])
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    mha = torch.nn.MultiheadAttention(D, H, bias=True, batch_first=True,
                                      dtype=torch.float64).eval()
    if len(sys.argv) > 2:  # one measurement, this process alone
        L, reps = int(sys.argv[2]), int(sys.argv[3])
        batch = int(sys.argv[4]) if len(sys.argv) > 4 else B
        with torch.inference_mode():
            ms, name = min((median_ms(fn, reps), name)
                           for name, fn in paths_for(mha, batch, L).items())
        print(f"{L} {ms:.3f} {name} torch {torch.__version__} threads "
              f"{torch.get_num_threads()}", flush=True)
        return
    print(f"ready torch {torch.__version__} threads {torch.get_num_threads()}",
          flush=True)
    chosen = None
    for line in sys.stdin:
        if line.strip() in ("", "quit"):
            break
        L, reps = (int(w) for w in line.split())
        paths = paths_for(mha, B, L)
        with torch.inference_mode():
            if chosen is None:
                ms, chosen = min((median_ms(fn, reps), name)
                                 for name, fn in paths.items())
            else:
                ms = median_ms(paths[chosen], reps)
        print(f"{L} {ms:.3f} {chosen}", flush=True)


if __name__ == "__main__":
    main()
