import torch
import torch.nn as nn
import torch.nn.functional as F


class CausalSelfAttention(nn.Module):
    def __init__(self, dim, n_heads):
        super().__init__()
        self.n_heads = n_heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x, key_padding_mask=None):
        B, T, C = x.shape
        H, hd = self.n_heads, C // self.n_heads

        def fold(t):  # (B, T, C) -> (B*H, T, hd)
            return t.reshape(B, T, H, hd).permute(0, 2, 1, 3).reshape(B * H, T, hd)

        q, k, v = (fold(t) for t in self.qkv(x).split(C, dim=-1))

        allowed = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
        allowed = allowed.unsqueeze(0).expand(B * H, T, T)
        if key_padding_mask is not None:
            keys = key_padding_mask.repeat_interleave(H, dim=0)       # (B*H, T), matches fold order
            allowed = allowed & keys.unsqueeze(1)

        o = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed)   # (B*H, T, hd)
        o = o.reshape(B, H, T, hd).permute(0, 2, 1, 3).reshape(B, T, C)
        return self.proj(o)
