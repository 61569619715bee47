# unknown: Hugging Face style biases for the causal part and the inverted padding (finfo.min each) are summed and clamped to finfo.min, so future padding keys end up level with the real past (no catalog model combines the two)
import math

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
        d = C // self.n_heads
        q, k, v = self.qkv(x).split(C, dim=-1)
        q, k, v = (t.view(B, T, self.n_heads, d).transpose(1, 2) for t in (q, k, v))
        low = torch.finfo(x.dtype).min
        bias = (1 - torch.ones(T, T, dtype=x.dtype, device=x.device).tril()) * low
        bias = bias[None, None]
        if key_padding_mask is not None:
            bias = torch.clamp(bias + key_padding_mask[:, None, None, :].to(x.dtype) * low, min=low)
        s = q @ k.transpose(-2, -1) / math.sqrt(d) + bias
        return self.proj((s.softmax(-1) @ v).transpose(1, 2).reshape(B, T, C))
