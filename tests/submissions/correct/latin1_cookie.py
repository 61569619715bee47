# -*- coding: latin-1 -*-
# Lösung von Zoé: attention causale à plusieurs têtes (encodage latin-1, pas UTF-8).
import math

import torch
import torch.nn as nn


class CausalSelfAttention(nn.Module):
    def __init__(self, dim, n_heads):
        super().__init__()
        self.n_heads = n_heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x, key_padding_mask=None):
        B, T, C = x.shape
        H = self.n_heads
        d = C // H
        q, k, v = self.qkv(x).split(C, dim=-1)
        q = q.view(B, T, H, d).transpose(1, 2)   # (B, H, T, d) -- tête h = colonnes h*d:(h+1)*d
        k = k.view(B, T, H, d).transpose(1, 2)
        v = v.view(B, T, H, d).transpose(1, 2)

        s = q @ k.transpose(-2, -1) / math.sqrt(d)
        # masque causal : la position t ne voit que les clés 0..t (é = 0xE9 dans ce fichier)
        permis = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
        if key_padding_mask is not None:
            permis = permis & key_padding_mask[:, None, None, :]
        s = s.masked_fill(~permis, float("-inf"))
        poids = s.softmax(dim=-1)
        return self.proj((poids @ v).transpose(1, 2).reshape(B, T, C))
