"""The parameter count, 4 * dim * dim + 4 * dim, whatever n_heads is."""
import pytest


@pytest.mark.points(10)
@pytest.mark.parametrize("n_heads", [1, 2, 4, 8])
def test_parameter_count(student, gated, n_heads):
    """4 * dim * dim + 4 * dim parameters, the same for every n_heads"""
    dim = 32
    module = student.new(dim, n_heads)
    expected = 4 * dim * dim + 4 * dim
    if module.n_params != expected:
        names = ", ".join(f"{k} {v}" for k, v in list(module.params.items())[:6])
        pytest.fail(f"dim={dim}, n_heads={n_heads}: got {module.n_params} parameters, expected "
                    f"4*dim*dim + 4*dim = {expected} (qkv: 3*dim*dim + 3*dim, proj: dim*dim + dim)\n"
                    f"your parameters: {names}")
