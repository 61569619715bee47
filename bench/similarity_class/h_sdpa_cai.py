import torch
import torch.nn as nn
import torch.nn.functional as F


class CausalSelfAttention(nn.Module):
    def __init__(self, dim, n_heads):
        super().__init__()
        assert dim % n_heads == 0, "dim must be divisible by n_heads"
        self.h = n_heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x, key_padding_mask=None):
        b, t, d = x.shape
        qkv = self.qkv(x).reshape(b, t, 3, self.h, d // self.h)
        q = qkv[:, :, 0].transpose(1, 2)   # (b, h, t, hd)
        k = qkv[:, :, 1].transpose(1, 2)
        v = qkv[:, :, 2].transpose(1, 2)
        pos = torch.arange(t, device=x.device)
        allowed = pos.unsqueeze(0) <= pos.unsqueeze(1)   # (t, t), query rows
        allowed = allowed.unsqueeze(0).unsqueeze(0)
        if key_padding_mask is not None:
            allowed = torch.logical_and(allowed, key_padding_mask.unsqueeze(1).unsqueeze(2))
        attn = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed)
        return self.proj(attn.transpose(1, 2).reshape(b, t, d))
