# bug: mask_fill_not_neg_inf
# SDPA gets a float mask made of a correct 0/-inf causal bias plus key_padding_mask.float() (1 for real, 0 for padding): the padding part is added as a 0/1 value instead of selecting keys.
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
        H = self.n_heads
        q, k, v = self.qkv(x).split(C, dim=-1)
        q, k, v = (t.view(B, T, H, C // H).transpose(1, 2) for t in (q, k, v))
        causal = torch.full((T, T), float("-inf"), dtype=x.dtype, device=x.device).triu(1)
        attn_mask = causal[None, None]
        if key_padding_mask is not None:
            attn_mask = attn_mask + key_padding_mask.float().to(x.dtype)[:, None, None, :]
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask)
        return self.proj(y.transpose(1, 2).reshape(B, T, C))
