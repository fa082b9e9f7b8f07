#!/usr/bin/env python3
"""transformers' own Llama layer modules on the inputs tests/golden/llama_kernels_golden_test.cc
gives, for zero's RMSNorm, rotary embedding and SwiGLU kernels.

  llama_kernels_reference.py IN.json OUT.json
IN:
  rmsnorm: N, C, eps, x (N·C), weight (C), dout (N·C)
  rope: a list of cases: B, T, NH, NKV, head_dim, theta, offset, scaling (null or llama3's four
        fields), q (B·T·NH·head_dim), k (B·T·NKV·head_dim), dq_out, dk_out, all (B, T, heads,
        head_dim) as zero lays them out
  swiglu: N, H, x (N·2H, each row [gate | up]), dout (N·H)
OUT, each computed in float64 with autograd for the backward:
  rmsnorm: out, dx, dweight from LlamaRMSNorm (its own fp32 normalisation inside);
  rope: per case inv_freq (the module's fp32 buffer), cos and sin (T, head_dim; its forward for
        positions offset..offset+T-1), q, k (apply_rotary_pos_emb), dq, dk of sum(q·dq_out) +
        sum(k·dk_out), all back in zero's layout;
  swiglu: out = ACT2FN["silu"](gate) · up (LlamaMLP's product), dx = [dgate | dup].
Exit code 3 when torch or transformers is not importable (the C++ test then skips).
"""
import json
import sys

try:
    import torch
    from transformers import LlamaConfig
    from transformers.activations import ACT2FN
    from transformers.models.llama.modeling_llama import (LlamaRMSNorm, LlamaRotaryEmbedding,
                                                          apply_rotary_pos_emb)
except Exception as error:  # noqa: BLE001 - any import failure means "not available"
    print(f"torch/transformers not importable: {error}", file=sys.stderr)
    sys.exit(3)

F64 = torch.float64


def tensor(values, *shape):
    return torch.tensor(values, dtype=F64).reshape(*shape)


def flat(t):
    return t.detach().reshape(-1).tolist()


def rmsnorm(case):
    n, c = case["N"], case["C"]
    norm = LlamaRMSNorm(c, eps=case["eps"]).to(F64)
    with torch.no_grad():
        norm.weight.copy_(tensor(case["weight"], c))
    x = tensor(case["x"], n, c).requires_grad_()
    out = norm(x)
    out.backward(tensor(case["dout"], n, c))
    return {"out": flat(out), "dx": flat(x.grad), "dweight": flat(norm.weight.grad)}


def rope(case):
    b, t, nh, nkv, d = case["B"], case["T"], case["NH"], case["NKV"], case["head_dim"]
    config = dict(hidden_size=nh * d, num_attention_heads=nh, num_key_value_heads=nkv,
                  head_dim=d, rope_theta=case["theta"],
                  max_position_embeddings=max(case["offset"] + t, 1))
    if case["scaling"] is not None:
        config["rope_scaling"] = dict(rope_type="llama3", **case["scaling"])
    rotary = LlamaRotaryEmbedding(config=LlamaConfig(**config))
    # zero's (B, T, heads, head_dim) as HF's (B, heads, T, head_dim)
    q = tensor(case["q"], b, t, nh, d).transpose(1, 2).contiguous().requires_grad_()
    k = tensor(case["k"], b, t, nkv, d).transpose(1, 2).contiguous().requires_grad_()
    positions = torch.arange(case["offset"], case["offset"] + t).unsqueeze(0).expand(b, t)
    cos, sin = rotary(q, positions)
    q_out, k_out = apply_rotary_pos_emb(q, k, cos, sin)
    dq_out = tensor(case["dq_out"], b, t, nh, d).transpose(1, 2)
    dk_out = tensor(case["dk_out"], b, t, nkv, d).transpose(1, 2)
    ((q_out * dq_out).sum() + (k_out * dk_out).sum()).backward()
    back = lambda x: flat(x.transpose(1, 2))  # noqa: E731
    return {"inv_freq": flat(rotary.inv_freq.to(F64)), "cos": flat(cos[0]), "sin": flat(sin[0]),
            "q": back(q_out), "k": back(k_out), "dq": back(q.grad), "dk": back(k.grad)}


def swiglu(case):
    n, h = case["N"], case["H"]
    x = tensor(case["x"], n, 2 * h).requires_grad_()
    gate, up = x[:, :h], x[:, h:]
    out = ACT2FN["silu"](gate) * up
    out.backward(tensor(case["dout"], n, h))
    return {"out": flat(out), "dx": flat(x.grad)}


def main():
    with open(sys.argv[1]) as f:
        cases = json.load(f)
    result = {"rmsnorm": rmsnorm(cases["rmsnorm"]), "rope": [rope(c) for c in cases["rope"]],
              "swiglu": swiglu(cases["swiglu"])}
    with open(sys.argv[2], "w") as out:
        json.dump(result, out)


if __name__ == "__main__":
    main()
