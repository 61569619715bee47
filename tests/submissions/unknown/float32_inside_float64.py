# unknown: the attention core is always run in float32 (q, k, v cast with .float(), the result cast back), so a float64 input gets only float32 accuracy (errors around 1e-7, far above float64 tolerance); float32 inputs are right
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
        nh = self.n_heads
        q, k, v = self.qkv(x).split(C, dim=-1)
        # SDPA's fast kernels like float32: compute attention in float32
        q, k, v = (t.float().reshape(B, T, nh, C // nh).transpose(1, 2) for t in (q, k, v))
        mask = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
        if key_padding_mask is not None:
            mask = mask & key_padding_mask[:, None, None, :]
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        y = y.transpose(1, 2).reshape(B, T, C).to(x.dtype)
        return self.proj(y)
