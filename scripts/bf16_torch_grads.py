#!/usr/bin/env python3
"""The peer's bf16 error on the Hugging Face fixtures: transformers' own model of each
fixture in tests/fixtures/hf, run in float32 under torch.autocast("cpu", torch.bfloat16)
(the mixed precision gdn_train --dtype bf16 follows), compared with the fixture's float64
loss and gradients. Writes DIR/<fixture>/bf16_peer.json: the loss terms, and per tensor
the relative L2 error ||g_bf16 - g_f64|| / ||g_f64|| (gdn_npy_diff's rel_l2), which
tests/cli/test_hf.sh (case bf16_<fixture>) holds gdn_eval --dtype bf16 to:

    python scripts/bf16_torch_grads.py [--fixtures tests/fixtures/hf] [--out DIR]

--out also writes the gradients as <tensor name>.npy per fixture. Run by hand in a virtual
environment with torch and transformers (as make_hf_fixtures.py): never by the tests or CI.
"""

import argparse
import json
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F
import transformers

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_hf_fixtures import checkpoint_grads  # noqa: E402


FIXTURES = ["qwen3_next_moe", "qwen3_5_dense", "qwen3_5_moe"]


def peer(fixture, d, grads_out):
    cls = (transformers.Qwen3_5ForConditionalGeneration if fixture == "qwen3_5_dense"
           else transformers.AutoModelForCausalLM)
    model = cls.from_pretrained(d, dtype=torch.float32, attn_implementation="eager",
                                experts_implementation="eager")
    model.train()
    tokens = torch.from_numpy(np.load(os.path.join(d, "tokens.npy")))
    inputs, targets = tokens[:, :-1], tokens[:, 1:]
    moe = "moe" in fixture
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = model(input_ids=inputs, output_router_logits=True) if moe else model(
            input_ids=inputs)
    logits = out.logits.float()
    loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))
    cfg = model.config.get_text_config()
    aux = torch.zeros(())
    total = loss
    if moe:
        lb = transformers.models.qwen3_next.modeling_qwen3_next.load_balancing_loss_func
        aux = lb(tuple(r.float() for r in out.router_logits), cfg.num_experts,
                 cfg.num_experts_per_tok)
        if cfg.output_router_logits:
            total = loss + cfg.router_aux_loss_coef * aux
    total.backward()
    names = sorted(f[:-4] for f in os.listdir(os.path.join(d, "grads")))
    grads = checkpoint_grads(model, names + ["lm_head.weight"])
    rel_l2 = {}
    for k in names:
        g = grads[k].detach().double().numpy()
        ref = np.load(os.path.join(d, "grads", k + ".npy"))
        rel_l2[k] = float(np.linalg.norm(g - ref) / np.linalg.norm(ref))
        if grads_out:
            os.makedirs(os.path.join(grads_out, fixture), exist_ok=True)
            np.save(os.path.join(grads_out, fixture, k + ".npy"), g)
    result = {"what": "transformers in float32 under torch.autocast(cpu, bfloat16) against the "
                      "float64 fixture: scripts/bf16_torch_grads.py",
              "torch": torch.__version__, "transformers": transformers.__version__,
              "loss": loss.item(), "aux_loss": aux.item(), "total": total.item(),
              "rel_l2": rel_l2}
    with open(os.path.join(d, "bf16_peer.json"), "w") as f:
        json.dump(result, f, indent=1)
    print(f"{fixture}: loss {loss.item():.6f}, worst rel_l2 {max(rel_l2.values()):.3e}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--fixtures", default=os.path.join(os.path.dirname(__file__), "..", "tests",
                                                       "fixtures", "hf"))
    ap.add_argument("--out", help="also write each fixture's gradients as DIR/<fixture>/*.npy")
    args = ap.parse_args()
    for fixture in FIXTURES:
        peer(fixture, os.path.join(args.fixtures, fixture), args.out)


if __name__ == "__main__":
    main()
