"""Times fla's chunk_gated_delta_rule (flash-linear-attention) at gdn-cp's benchmark shapes
on the GPU and prints JSON lines in gdn_bench's format, so scripts/device_check.sh can put
them in one table. Runs on the device machine only (needs torch, triton and fla)."""
import json
import statistics

import torch
from fla.ops.gated_delta_rule import chunk_gated_delta_rule

SHAPES = [(1, 32768, 64, 64, 128, 128), (1, 8192, 16, 32, 128, 128)]


def time_ms(fn, reps=5, warmup=2):
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


def main():
    torch.manual_seed(0)
    for B, T, Hk, Hv, K, V in SHAPES:
        for dtype in (torch.bfloat16, torch.float32):
            dev = "cuda"
            # fla wants the key heads repeated to the value heads (GVA via repeat).
            q = torch.randn(B, T, Hv, K, device=dev, dtype=dtype, requires_grad=True)
            k = torch.nn.functional.normalize(torch.randn(B, T, Hv, K, device=dev), dim=-1).to(dtype)
            k.requires_grad_(True)
            v = torch.randn(B, T, Hv, V, device=dev, dtype=dtype, requires_grad=True)
            g = (-torch.rand(B, T, Hv, device=dev) * 0.1).to(dtype).requires_grad_(True)
            beta = torch.rand(B, T, Hv, device=dev, dtype=dtype).requires_grad_(True)

            def fwd():
                return chunk_gated_delta_rule(q, k, v, g, beta, use_qk_l2norm_in_kernel=True)[0]

            def fwd_bwd():
                fwd().sum().backward()

            name = "bf16" if dtype == torch.bfloat16 else "f32"
            for variant, fn in (("fla_fwd", fwd), ("fla_fwd_bwd", fwd_bwd)):
                ms = time_ms(fn)
                print(json.dumps({"shape": {"B": B, "T": T, "Hk": Hk, "Hv": Hv, "K": K, "V": V},
                                  "variant": variant, "dtype": name, "median_ms": ms,
                                  "tokens_per_s": B * T / (ms / 1000.0)}))


if __name__ == "__main__":
    main()
