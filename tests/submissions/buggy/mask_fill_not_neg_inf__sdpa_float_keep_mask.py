# bug: mask_fill_not_neg_inf
# The combined causal and padding keep-mask (True = attend) is turned into a 0/1 float and given to SDPA, which adds a float mask to the scores instead of using it to select keys.
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
        q, k, v = self.qkv(x).split(C, dim=-1)
        q, k, v = (t.view(B, T, self.n_heads, C // self.n_heads).transpose(1, 2) for t in (q, k, v))
        keep = torch.tril(torch.ones(T, T, dtype=torch.bool, device=x.device))[None, None]
        if key_padding_mask is not None:
            keep = keep & key_padding_mask[:, None, None, :]
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=keep.to(q.dtype))   # should stay boolean
        return self.proj(y.transpose(1, 2).reshape(B, T, C))
