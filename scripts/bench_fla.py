"""Times a peer's chunk_gated_delta_rule on the GPU at gdn-cp's benchmark shapes, forward
and forward + backward, and prints one JSON line per (shape, variant) in gdn_bench's
format, so scripts/device_check.sh can put them in one table. --impl fla: fla's Triton
kernels (flash-linear-attention, the fla-core wheel); --impl flashqla: FlashQLA's TileLang
kernels (the Qwen team's, flash-qla with tilelang). Both with their defaults otherwise.

bf16 only: both refuse fp32 inputs. Only the op modules are imported. Each case runs in its
own try/except: a failure prints a JSON line with "error" and the next case still runs. The
first call of each case (Triton's autotune, TileLang's JIT) is timed apart: first_call_ms.
Device machine only (torch and the peer's packages on PYTHONPATH).

    PYTHONPATH=<site> python3 scripts/bench_fla.py --impl fla --shapes "1,8192,16,32,128,128"
"""
import argparse
import json
import statistics
import time

import torch

from bench_shapes import parse_shapes  # scripts/ is on sys.path: it holds this script


def time_ms(fn, reps, warmup):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    out = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        out.append(start.elapsed_time(end))
    return statistics.median(out)


def inputs(B, T, Hq, Hv, K, V):
    dev, dt = "cuda", torch.bfloat16
    # The key heads are L2-normalised inside the op (use_qk_l2norm_in_kernel), as gdn-cp
    # does; both peers take grouped value heads (GVA: Hv a multiple of Hk) natively.
    q = torch.randn(B, T, Hq, K, device=dev, dtype=dt, requires_grad=True)
    k = torch.randn(B, T, Hq, K, device=dev, dtype=dt, requires_grad=True)
    v = torch.randn(B, T, Hv, V, device=dev, dtype=dt, requires_grad=True)
    # The log-decay in fp32, as Qwen3-Next computes it (FlashQLA's backward requires it).
    g = torch.nn.functional.logsigmoid(torch.randn(B, T, Hv, device=dev)).requires_grad_(True)
    beta = torch.rand(B, T, Hv, device=dev, dtype=dt).requires_grad_(True)
    return q, k, v, g, beta


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shapes", default="1,32768,16,32,128,128;1,8192,16,32,128,128")
    ap.add_argument("--impl", choices=("fla", "flashqla"), default="fla")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=2)
    args = ap.parse_args()
    try:
        if args.impl == "fla":
            from fla.ops.gated_delta_rule import chunk_gated_delta_rule
        else:
            from flash_qla import chunk_gated_delta_rule
    except Exception as e:  # the whole benchmark needs it: say why, once, as data
        print(json.dumps({"variant": f"{args.impl}_import", "error": f"{type(e).__name__}: {e}"}))
        return
    torch.manual_seed(0)
    for B, T, Hk, Hv, K, V in parse_shapes(args.shapes):
        shape = {"B": B, "T": T, "Hk": Hk, "Hv": Hv, "K": K, "V": V}
        for variant in (f"{args.impl}_fwd", f"{args.impl}_fwd_bwd"):
            line = {"shape": shape, "variant": variant, "device": "cuda", "dtype": "bf16"}
            try:
                q, k, v, g, beta = inputs(B, T, Hk, Hv, K, V)

                def fwd():
                    with torch.no_grad():
                        chunk_gated_delta_rule(q, k, v, g, beta, use_qk_l2norm_in_kernel=True)

                def fwd_bwd():
                    o, _ = chunk_gated_delta_rule(q, k, v, g, beta, use_qk_l2norm_in_kernel=True)
                    o.sum().backward()

                fn = fwd if variant.endswith("_fwd") else fwd_bwd
                t0 = time.perf_counter()
                fn()
                torch.cuda.synchronize()
                first = (time.perf_counter() - t0) * 1e3
                ms = time_ms(fn, args.reps, args.warmup)
                line.update({"median_ms": ms, "tokens_per_s": B * T / (ms * 1e-3),
                             "first_call_ms": first})
            except Exception as e:
                line["error"] = f"{type(e).__name__}: {e}"
            print(json.dumps(line), flush=True)
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
