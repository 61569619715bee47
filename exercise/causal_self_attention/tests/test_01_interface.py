"""The class, its two layers, and the shape of what forward returns."""
import pytest

from exercise.causal_self_attention.reference import right_padding
from exercise.causal_self_attention.groups import graded

LINEAR = "torch.nn.modules.linear.Linear"


@graded
@pytest.mark.parametrize("dim,n_heads", [(24, 4), (8, 1)], ids=["dim24-h4", "dim8-h1"])
def test_layers(student, dim, n_heads):
    module = student.new(dim, n_heads)
    problems = []
    for name, weight, bias, spelled in (("qkv", (3 * dim, dim), (3 * dim,), "nn.Linear(dim, 3 * dim)"),
                                        ("proj", (dim, dim), (dim,), "nn.Linear(dim, dim)")):
        if name not in module.children:
            problems.append(f"self.{name} is missing: __init__ must set self.{name} = {spelled}")
            continue
        if LINEAR not in module.children[name]:
            problems.append(f"self.{name} is a {module.children[name][0].rsplit('.', 1)[-1]}, "
                            f"expected {spelled}")
            continue
        got_w, got_b = module.params.get(f"{name}.weight"), module.params.get(f"{name}.bias")
        if got_w != weight:
            problems.append(f"self.{name}.weight: got shape {got_w}, expected {weight} ({spelled})")
        if got_b != bias:
            problems.append(f"self.{name}.bias: got {'shape ' + str(got_b) if got_b else 'no bias'}, "
                            f"expected shape {bias} (keep nn.Linear's default bias=True)")
    if problems:
        pytest.fail(f"with dim={dim}, n_heads={n_heads}:\n" + "\n".join(problems))


@graded
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_output_shape(student, draws, dtype):
    module = student.new(24, 4, dtype=dtype)
    x = draws.normal(2, 5, 24, label=("shape", dtype), dtype=dtype)
    masks = (None, right_padding([5, 3], 5))
    for mask, out in zip(masks, module.map([(x,), (x, masks[1])])):
        call = "forward(x, key_padding_mask)" if mask is not None else "forward(x)"
        if tuple(out.shape) != tuple(x.shape):
            pytest.fail(f"{call} with x of shape {tuple(x.shape)}: got an output of shape "
                        f"{tuple(out.shape)}, expected {tuple(x.shape)} (B, T, dim)")
        if out.dtype != x.dtype:
            pytest.fail(f"{call} with {dtype} input: got a {str(out.dtype).removeprefix('torch.')} "
                        f"output, expected {dtype} (compute in the input's dtype)")
