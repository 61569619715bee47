# unknown: the scores are never used: each position takes the plain mean of the values it may see (uniform weights over the allowed keys instead of a softmax of q.k)
import torch
import torch.nn as nn


class CausalSelfAttention(nn.Module):
    def __init__(self, dim, n_heads):
        super().__init__()
        self.n_heads = n_heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x, key_padding_mask=None):
        B, T, C = x.shape
        H = self.n_heads
        q, k, v = self.qkv(x).split(C, dim=-1)
        v = v.view(B, T, H, C // H).transpose(1, 2)                    # (B, H, T, hd)
        weights = torch.ones(T, T, device=x.device, dtype=x.dtype).tril()[None, None]
        if key_padding_mask is not None:
            weights = weights * key_padding_mask[:, None, None, :].to(x.dtype)
        weights = weights / weights.sum(dim=-1, keepdim=True)           # average over the past
        out = (weights @ v).transpose(1, 2).reshape(B, T, C)
        return self.proj(out)
