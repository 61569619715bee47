# bug: uses_forbidden_builtin
# forward delegates the attention to a torch.nn.MultiheadAttention that shares the qkv and proj parameters.
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
        mha = nn.MultiheadAttention(self.dim, self.n_heads, batch_first=True, device=x.device, dtype=x.dtype)
        # reuse our own parameters inside the builtin module
        mha.in_proj_weight = self.qkv.weight
        mha.in_proj_bias = self.qkv.bias
        mha.out_proj = self.proj
        mha.train(self.training)
        causal = torch.ones(T, T, dtype=torch.bool, device=x.device).triu(1)
        kpm = None if key_padding_mask is None else ~key_padding_mask
        out, _ = mha(x, x, x, attn_mask=causal, key_padding_mask=kpm, need_weights=False)
        return out
