#!/usr/bin/env python3
"""torch's scaled_dot_product_attention (bf16, causal) at one shape, on its flash and its cuDNN
backends (sdpa_flash_*, sdpa_cudnn_*; a backend torch refuses here is said and left out), and
sdpa_* the faster of the two: the peer of gdn_attn_bench's attn_bf16 lines, JSON lines with
the same shape keys and FLOP count
(causal forward 4 B Hq D T (T + 1) / 2; forward + backward 3.5 times that). A benchmark for
the device check, not a test: needs torch with CUDA.

  bench_sdpa.py [--batch 1] [--seq 32768] [--heads 16] [--kv-heads 2] [--dim 256] [--reps 5]

Grouped-query attention runs natively (enable_gqa) where this torch's flash backend takes
it; otherwise K and V are expanded to Hq heads before timing and the lines say "gqa":
"expanded"."""
import argparse
import json
import statistics
import sys
import time


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--seq", type=int, default=32768)
    ap.add_argument("--heads", type=int, default=16)
    ap.add_argument("--kv-heads", type=int, default=2)
    ap.add_argument("--dim", type=int, default=256)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--reps", type=int, default=5)
    a = ap.parse_args()
    if a.heads % a.kv_heads:
        sys.exit(f"bench_sdpa.py: --heads {a.heads} is not a multiple of --kv-heads {a.kv_heads}")
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    if not torch.cuda.is_available():
        sys.exit("bench_sdpa.py: torch sees no CUDA device")
    dev, dt = "cuda", torch.bfloat16
    B, T, Hq, Hkv, D = a.batch, a.seq, a.heads, a.kv_heads, a.dim
    q = torch.randn(B, Hq, T, D, device=dev, dtype=dt, requires_grad=True)
    k = torch.randn(B, Hkv, T, D, device=dev, dtype=dt, requires_grad=True)
    v = torch.randn(B, Hkv, T, D, device=dev, dtype=dt, requires_grad=True)
    do = torch.randn(B, Hq, T, D, device=dev, dtype=dt)
    gqa = "native"

    backend = SDPBackend.FLASH_ATTENTION

    def attend(k_, v_):
        with sdpa_kernel(backend):
            if gqa == "native":
                return F.scaled_dot_product_attention(q, k_, v_, is_causal=True, enable_gqa=True)
            return F.scaled_dot_product_attention(q, k_, v_, is_causal=True)

    try:
        attend(k, v)
    except (RuntimeError, TypeError):
        gqa = "expanded"
        k = k.detach().repeat_interleave(Hq // Hkv, dim=1).requires_grad_()
        v = v.detach().repeat_interleave(Hq // Hkv, dim=1).requires_grad_()
        attend(k, v)

    def timed(fn):
        for _ in range(a.warmup):
            fn()
        torch.cuda.synchronize()
        ms = []
        for _ in range(a.reps):
            t0 = time.perf_counter()
            fn()
            torch.cuda.synchronize()
            ms.append((time.perf_counter() - t0) * 1e3)
        return statistics.median(ms)

    def fwd():
        with torch.no_grad():
            attend(k, v)

    def fwd_bwd():
        attend(k, v).backward(do)
        q.grad = k.grad = v.grad = None

    flops = 4.0 * B * Hq * D * T * (T + 1) / 2
    shape = {"B": B, "T": T, "Hq": Hq, "Hkv": Hkv, "D": D}
    best = {}
    for label, backend in (("flash", SDPBackend.FLASH_ATTENTION),
                           ("cudnn", SDPBackend.CUDNN_ATTENTION)):
        for name, fn, f in (("_fwd", fwd, flops), ("_fwd_bwd", fwd_bwd, 3.5 * flops)):
            try:
                ms = timed(fn)
            except RuntimeError as e:
                print(f"bench_sdpa.py: the {label} backend refused: {str(e).splitlines()[0]}",
                      file=sys.stderr)
                break
            print(json.dumps({"shape": shape, "variant": f"sdpa_{label}{name}", "device": "cuda",
                              "median_ms": ms, "tflops": f / (ms * 1e-3) * 1e-12, "gqa": gqa,
                              "torch": torch.__version__}), flush=True)
            if name not in best or ms < best[name][0]:
                best[name] = (ms, f, label)
    for name, (ms, f, label) in best.items():
        print(json.dumps({"shape": shape, "variant": f"sdpa{name}", "device": "cuda",
                          "median_ms": ms, "tflops": f / (ms * 1e-3) * 1e-12, "gqa": gqa,
                          "backend": label, "torch": torch.__version__}), flush=True)


if __name__ == "__main__":
    main()
