"""Times fla's chunk_gated_delta_rule (flash-linear-attention) on the GPU at gdn-cp's
benchmark shapes, forward and forward + backward, and prints one JSON line per (shape,
variant) in gdn_bench's format, so scripts/device_check.sh can put both in one table.

bf16 only: fla's kernels refuse fp32 inputs. Only the op module is imported (the fla-core
wheel that fetch_device_deps.sh carries has no model code, which would need another
transformers). Each case runs in its own try/except: a failure prints a JSON line with
"error" and the next case still runs. Device machine only (torch, triton, fla).

    PYTHONPATH=<fla-core> python3 scripts/bench_fla.py --shapes "1,8192,16,32,128,128;..."
"""
import argparse
import json
import statistics

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


def inputs(B, T, Hv, K, V):
    dev, dt = "cuda", torch.bfloat16
    # fla takes grouped heads through repetition, so q and k come with Hv heads here; the
    # key heads are L2-normalised inside the op (use_qk_l2norm_in_kernel), as gdn-cp does.
    q = torch.randn(B, T, Hv, K, device=dev, dtype=dt, requires_grad=True)
    k = torch.randn(B, T, Hv, K, device=dev, dtype=dt, requires_grad=True)
    v = torch.randn(B, T, Hv, V, device=dev, dtype=dt, requires_grad=True)
    g = torch.nn.functional.logsigmoid(torch.randn(B, T, Hv, device=dev)).to(dt).requires_grad_(True)
    beta = torch.rand(B, T, Hv, device=dev, dtype=dt).requires_grad_(True)
    return q, k, v, g, beta


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shapes", default="1,32768,16,32,128,128;1,8192,16,32,128,128")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=2)
    args = ap.parse_args()
    try:
        from fla.ops.gated_delta_rule import chunk_gated_delta_rule
    except Exception as e:  # the whole benchmark needs it: say why, once, as data
        print(json.dumps({"variant": "fla_import", "error": f"{type(e).__name__}: {e}"}))
        return
    torch.manual_seed(0)
    for B, T, Hk, Hv, K, V in parse_shapes(args.shapes):
        shape = {"B": B, "T": T, "Hk": Hk, "Hv": Hv, "K": K, "V": V}
        for variant in ("fla_fwd", "fla_fwd_bwd"):
            line = {"shape": shape, "variant": variant, "device": "cuda", "dtype": "bf16"}
            try:
                q, k, v, g, beta = inputs(B, T, Hv, K, V)

                def fwd():
                    with torch.no_grad():
                        chunk_gated_delta_rule(q, k, v, g, beta, use_qk_l2norm_in_kernel=True)

                def fwd_bwd():
                    o, _ = chunk_gated_delta_rule(q, k, v, g, beta, use_qk_l2norm_in_kernel=True)
                    o.sum().backward()

                ms = time_ms(fwd if variant == "fla_fwd" else fwd_bwd, args.reps, args.warmup)
                line.update({"median_ms": ms, "tokens_per_s": B * T / (ms * 1e-3)})
            except Exception as e:
                line["error"] = f"{type(e).__name__}: {e}"
            print(json.dumps(line), flush=True)
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
