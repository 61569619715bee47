# bug: uses_forbidden_builtin
# forward calls F.multi_head_attention_forward with the module's weights instead of implementing attention.
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
        T = x.shape[1]
        xt = x.transpose(0, 1)  # (T, B, C): the functional API is sequence-first
        causal = torch.ones(T, T, dtype=torch.bool, device=x.device).triu(1)
        out, _ = F.multi_head_attention_forward(
            xt, xt, xt, self.dim, self.n_heads,
            self.qkv.weight, self.qkv.bias,
            None, None, False, 0.0,
            self.proj.weight, self.proj.bias,
            training=self.training,
            key_padding_mask=None if key_padding_mask is None else ~key_padding_mask,
            need_weights=False,
            attn_mask=causal,
        )
        return out.transpose(0, 1)
