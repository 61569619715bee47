"""The parameter count, 4 * dim * dim + 4 * dim, whatever n_heads is: a property of what the
layer computes, not of what its process says about itself."""
import pytest
import torch

from exercise.causal_self_attention.checks import DTYPES
from exercise.causal_self_attention.readout import layouts
from exercise.causal_self_attention.reference import PARAM_NAMES, random_weights
from sandbox.kit import differs
from exercise.causal_self_attention.groups import graded

STATED = {"qkv.weight": lambda d: (3 * d, d), "qkv.bias": lambda d: (3 * d,),
          "proj.weight": lambda d: (d, d), "proj.bias": lambda d: (d,)}


@graded
@pytest.mark.parametrize("n_heads", [1, 2, 4, 8])
def test_parameter_count(student, draws, loosely_gated, n_heads):
    # two widths per head count, drawn: no width is the one the count is taken at
    for dim in draws.shuffled(WIDTHS, "parameters", n_heads)[:2]:
        _check_count(student, draws, dim, n_heads)


WIDTHS = (8, 16, 24, 32)   # every one divisible by every n_heads tested


def _check_count(student, draws, dim: int, n_heads: int) -> None:
    expected = 4 * dim * dim + 4 * dim
    label = ("parameters", n_heads, dim)
    # Two instances built from different random initialisations, the grader's weights loaded into
    # the stated layers of both: any other state the layer holds (parameters hidden from the count,
    # shadowed, or made only at some widths) is initialised differently in each, and changes the
    # output. The count the worker reports explains a failure; it never earns the points alone.
    first = student.new(dim, n_heads, seed=draws.integer(1, 2 ** 30, *label, "init", 1))
    second = student.new(dim, n_heads, seed=draws.integer(1, 2 ** 30, *label, "init", 2))
    names = ", ".join(f"{k} {v}" for k, v in list(first.params.items())[:6])
    missing = [name for name in PARAM_NAMES if first.params.get(name) != STATED[name](dim)]
    if missing:
        pytest.fail(f"dim={dim}, n_heads={n_heads}: the count is checked on the stated layers, and "
                    f"{', '.join(missing)} {'is' if len(missing) == 1 else 'are'} not there as stated "
                    f"(self.qkv = nn.Linear(dim, 3 * dim), self.proj = nn.Linear(dim, dim))\nyour parameters: {names}")
    if first.n_params != expected:
        pytest.fail(f"dim={dim}, n_heads={n_heads}: got {first.n_params} parameters, expected "
                    f"4*dim*dim + 4*dim = {expected} (qkv: 3*dim*dim + 3*dim, proj: dim*dim + dim)\n"
                    f"your parameters: {names}")
    weights = random_weights(dim, seed=draws.integer(0, 2 ** 40, *label, "weights"))
    x = draws.normal(3, draws.choice((5, 6, 7), *label, "T"), dim, label=(*label, "x"))
    outs = []
    for module in (first, second):
        module.set_params({k: v.to(DTYPES["float64"]) for k, v in weights.items()})
        outs.append(module(x))
    if tuple(outs[0].shape) != tuple(x.shape) or tuple(outs[1].shape) != tuple(x.shape):
        pytest.fail(f"dim={dim}, n_heads={n_heads}: output shape {tuple(outs[0].shape)}, expected {tuple(x.shape)}")
    if differs(outs[0], outs[1], atol=1e-9, rtol=1e-7).any():
        pytest.fail(f"dim={dim}, n_heads={n_heads}: with the same weights loaded into self.qkv and self.proj, two "
                    f"instances of your layer give different outputs: the layer holds parameters or state "
                    f"beyond self.qkv and self.proj (the parameter count reported {first.n_params})")
    _only_dot_products(first, weights, x, outs[0], draws, label, dim, n_heads)


def _only_dot_products(module, weights: dict, x, out, draws, label, dim: int, n_heads: int) -> None:
    """The count's points go to a layer that attends: its queries and keys reach the output only
    through products of a query entry and a key entry. The queries scaled by a drawn c and the
    keys by 1/c leave every such product unchanged (whatever the grouping into heads, even one that
    mixes positions, the scale, the mask or the softmax's axis), so such a layer's output stays the
    same; a running mean plus some other term of q and k (tanh(q) . tanh(k), a distance) changes.
    Tried with qkv's blocks in every order a layer may read them in."""
    g = draws.generator(*label, "dot products")
    c = float(torch.rand((), generator=g, dtype=torch.float64)) * 1.5 + 0.5
    c = -c if float(torch.rand((), generator=g)) < 0.5 else c
    for q_rows, k_rows, _v in layouts(dim, n_heads):
        changed = {name: value.clone() for name, value in weights.items()}
        for name in ("qkv.weight", "qkv.bias"):
            changed[name][q_rows] *= c
            changed[name][k_rows] /= c
        module.set_params({k: v.to(DTYPES["float64"]) for k, v in changed.items()})
        if not differs(module(x), out, atol=1e-9, rtol=1e-7).any():
            return
    pytest.fail(f"dim={dim}, n_heads={n_heads}: with the grader's weights, scaling the queries by {c:.3g} and "
                f"the keys by 1/{c:.3g} (every score q . k unchanged) changes your layer's output: it "
                f"uses the queries and keys other than through their dot products, so it does not attend "
                f"(the count's points go to a layer that attends)")
