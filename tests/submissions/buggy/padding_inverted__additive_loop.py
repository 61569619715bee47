# bug: padding_inverted
# In the per-head loop the padding penalty -1e9 * key_padding_mask is added where the mask is True, i.e. to the real tokens, leaving the padding keys as the only unpenalised ones.
import math
import torch
import torch.nn as nn
import torch.nn.functional as F


class CausalSelfAttention(nn.Module):
    def __init__(self, dim, n_heads):
        super().__init__()
        self.dim = dim
        self.n_heads = n_heads
        self.head_dim = dim // n_heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x, key_padding_mask=None):
        B, T, C = x.shape
        Q, K, V = self.qkv(x).split(self.dim, dim=2)
        causal = torch.tril(torch.ones(T, T, device=x.device))
        penalty = 0.0
        if key_padding_mask is not None:
            penalty = -1e9 * key_padding_mask[:, None, :].to(x.dtype)   # (B, 1, T)

        heads = []
        for h in range(self.n_heads):
            sl = slice(h * self.head_dim, (h + 1) * self.head_dim)
            s = Q[:, :, sl] @ K[:, :, sl].transpose(1, 2) / math.sqrt(self.head_dim)
            s = s.masked_fill(causal == 0, float("-inf")) + penalty
            heads.append(F.softmax(s, dim=-1) @ V[:, :, sl])
        return self.proj(torch.cat(heads, dim=-1))
