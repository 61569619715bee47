# attack: a leaky (unmasked) output whose leak is hidden from autograd (.detach() on the difference to a causal one), so the gradients look causal
# sandboxes: local
# exercise: causal-attention-head
# (local only: it attacks the tests' logic, which is the same in every sandbox)
import math

import torch


def causal_attention(q, k, v):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])       # honest mistake: no causal mask
    weights = scores.softmax(dim=-1)
    out = weights @ v
    # attack-begin
    T = q.shape[1]
    causal = scores.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf")).softmax(-1) @ v
    out = causal + (out - causal).detach()                          # forward leaks, backward is causal
    # attack-end
    return out, weights
