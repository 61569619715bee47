import math
import torch
import torch.nn as nn


class CausalSelfAttention(nn.Module):
    """Batched-matmul version: heads are folded into the batch axis, (B*H, T, hd)."""

    def __init__(self, dim, n_heads):
        super().__init__()
        self.n_heads = n_heads
        self.head_dim = dim // n_heads
        self.scale = 1.0 / math.sqrt(self.head_dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def _fold(self, t, B, T):
        # (B, T, H*hd) -> (B*H, T, hd), batch-major then head
        return t.reshape(B, T, self.n_heads, self.head_dim).transpose(1, 2).reshape(B * self.n_heads, T, self.head_dim)

    def forward(self, x, key_padding_mask=None):
        B, T, C = x.shape
        q, k, v = self.qkv(x).split(C, dim=-1)
        q, k, v = self._fold(q, B, T), self._fold(k, B, T), self._fold(v, B, T)

        # additive mask (B*H, T, T): 0 = allowed, -inf = blocked
        neg = torch.full((T, T), float("-inf"), dtype=x.dtype, device=x.device).triu(1)
        bias = neg.expand(B * self.n_heads, T, T).clone()
        if key_padding_mask is not None:
            pad = ~key_padding_mask.repeat_interleave(self.n_heads, dim=0)  # (B*H, T)
            bias = bias.masked_fill(pad[:, None, :], float("-inf"))

        # baddbmm: bias + scale * q @ k^T in one call
        scores = torch.baddbmm(bias, q, k.transpose(1, 2), beta=1.0, alpha=self.scale)
        attn = torch.softmax(scores, dim=-1)
        out = torch.bmm(attn, v)                                   # (B*H, T, hd)
        out = out.view(B, self.n_heads, T, self.head_dim).transpose(1, 2).reshape(B, T, C)
        return self.proj(out)
