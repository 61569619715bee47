# bug: padding_inverted
# Hugging Face style additive padding mask: mask * finfo(dtype).min is added to the scores, but the `1 -` is forgotten, so the real keys get the huge penalty and real rows become a uniform average.
import math

import torch
import torch.nn as nn


class CausalSelfAttention(nn.Module):
    def __init__(self, dim, n_heads):
        super().__init__()
        self.num_heads = n_heads
        self.head_dim = dim // n_heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x, key_padding_mask=None):
        bsz, tgt_len, embed_dim = x.shape
        q, k, v = self.qkv(x).chunk(3, dim=-1)

        def shape(t):
            return t.view(bsz, tgt_len, self.num_heads, self.head_dim).transpose(1, 2)

        q, k, v = shape(q), shape(k), shape(v)
        attn_weights = torch.matmul(q, k.transpose(2, 3)) / math.sqrt(self.head_dim)
        if key_padding_mask is not None:
            expanded = key_padding_mask[:, None, None, :].to(x.dtype)
            attn_weights = attn_weights + expanded * torch.finfo(x.dtype).min   # should be (1 - expanded)
        causal = torch.ones(tgt_len, tgt_len, dtype=torch.bool, device=x.device).tril()
        attn_weights = attn_weights.masked_fill(~causal, float("-inf"))
        attn_probs = attn_weights.softmax(dim=-1)
        out = torch.matmul(attn_probs, v).transpose(1, 2).reshape(bsz, tgt_len, embed_dim)
        return self.proj(out)
