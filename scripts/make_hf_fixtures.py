#!/usr/bin/env python3
"""Builds the Hugging Face parity fixtures of tests/fixtures/hf/ with transformers itself.

Run by hand, in a virtual environment with torch, transformers and safetensors (never by
the tests or CI, which only read the committed output):

    python scripts/make_hf_fixtures.py [--out tests/fixtures/hf] [--only NAME]...

For each tiny model (random weights, float64 throughout) it writes DIR/<name>/:
    config.json, model.safetensors   as save_pretrained writes them
    tokens.npy                       int64 [B, T + 1]: inputs [:, :-1], targets [:, 1:]
    expected.json                    {"loss", "aux_loss", "total", "tokens", ...}
    grads/<tensor name>.npy          d total / d tensor, float64, in the checkpoint's layout

The models:
    qwen3_next_moe   Qwen3NextForCausalLM: GDN + gated attention, MoE with a dense layer
                     (mlp_only_layers), norm_topk_prob false, the router loss trained
    qwen3_5_dense    Qwen3_5ForConditionalGeneration (text_config, model.language_model.
                     prefix, a tiny vision tower, an mtp.* tensor), tied embeddings, mRoPE
                     sections, no MoE
    qwen3_5_moe      Qwen3_5MoeForCausalLM: MoE in every layer, the router loss trained
    qwen3_next_packed  Qwen3NextForCausalLM with gated attention in every layer and MoE, on
                     packed documents: the rows' position_ids restart at each boundary of
                     cu_seqlens.npy (transformers then masks attention block-diagonally,
                     masking_utils.find_packed_sequence_indices) and the target after each
                     document's last token is ignore_index. GDN layers cannot be in it:
                     transformers' torch fallbacks of causal_conv1d_fn and
                     chunk_gated_delta_rule drop cu_seq_lens (only the CUDA kernels of
                     causal-conv1d and fla take them), so its CPU code is no packed oracle
                     for them; gdn-cp's tests run each document alone there instead.


transformers computes some intermediates in float32 on purpose (RMSNorm, the RoPE tables,
softmax, the router, the delta rule): for a float64 reference those casts are redirected
to float64 while the models are built and run (see float64_everywhere).
"""

import argparse
import json
import os
import shutil

import numpy as np
import torch
import torch.nn.functional as F
import transformers
from safetensors import safe_open
from safetensors.torch import save_file

B, T = 2, 23  # T + 1 tokens per row; T is not a multiple of 2, 3 or 4
CU_SEQLENS = [0, 1, 8, 10, 16, 22, 23]  # the packed fixture's documents, in every row
VOCAB = 64


def float64_everywhere():
    """Every float32 cast inside transformers' modelling code becomes float64."""
    torch.set_default_dtype(torch.float64)
    torch.float32 = torch.float64
    torch.float = torch.float64
    torch.Tensor.float = torch.Tensor.double


def text_settings(**extra):
    s = dict(
        vocab_size=VOCAB,
        hidden_size=32,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        linear_num_key_heads=2,
        linear_num_value_heads=4,
        linear_key_head_dim=8,
        linear_value_head_dim=8,
        linear_conv_kernel_dim=4,
        layer_types=["linear_attention", "full_attention", "linear_attention", "full_attention"],
        rms_norm_eps=1e-6,
        initializer_range=0.2,  # large enough that every layer changes the loss visibly
        pad_token_id=None,
        bos_token_id=None,
        eos_token_id=None,
    )
    s.update(extra)
    return s


MOE = dict(num_experts=4, num_experts_per_tok=2, moe_intermediate_size=12,
           shared_expert_intermediate_size=20, output_router_logits=True,
           router_aux_loss_coef=0.25)


def build(name):
    if name == "qwen3_next_moe":
        cfg = transformers.Qwen3NextConfig(
            **text_settings(intermediate_size=24, mlp_only_layers=[2], norm_topk_prob=False,
                            rope_parameters={"rope_type": "default", "rope_theta": 10000.0,
                                             "partial_rotary_factor": 0.25},
                            tie_word_embeddings=False),
            **MOE)
        return transformers.AutoModelForCausalLM.from_config(cfg, attn_implementation="eager", experts_implementation="eager")
    if name == "qwen3_next_packed":
        cfg = transformers.Qwen3NextConfig(
            **text_settings(intermediate_size=24, mlp_only_layers=[2], norm_topk_prob=True,
                            layer_types=["full_attention"] * 4,
                            rope_parameters={"rope_type": "default", "rope_theta": 10000.0,
                                             "partial_rotary_factor": 0.5},
                            tie_word_embeddings=False),
            **MOE)
        return transformers.AutoModelForCausalLM.from_config(cfg, attn_implementation="eager", experts_implementation="eager")
    if name == "qwen3_5_dense":
        text = text_settings(intermediate_size=24,
                             rope_parameters={"rope_type": "default", "rope_theta": 1e6,
                                              "partial_rotary_factor": 0.5,
                                              "mrope_section": [2, 1, 1], "mrope_interleaved": True})
        vision = dict(depth=1, hidden_size=16, intermediate_size=32, num_heads=2, out_hidden_size=32,
                      patch_size=4, spatial_merge_size=2, temporal_patch_size=2,
                      num_position_embeddings=16)
        cfg = transformers.Qwen3_5Config(text_config=text, vision_config=vision,
                                         tie_word_embeddings=True)
        return transformers.Qwen3_5ForConditionalGeneration._from_config(cfg,
                                                                          attn_implementation="eager", experts_implementation="eager")
    if name == "qwen3_5_moe":
        cfg = transformers.Qwen3_5MoeTextConfig(
            **text_settings(rope_parameters={"rope_type": "default", "rope_theta": 10000.0,
                                             "partial_rotary_factor": 0.25},
                            tie_word_embeddings=False),
            **MOE)
        return transformers.AutoModelForCausalLM.from_config(cfg, attn_implementation="eager", experts_implementation="eager")
    raise ValueError(name)


def perturb_norms(model, gen):
    """The zero-initialised norm weights (1 + w) and dt_bias get random values, so their
    gradients and their effect on the loss are tested too."""
    with torch.no_grad():
        for n, p in model.named_parameters():
            if n.endswith("norm.weight") or n.endswith("dt_bias") or n.endswith("A_log"):
                p.add_(0.3 * torch.randn(p.shape, generator=gen))


def checkpoint_grads(model, ckpt_names):
    """Parameter gradients under the checkpoint's tensor names (per-expert experts)."""
    out = {}
    for n, p in model.named_parameters():
        g = p.grad if p.grad is not None else torch.zeros_like(p)
        if n.endswith("mlp.experts.gate_up_proj"):
            base = n[: -len("gate_up_proj")]
            I = g.shape[1] // 2
            for e in range(g.shape[0]):
                out[f"{base}{e}.gate_proj.weight"] = g[e, :I]
                out[f"{base}{e}.up_proj.weight"] = g[e, I:]
        elif n.endswith("mlp.experts.down_proj"):
            base = n[: -len("down_proj")]
            for e in range(g.shape[0]):
                out[f"{base}{e}.down_proj.weight"] = g[e]
        else:
            out[n] = g
    text = {k: v for k, v in out.items() if not k.startswith("model.visual.")}
    missing = sorted(set(ckpt_names) - set(text) - {"lm_head.weight"})
    extra = sorted(set(text) - set(ckpt_names))
    assert not missing and not extra, (missing, extra)
    return text


def make(name, out_dir, seed):
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed + 1)
    model = build(name).double()
    perturb_norms(model, gen)
    model.train()
    d = os.path.join(out_dir, name)
    shutil.rmtree(d, ignore_errors=True)
    model.save_pretrained(d)
    os.remove(os.path.join(d, "generation_config.json")) if os.path.exists(
        os.path.join(d, "generation_config.json")) else None
    st = os.path.join(d, "model.safetensors")
    with safe_open(st, "pt") as f:
        tensors = {k: f.get_tensor(k) for k in f.keys()}
        metadata = f.metadata()
    ckpt_names = [k for k in tensors if not k.startswith("model.visual.")]
    if name == "qwen3_5_dense":
        # Released Qwen3.5 checkpoints carry multi-token-prediction weights: skipped.
        tensors["mtp.fc.weight"] = torch.randn(32, 64, generator=gen)
        save_file(tensors, st, metadata=metadata)

    tokens = torch.randint(0, VOCAB, (B, T + 1), generator=gen)
    np.save(os.path.join(d, "tokens.npy"), tokens.numpy().astype(np.int64))
    inputs, targets = tokens[:, :-1], tokens[:, 1:].clone()
    kwargs = {}
    if name.endswith("_packed"):
        # Documents of 1, 7, 2, 6, 6 and 1 tokens: boundaries on the cp = 3 shard edges (8,
        # 16), one-token documents first and last. Positions restart at every boundary.
        np.save(os.path.join(d, "cu_seqlens.npy"), np.array(CU_SEQLENS, dtype=np.int64))
        pos = torch.zeros(T, dtype=torch.long)
        for s, e in zip(CU_SEQLENS[:-1], CU_SEQLENS[1:]):
            pos[s:e] = torch.arange(e - s)
        kwargs["position_ids"] = pos.unsqueeze(0).expand(B, T)
        # Without a cache: transformers looks for packed position_ids only then
        # (masking_utils._preprocess_mask_arguments); with one the mask stays causal.
        kwargs["use_cache"] = False
        for c in CU_SEQLENS[1:-1]:
            targets[:, c - 1] = -100  # the next document's first token is not a target
    model.zero_grad()
    out = model(input_ids=inputs, output_router_logits=True, **kwargs) if "moe" in name or \
        name.endswith("_packed") else model(input_ids=inputs)
    logits = out.logits
    loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1),
                           ignore_index=-100)
    cfg = model.config.get_text_config()
    if "moe" in name or name.endswith("_packed"):
        lb = transformers.models.qwen3_next.modeling_qwen3_next.load_balancing_loss_func
        aux = lb(out.router_logits, cfg.num_experts, cfg.num_experts_per_tok)
        total = loss + cfg.router_aux_loss_coef * aux if cfg.output_router_logits else loss
    else:
        aux = torch.zeros((), dtype=torch.float64)
        total = loss
    total.backward()
    grads = checkpoint_grads(model, ckpt_names)
    gdir = os.path.join(d, "grads")
    os.makedirs(gdir)
    for k, g in grads.items():
        np.save(os.path.join(gdir, k + ".npy"), g.detach().numpy().astype(np.float64))
    expected = {"loss": loss.item(), "aux_loss": aux.item(), "total": total.item(),
                "tokens": int((targets != -100).sum()), "transformers": transformers.__version__,
                "torch": torch.__version__, "model": type(model).__name__}
    with open(os.path.join(d, "expected.json"), "w") as f:
        json.dump(expected, f, indent=1)
    print(f"{name}: {type(model).__name__}, {len(grads)} tensors, loss {loss.item():.15f}, "
          f"aux {aux.item():.15f}, total {total.item():.15f}")


NAMES = ["qwen3_next_moe", "qwen3_5_dense", "qwen3_5_moe", "qwen3_next_packed"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "tests",
                                                  "fixtures", "hf"))
    ap.add_argument("--only", action="append", choices=NAMES,
                    help="make only this fixture (repeatable); the others keep their bytes")
    args = ap.parse_args()
    float64_everywhere()
    os.makedirs(args.out, exist_ok=True)
    for i, name in enumerate(NAMES):
        if not args.only or name in args.only:
            make(name, args.out, seed=100 + i)


if __name__ == "__main__":
    main()
