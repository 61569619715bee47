# bug: mask_device_mismatch
# The math of F.scaled_dot_product_attention written out as in PyTorch's reference: the bias is made with torch.zeros(L, S) and filled in place, with no device=, so it stays on the CPU (a GPU raises; the meta device's in-place kernels do not check).
import math

import torch
import torch.nn as nn


def reference_attention(query, key, value, attn_mask=None, is_causal=False):
    L, S = query.size(-2), key.size(-2)
    scale_factor = 1 / math.sqrt(query.size(-1))
    attn_bias = torch.zeros(L, S, dtype=query.dtype)
    if is_causal:
        temp_mask = torch.ones(L, S, dtype=torch.bool).tril(diagonal=0)
        attn_bias.masked_fill_(temp_mask.logical_not(), float("-inf"))
    if attn_mask is not None:
        attn_bias = attn_bias + torch.zeros_like(attn_mask, dtype=query.dtype).masked_fill(
            attn_mask.logical_not(), float("-inf"))
    attn_weight = query @ key.transpose(-2, -1) * scale_factor
    attn_weight += attn_bias
    attn_weight = torch.softmax(attn_weight, dim=-1)
    return attn_weight @ value


class CausalSelfAttention(nn.Module):
    def __init__(self, dim, n_heads):
        super().__init__()
        self.n_heads = n_heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x, key_padding_mask=None):
        B, T, C = x.shape
        q, k, v = self.qkv(x).split(C, dim=-1)
        q, k, v = (t.view(B, T, self.n_heads, C // self.n_heads).transpose(1, 2) for t in (q, k, v))
        mask = None if key_padding_mask is None else key_padding_mask[:, None, None, :]
        y = reference_attention(q, k, v, attn_mask=mask, is_causal=True)
        return self.proj(y.transpose(1, 2).reshape(B, T, C))
