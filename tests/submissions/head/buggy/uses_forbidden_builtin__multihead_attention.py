# bug: uses_forbidden_builtin
import torch


def causal_attention(q, k, v):
    B, T, d_k = q.shape
    mha = torch.nn.MultiheadAttention(d_k, 1, bias=False, batch_first=True).to(q.dtype)
    with torch.no_grad():
        mha.in_proj_weight.copy_(torch.eye(d_k, dtype=q.dtype).repeat(3, 1))
        mha.out_proj.weight.copy_(torch.eye(d_k, dtype=q.dtype))
    future = torch.ones(T, T, dtype=torch.bool).triu(1)
    return mha(q, k, v, attn_mask=future, need_weights=True)
