import torch
import torch.nn as nn

# I ran out of time, placeholder
CausalSelfAttention = 42
