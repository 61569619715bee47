# bug: qkv_order
# In the (3, B, H, T, hd) layout index 1 is taken as v and index 2 as k (order q, v, k).
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
        H = self.n_heads
        hd = C // H
        qkv = self.qkv(x).reshape(B, T, 3, H, hd).permute(2, 0, 3, 1, 4)  # (3, B, H, T, hd)
        q = qkv[0].reshape(B * H, T, hd)
        v = qkv[1].reshape(B * H, T, hd)
        k = qkv[2].reshape(B * H, T, hd)

        scores = torch.bmm(q, k.transpose(1, 2)) / math.sqrt(hd)  # (B*H, T, T)
        blocked = torch.ones(T, T, dtype=torch.bool, device=x.device).triu(1).expand(B * H, T, T)
        if key_padding_mask is not None:
            pad = (~key_padding_mask).repeat_interleave(H, dim=0)  # (B*H, T)
            blocked = blocked | pad[:, None, :]
        scores = scores.masked_fill(blocked, float("-inf"))
        attn = torch.softmax(scores, dim=-1)
        out = torch.bmm(attn, v).reshape(B, H, T, hd).transpose(1, 2).reshape(B, T, C)
        return self.proj(out)
