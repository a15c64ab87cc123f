"""Times torch's F.linear on the CPU at the shapes of gdn_gemm_bench, forward (y = x W^T) and
backward (dx and dW by autograd), in float32 and in bfloat16 (the operands cast to bf16, as
torch.autocast("cpu", torch.bfloat16) gives F.linear: oneDNN's bf16 GEMM), and prints one
JSON line per (shape, dtype, pass) in gdn_gemm_bench's fields: {"side": "torch", ...}.
The peer of scripts/bench_gemm.sh; run in a venv with torch (never a test dependency).
"""
import argparse
import json
import time

import torch
import torch.nn.functional as F


def best_ms(reps, fn):
    fn()
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        best = min(best, (time.perf_counter() - t0) * 1e3)
    return best


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", default="2048,512,1024;2048,1024,512;2048,512,4096;512,512,256")
    ap.add_argument("--dtypes", default="f32,bf16")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=5)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    for item in args.shapes.split(";"):
        N, fin, fout = (int(v) for v in item.split(","))
        for dt in args.dtypes.split(","):
            dtype = torch.bfloat16 if dt == "bf16" else torch.float32
            x = torch.randn(N, fin, dtype=dtype, requires_grad=True)
            W = torch.randn(fout, fin, dtype=dtype, requires_grad=True)
            dy = torch.randn(N, fout, dtype=dtype)
            flops = 2.0 * N * fin * fout

            def forward():
                with torch.no_grad():
                    F.linear(x, W)

            y = F.linear(x, W)

            def backward():
                torch.autograd.grad(y, (x, W), dy, retain_graph=True)

            for name, fn, f in (("forward", forward, flops), ("backward", backward, 2 * flops)):
                ms = best_ms(args.reps, fn)
                print(json.dumps({"side": "torch", "path": f"torch {torch.__version__}",
                                  "dtype": dt, "threads": args.threads, "N": N, "in": fin,
                                  "out": fout, "pass": name, "ms": ms,
                                  "gflops": f / ms * 1e-6}), flush=True)


if __name__ == "__main__":
    main()
