import math
import torch
import torch.nn as nn
import torch.nn.functional as F


class CausalSelfAttention(nn.Module):
    def __init__(self, dim, n_heads):
        super(CausalSelfAttention, self).__init__()
        self.dim = dim
        self.n_heads = n_heads
        self.head_dim = dim // n_heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x, key_padding_mask=None):
        T = x.size(1)
        qkv = self.qkv(x)
        Q = qkv[:, :, 0 : self.dim]
        K = qkv[:, :, self.dim : 2 * self.dim]
        V = qkv[:, :, 2 * self.dim : 3 * self.dim]

        blocked = torch.triu(torch.ones(T, T, device=x.device), diagonal=1).bool()
        blocked = blocked.unsqueeze(0)  # (1, T, T)
        if key_padding_mask is not None:
            blocked = blocked | (~key_padding_mask).unsqueeze(1)  # (B, T, T)

        heads = []
        for h in range(self.n_heads):
            cols = slice(h * self.head_dim, (h + 1) * self.head_dim)
            qh, kh, vh = Q[:, :, cols], K[:, :, cols], V[:, :, cols]   # (B, T, hd)
            s = torch.matmul(qh, kh.transpose(1, 2)) / math.sqrt(self.head_dim)
            s = s.masked_fill(blocked, float("-inf"))
            p = F.softmax(s, dim=-1)
            heads.append(torch.matmul(p, vh))
        return self.proj(torch.cat(heads, dim=-1))
