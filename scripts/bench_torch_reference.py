"""Times transformers' pure-PyTorch torch_chunk_gated_delta_rule (Qwen3-Next) on the CPU,
forward and forward + backward with autograd, at gdn_bench's shapes, and prints one JSON
line per (shape, variant) in gdn_bench's format (shape, variant, dtype, median_ms,
threads), so scripts/bench_cpu_op.sh can join the two by (shape, variant). With
--matmul-size N it first prints torch's rate for an N x N x N float32 matmul (the fastest
of --reps), beside gdn_bench's GEMM ceiling line.

Run by hand in a venv with torch and transformers (never a test dependency):
    VENV/bin/python scripts/bench_torch_reference.py --threads 2 \
        --shapes "1,4096,4,4,128,128;2,2048,2,4,64,64"

The inputs match gdn_bench's: an initial state, the final state returned, no L2 norm in
the op, f32; the backward seeds both the output and the final state (autograd.backward
over [o, ht] with random dO, dht), which is what gdn_bench's chunked_fwd_bwd computes.
The function timed is the torch path itself (functools.wraps' __wrapped__), even where
transformers would swap in fla's kernel."""
import argparse
import json
import statistics
import time

import torch

from bench_shapes import parse_shapes  # scripts/ is on sys.path: it holds this script
from transformers.models.qwen3_next import modeling_qwen3_next as qn


def torch_rule():
    f = qn.torch_chunk_gated_delta_rule
    return getattr(f, "__wrapped__", f)


def median_ms(fn, reps, warmup):
    for _ in range(warmup):
        fn()
    out = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(out)


def matmul_line(n, reps):
    gen = torch.Generator().manual_seed(7)
    a = torch.rand(n, n, generator=gen) * 2 - 1
    b = torch.rand(n, n, generator=gen) * 2 - 1
    torch.matmul(a, b.t())  # untimed, as gdn_bench's ceiling runs
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        torch.matmul(a, b.t())
        best = min(best, time.perf_counter() - t0)
    return {"torch_matmul": {"n": n, "dtype": "f32", "gflops": 2 * n ** 3 / best * 1e-9,
                             "ms": best * 1e3, "threads": torch.get_num_threads(),
                             "torch": torch.__version__}}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shapes", default="1,4096,4,4,128,128;2,2048,2,4,64,64")
    ap.add_argument("--threads", type=int, default=torch.get_num_threads())
    ap.add_argument("--chunk-size", type=int, default=64)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--matmul-size", type=int, default=0, help="0: no matmul line")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    if args.matmul_size > 0:
        print(json.dumps(matmul_line(args.matmul_size, max(args.reps, 3))), flush=True)
    rule = torch_rule()
    gen = torch.Generator().manual_seed(1)

    for B, T, Hk, Hv, K, V in parse_shapes(args.shapes):
        def randn(*s, scale=1.0):
            return (torch.randn(*s, generator=gen) * scale).requires_grad_(True)

        # The value ranges of gdn's random_gdn_inputs: keys of norm about one, g <= 0,
        # beta in (0, 1).
        ks = K ** -0.5
        q, k = randn(B, T, Hk, K, scale=ks), randn(B, T, Hk, K, scale=ks)
        v = randn(B, T, Hv, V)
        g = (-torch.nn.functional.softplus(torch.randn(B, T, Hv, generator=gen)) * 0.3)
        g.requires_grad_(True)
        beta = torch.sigmoid(torch.randn(B, T, Hv, generator=gen)).requires_grad_(True)
        h0 = randn(B, Hv, K, V, scale=0.5)
        dO, dht = torch.randn(B, T, Hv, V, generator=gen), torch.randn(B, Hv, K, V, generator=gen)

        def run():
            return rule(q, k, v, g, beta, chunk_size=args.chunk_size, initial_state=h0,
                        output_final_state=True, use_qk_l2norm_in_kernel=False)

        def fwd():
            with torch.no_grad():
                run()

        def fwd_bwd():
            for x in (q, k, v, g, beta, h0):
                x.grad = None
            o, ht = run()
            torch.autograd.backward([o, ht], [dO, dht])

        for variant, fn in (("torch_fwd", fwd), ("torch_fwd_bwd", fwd_bwd)):
            ms = median_ms(fn, args.reps, args.warmup)
            print(json.dumps({"shape": {"B": B, "T": T, "Hk": Hk, "Hv": Hv, "K": K, "V": V},
                              "variant": variant, "device": "cpu", "dtype": "f32",
                              "chunk_size": args.chunk_size, "median_ms": ms,
                              "tokens_per_s": B * T / (ms * 1e-3), "reps": args.reps,
                              "warmup": args.warmup, "threads": torch.get_num_threads(),
                              "torch": torch.__version__}), flush=True)


if __name__ == "__main__":
    main()
