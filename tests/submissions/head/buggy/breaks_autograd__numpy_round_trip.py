# bug: breaks_autograd
import math

import numpy as np
import torch


def causal_attention(q, k, v):
    T, d_k = q.shape[1], q.shape[2]
    scores = np.matmul(q.numpy(), np.swapaxes(k.numpy(), -1, -2)) / math.sqrt(d_k)
    scores = torch.from_numpy(scores)
    weights = scores.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf")).softmax(-1)
    return weights @ v, weights
