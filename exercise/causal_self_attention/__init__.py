"""Causal multi-head self-attention, the layer at the centre of every GPT."""
from pathlib import Path

from exercise import Exercise
from sandbox.limits import Limits
from sandbox.worker import EntrySpec

EXERCISE = Exercise(
    name="causal-self-attention",
    version="1",
    title="Causal multi-head self-attention",
    entry=EntrySpec(class_name="CausalSelfAttention", init_args=("dim", "n_heads"),
                    forward_args=("x", "key_padding_mask"), forward_required=1,
                    # nn.MultiheadAttention's two paths, and nn.TransformerEncoderLayer's fused one
                    watch=("torch.nn.functional.multi_head_attention_forward", "torch._native_multi_head_attention",
                           "torch._transformer_encoder_layer_fwd"),
                    # the meta-device probe (test_07_advice.py) needs it; 0.8 s, so load it early
                    preload=("torch._dynamo",)),
    directory=Path(__file__).parent,
    limits=Limits(),
)
