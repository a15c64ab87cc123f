#!/usr/bin/env python3
"""The benchmark rows of scripts/device_check.sh's summary, from its bench.jsonl: one row
per timed line (its round, when the line has one), a FALLBACK row for each bf16 variant
that ran a tiled kernel where a register kernel was meant (gdn/pass/launch_counts.h), and
the ratios: ours over fla's and FlashQLA's per shape and round (the sides alternate in one
run, so each round's ratio is a same-run ratio), attention over SDPA, and the bf16 training
step's model FLOP/s as a share of the measured bf16 GEMM peak, and its profile's largest
parts (gdn_train --profile). Tab-separated rows
(name, result, detail) on stdout.

    device_summary.py BENCH_JSONL
"""
import json
import sys


def main():
    if len(sys.argv) != 2 or sys.argv[1] in ("-h", "--help"):
        print(__doc__)
        sys.exit(0 if len(sys.argv) == 2 else 2)
    lines = []
    for l in open(sys.argv[1]):
        if l.startswith("{") and '"variant"' in l:
            try:
                lines.append(json.loads(l))
            except json.JSONDecodeError:
                print(f"bench.jsonl line\tFAILED\tnot JSON: {l.strip()[:80]}")
    peak = next((j for j in lines if j["variant"] == "bf16_gemm_peak" and "tflops" in j), None)
    for j in lines:
        s = j.get("shape", {})
        rnd = f" round {j['round']}" if "round" in j else ""
        name = f"bench {j['variant']} {j.get('dtype', '')} T={s.get('T', j.get('T'))} Hv={s.get('Hv')}{rnd}"
        if "gemm" in j:
            g = j["gemm"]
            experts = f" over {g['E']} experts" if g.get("E") else ""
            name = f"bench {j['variant']} {j['pass']} {g['N']}x{g['in']}x{g['out']}{experts}"
        err = j.get("error")
        detail = err or "%.3f ms" % j["median_ms"]
        if "first_call_ms" in j:
            detail += " (first call %.0f ms)" % j["first_call_ms"]
        if "gemm" in j and not err:
            detail += f", {j['tflops']:.0f} TFLOP/s"
            if peak:
                detail += f", {100 * j['tflops'] / peak['tflops']:.0f}% of the bf16 peak"
        print(f"{name}\t{'FAILED' if err else 'info'}\t{detail}")
    # Which kernels each bf16 variant ran: a register kernel not taken is a slow run.
    for j in lines:
        if "bf16" not in j["variant"] or j.get("round", 1) != 1:
            continue
        slow = {k: v for k, v in j.get("launches", {}).items() if v.get("tiled", 0) > 0}
        if slow:
            why = "; ".join(f"{k}: {v.get('fallback', '?')}" for k, v in slow.items())
            print(f"kernels of {j['variant']} T={j.get('shape', {}).get('T')}\tFALLBACK\t{why}")
    timed = [j for j in lines if "shape" in j and "median_ms" in j]
    t = {(j["variant"], j["shape"]["T"], j.get("round", 0)): j["median_ms"] for j in timed}
    rounds = sorted({j.get("round", 0) for j in timed})
    pairs = [(ours + suffix, peer + suffix)
             for ours in ("cuda_chunked_bf16", "cuda_chunked")
             for peer in ("flashqla", "fla")
             for suffix in ("_fwd", "_fwd_bwd")]
    for T in sorted({j["shape"]["T"] for j in timed}):
        for ours, peer in pairs:
            for r in rounds:
                if t.get((ours, T, r)) and t.get((peer, T, r)):
                    print(f"ratio {ours} / {peer} T={T} round {r}\tinfo\t"
                          f"{t[(ours, T, r)] / t[(peer, T, r)]:.2f}x")
    a = {(j["variant"], j.get("shape", {}).get("T")): j for j in lines
         if j["variant"].startswith(("attn_", "sdpa_"))}
    for T in sorted({T for _, T in a if T}):
        for ours, peer in [(f"attn_bf16_{b}{p}", f"sdpa{p}")
                           for b in ("cudnn", "flash", "io") for p in ("_fwd", "_fwd_bwd")]:
            if "median_ms" in a.get((ours, T), {}) and "median_ms" in a.get((peer, T), {}):
                print(f"ratio {ours} / {peer} T={T}\tinfo\t"
                      f"{a[(ours, T)]['median_ms'] / a[(peer, T)]['median_ms']:.2f}x")
    # The grouped experts' rate as a share of one dense GEMM's with the same FLOPs.
    g = {(j["variant"], j["pass"], tuple(j["gemm"].values())): j for j in lines
         if "gemm" in j and "tflops" in j}
    for (variant, pas, shape), j in g.items():
        dense = g.get(("grouped_bf16_dense", pas, shape))
        if variant.startswith("grouped_bf16_") and variant != "grouped_bf16_dense" and dense:
            print(f"ratio {variant} / dense {pas} {shape[0]}x{shape[1]}x{shape[2]}\tinfo\t"
                  f"{100 * j['tflops'] / dense['tflops']:.0f}% of the dense rate")
    step = next((j for j in lines if j["variant"] == "train_step_bf16" and "tflops" in j), None)
    if step and step.get("profile"):
        prof = sorted(step["profile"].items(), key=lambda kv: -kv[1])
        print("train step bf16 profile (ms, largest first)\tinfo\t" +
              ", ".join(f"{k} {v:.1f}" for k, v in prof[:8]))
    if step and step.get("peak_device") and step.get("estimate"):
        print(f"train step bf16: peak device buffers {step['peak_device'] / 2**30:.2f} GiB\tinfo\t"
              f"the estimate {step['estimate'] / 2**30:.2f} GiB "
              f"({step['estimate'] / step['peak_device']:.2f}x the peak)")
    if step and peak:
        print(f"train step bf16: {step['tokens_per_s']:.0f} tokens/s, {step['tflops']:.1f} TFLOP/s"
              f"\tinfo\t{100 * step['tflops'] / peak['tflops']:.1f}% of the measured bf16 peak "
              f"({peak['tflops']:.0f} TFLOP/s)")


if __name__ == "__main__":
    main()
