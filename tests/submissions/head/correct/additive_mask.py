import math

import torch


def causal_attention(q, k, v):
    T = q.shape[1]
    mask = torch.full((T, T), float("-inf"), dtype=q.dtype, device=q.device).triu(diagonal=1)
    scores = q.matmul(k.mT) / math.sqrt(q.shape[-1]) + mask          # 0 on and below the diagonal
    weights = scores.softmax(-1)
    return weights.matmul(v), weights
