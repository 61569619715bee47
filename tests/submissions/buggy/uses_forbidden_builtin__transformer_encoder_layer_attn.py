# bug: uses_forbidden_builtin
# The layer borrows the self_attn (an nn.MultiheadAttention) of a torch.nn.TransformerEncoderLayer and points it at the module's own qkv and proj parameters, instead of computing attention itself.
import torch
import torch.nn as nn


class CausalSelfAttention(nn.Module):
    def __init__(self, dim, n_heads):
        super().__init__()
        self.dim = dim
        self.n_heads = n_heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x, key_padding_mask=None):
        T = x.shape[1]
        layer = nn.TransformerEncoderLayer(self.dim, self.n_heads, dropout=0.0, batch_first=True,
                                           device=x.device, dtype=x.dtype)
        attn = layer.self_attn
        attn.in_proj_weight = self.qkv.weight
        attn.in_proj_bias = self.qkv.bias
        attn.out_proj = self.proj
        blocked = nn.Transformer.generate_square_subsequent_mask(T, device=x.device, dtype=x.dtype)
        ignore = None if key_padding_mask is None else ~key_padding_mask
        if ignore is not None:
            ignore = torch.zeros_like(ignore, dtype=x.dtype).masked_fill(ignore, float("-inf"))
        out, _ = attn(x, x, x, attn_mask=blocked, key_padding_mask=ignore, need_weights=False)
        return out
