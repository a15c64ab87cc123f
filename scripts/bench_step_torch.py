"""Times transformers' own model of a gdn-cp run config on the CPU: the training step that
gdn_train runs (forward, cross-entropy with the router's load-balancing loss, backward,
gradient clipping, AdamW), eager, at the config's seq_len and batch, and prints one JSON
line per step: {"side": "torch", "dtype", "step", "ms", "threads"}. The peer of
scripts/bench_step.sh, which runs it alternately with gdn_train.

--dtype f32 runs eager float32; --dtype bf16 runs the same float32 model under
torch.autocast("cpu", torch.bfloat16), PyTorch's mixed precision on the CPU.

Run by hand in a venv with torch and transformers (never a test dependency):
    VENV/bin/python scripts/bench_step_torch.py --config configs/bench-step.json --steps 4
"""
import argparse
import contextlib
import json
import time

import torch
import transformers


def build_model(model_cfg):
    cfg = dict(model_cfg)
    kind = cfg.pop("model_type")
    if kind == "qwen3_next":
        config = transformers.Qwen3NextConfig(**cfg)
        return transformers.Qwen3NextForCausalLM(config)
    raise SystemExit(f"bench_step_torch.py: model_type {kind!r} is not benchmarked here")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", required=True, help="gdn-cp run config (model + train)")
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--dtype", choices=["f32", "bf16"], default="f32")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    with open(args.config) as f:
        run = json.load(f)
    train = run["train"]
    torch.manual_seed(int(train.get("seed", 0)))
    model = build_model(run["model"]).float().train()
    opt = torch.optim.AdamW(model.parameters(), lr=train.get("lr", 1e-3),
                            weight_decay=train.get("weight_decay", 0.0))
    B, T = int(train.get("batch_size", 1)), int(train["seq_len"])
    vocab = run["model"]["vocab_size"]
    cast = (torch.autocast("cpu", dtype=torch.bfloat16) if args.dtype == "bf16"
            else contextlib.nullcontext())
    for step in range(args.steps):
        ids = torch.randint(0, vocab, (B, T + 1))
        t0 = time.perf_counter()
        with cast:
            out = model(input_ids=ids[:, :-1], labels=ids[:, 1:].contiguous(),
                        output_router_logits=run["model"].get("output_router_logits", False))
        out.loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), train.get("grad_clip", 1.0))
        opt.step()
        opt.zero_grad(set_to_none=True)
        ms = (time.perf_counter() - t0) * 1e3
        print(json.dumps({"side": "torch", "dtype": args.dtype, "step": step, "ms": ms,
                          "loss": float(out.loss), "threads": args.threads}), flush=True)


if __name__ == "__main__":
    main()
