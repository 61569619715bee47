# outside the catalog: the upper triangle kept, only past T = 32 (a mistake outside the catalog that shows at some lengths only: the models fitted where it shows must still not name it)
import math

import torch


def causal_attention(q, k, v):
    T = q.shape[1]
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    keep = torch.ones(T, T, dtype=torch.bool)
    keep = keep.triu() if T > 32 else keep.tril()     # the long-sequence branch flips the triangle
    weights = scores.masked_fill(~keep, float("-inf")).softmax(dim=-1)
    return weights @ v, weights
