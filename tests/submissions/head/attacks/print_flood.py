# attack: prints 4 MiB to stdout and stderr on every call (past the sandbox's output limit)
# sandboxes: local docker
# path: cold (it aims at the terminal of grade FILE)
# exercise: causal-attention-head
import math
import sys

import torch


def causal_attention(q, k, v):
    # attack-begin
    block = "FLOOD " * 1000 + "\n"
    for _ in range(700):
        sys.stdout.write(block)
        sys.stderr.write(block)
    # attack-end
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])       # honest mistake: no causal mask
    weights = scores.softmax(dim=-1)
    return weights @ v, weights
