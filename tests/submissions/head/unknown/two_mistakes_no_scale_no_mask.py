# outside the catalog: two mistakes at once (no scale, no causal mask); the diagnosis names single mistakes only
import torch


def causal_attention(q, k, v):
    weights = torch.softmax(q @ k.transpose(-2, -1), dim=-1)
    return weights @ v, weights
