import torch
import torch.nn as nn
import torch.nn.functional as F


class CausalSelfAttention(nn.Module):
    def __init__(self, dim, n_heads):
        super().__init__()
        self.dim = dim
        self.n_heads = n_heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x, key_padding_mask=None):
        Bn, Tn, _ = x.shape
        heads = self.n_heads
        dh = self.dim // heads
        packed = self.qkv(x)
        q = packed[..., : self.dim].reshape(Bn, Tn, heads, dh).transpose(1, 2)
        k = packed[..., self.dim : 2 * self.dim].reshape(Bn, Tn, heads, dh).transpose(1, 2)
        v = packed[..., 2 * self.dim :].reshape(Bn, Tn, heads, dh).transpose(1, 2)

        # additive mask: 0 = allowed, -inf = blocked
        add = torch.zeros(Tn, Tn, dtype=x.dtype, device=x.device)
        blocked = torch.ones(Tn, Tn, dtype=torch.bool, device=x.device).triu(1)
        add = add.masked_fill(blocked, float("-inf"))[None, None]
        if key_padding_mask is not None:
            padadd = torch.zeros(key_padding_mask.shape, dtype=x.dtype, device=x.device)
            padadd = padadd.masked_fill(~key_padding_mask, float("-inf"))
            add = add + padadd[:, None, None, :]
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=add)
        y = y.transpose(1, 2).reshape(Bn, Tn, self.dim)
        return self.proj(y)
