"""blocks.layers.Conv2d: Equinox's convolution, computed as a patch matmul on the CPU."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from canter.common.blocks.initializers import orthogonal_linear
from canter.common.blocks.layers import MLP, Conv2d

SHAPES = [  # in, out, kernel, stride, padding, input size
    (4, 32, 8, 4, 0, 84),  # the Nature CNN's three
    (32, 64, 4, 2, 0, 20),
    (64, 64, 3, 1, 0, 9),
    (7, 16, 3, 1, 0, 10),  # MinAtar's
    (3, 5, 3, 2, 1, 11),  # padded, a stride that leaves a border unused
    (3, 5, 4, 2, 1, 11),  # a stride that divides the kernel (space to depth), border unused
    (2, 3, (2, 3), (1, 2), ((1, 0), (2, 1)), 7),  # rectangular kernel, uneven padding
    (2, 3, (3, 4), (3, 2), ((1, 0), (2, 1)), 8),  # the same, folded to 1 x 2 blocks
]


# Each shape compiles its own program (5-10 s on 2 busy cores, 15-20 s for the Nature CNN's first
# layer on 84x84 frames): the default tier checks MinAtar's, the padded strides (one folded into
# the channels) and the uneven rectangles (one folded), the slow tier the Nature CNN's three.
SLOW_SHAPES = [pytest.param(s, marks=pytest.mark.slow) if s[1] >= 32 else s for s in SHAPES]


@pytest.mark.parametrize("shape", SLOW_SHAPES, ids=[str(s[:5]) for s in SHAPES])
def test_same_numbers_and_gradients_as_equinox(shape):
    cin, cout, kernel, stride, padding, size = shape
    key = jax.random.key(0)
    stock = eqx.nn.Conv2d(cin, cout, kernel, stride=stride, padding=padding, key=key)
    patch = Conv2d(cin, cout, kernel, stride=stride, padding=padding, key=key)
    for a, b in zip(jax.tree.leaves(stock), jax.tree.leaves(patch), strict=True):
        assert jnp.array_equal(a, b)  # the same parameters
    x = jax.random.normal(jax.random.key(1), (3, cin, size, size))

    # Each layer's outputs and gradients in one compiled program (run op by op, the many small
    # programs took 7-10 s a shape on 2 busy cores).
    @eqx.filter_jit
    def outputs_and_grads(model, x):
        loss = lambda m, x: jnp.sum(jax.vmap(m)(x) ** 2)  # noqa: E731
        return jax.vmap(model)(x), jax.grad(loss, argnums=(0, 1))(model, x)

    (stock_y, (stock_model, stock_x)), (patch_y, (patch_model, patch_x)) = (
        outputs_and_grads(stock, x),
        outputs_and_grads(patch, x),
    )
    np.testing.assert_allclose(patch_y, stock_y, rtol=1e-5, atol=1e-5)
    for a, b in [(stock_model.weight, patch_model.weight), (stock_model.bias, patch_model.bias)]:
        np.testing.assert_allclose(b, a, rtol=1e-4, atol=1e-4 * float(jnp.abs(a).max()))
    np.testing.assert_allclose(patch_x, stock_x, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("layout", ["channels first", "channels last"])
def test_a_cpu_loop_body_holds_matmuls_and_a_gpu_one_the_convolution(layout):
    # What the layer is for: inside a scan XLA:CPU runs a convolution as a slow loop nest. The
    # platform the program is lowered for decides, not the default backend (here the CPU).
    conv = Conv2d(4, 16, 3, key=jax.random.key(0))
    apply, shape = (
        (conv, (2, 5, 4, 10, 10))
        if layout == "channels first"
        else (conv.channels_last, (2, 5, 10, 10, 4))
    )
    body = lambda c, x: (c + jax.vmap(apply)(x).sum(), None)  # noqa: E731
    program = jax.jit(lambda x: jax.lax.scan(body, 0.0, x)).trace(jnp.ones(shape))
    cpu, cuda = (program.lower(lowering_platforms=(p,)).as_text() for p in ("cpu", "cuda"))
    assert "stablehlo.convolution" not in cpu and "stablehlo.dot_general" in cpu
    assert "stablehlo.convolution" in cuda and "stablehlo.dot_general" not in cuda


@pytest.mark.parametrize("kwargs", [dict(stride=2, padding=1), dict(dilation=2)])
def test_channels_last_is_equinox_convolution_on_transposed_arrays(kwargs):
    # A folded stride and padding through the patch matmul; a dilation through the stock kernel.
    key = jax.random.key(0)
    stock = eqx.nn.Conv2d(3, 5, 4, key=key, **kwargs)
    conv = Conv2d(3, 5, 4, key=key, **kwargs)
    x = jax.random.normal(jax.random.key(1), (2, 11, 11, 3))  # (batch, height, width, channels)

    @eqx.filter_jit
    def outputs_and_grads(model, apply, x):
        loss = lambda m, x: jnp.sum(jax.vmap(apply(m))(x) ** 2)  # noqa: E731
        return jax.vmap(apply(model))(x), jax.grad(loss, argnums=(0, 1))(model, x)

    def transposed(m):  # Equinox's layer on channels-last arrays, by transposing around it
        return lambda x: jnp.transpose(m(jnp.transpose(x, (2, 0, 1))), (1, 2, 0))

    y, (grads, grad_x) = outputs_and_grads(conv, lambda m: m.channels_last, x)
    want_y, (want_grads, want_x) = outputs_and_grads(stock, transposed, x)
    assert y.shape == want_y.shape == (2, 5, 5, 5)
    np.testing.assert_allclose(y, want_y, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(grads.weight, want_grads.weight, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(grads.bias, want_grads.bias, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(grad_x, want_x, rtol=1e-4, atol=1e-4)


def test_dilated_and_grouped_convolutions_run_the_stock_kernel():
    key = jax.random.key(0)
    for kwargs in [dict(dilation=2), dict(groups=2)]:
        patch, stock = (cls(4, 6, 3, key=key, **kwargs) for cls in (Conv2d, eqx.nn.Conv2d))
        x = jax.random.normal(key, (4, 9, 9))
        assert "conv_general_dilated" in str(jax.make_jaxpr(patch)(x))
        np.testing.assert_allclose(patch(x), stock(x), rtol=1e-6)


def test_mlp_keeps_the_two_layer_init_and_adds_hidden_layers_with_depth():
    key = jax.random.key(7)
    keys = jax.random.split(key, 3)
    expected = [
        orthogonal_linear(5, 8, 2**0.5, keys[0]),
        orthogonal_linear(8, 8, 2**0.5, keys[1]),
        orthogonal_linear(8, 3, 0.01, keys[2]),
    ]
    mlp = MLP((5, 8, 3), 0.01, key)
    for got, want in zip(mlp.layers, expected, strict=True):
        assert jnp.array_equal(got.weight, want.weight) and jnp.array_equal(got.bias, want.bias)
    deep = MLP((5, 8, 3), 0.01, key, activation="relu", depth=3)
    assert [layer.weight.shape for layer in deep.layers] == [(8, 5), (8, 8), (8, 8), (3, 8)]
    x = jnp.linspace(-1.0, 1.0, 5)
    hidden = x
    for layer in deep.layers[:-1]:
        hidden = jax.nn.relu(layer(hidden))
    np.testing.assert_allclose(deep(x), deep.layers[-1](hidden), rtol=1e-6)


def test_mlp_lecun_init_is_flax_dense_layer_by_layer():
    """ppo_rnd's `--rnd-init lecun`: every layer as flax.linen.Dense draws it (LeCun-normal
    weights of variance 1 / fan_in, truncated at two standard deviations; zero biases), the gains
    ignored, from the same per-layer keys as the orthogonal init."""
    key = jax.random.key(3)
    keys = jax.random.split(key, 4)
    mlp = MLP((300, 200, 100), 1.0, key, activation="relu", depth=3, init="lecun")
    sizes = [(300, 200), (200, 200), (200, 200), (200, 100)]
    for layer, (fan_in, fan_out), k in zip(mlp.layers, sizes, keys, strict=True):
        want = jax.nn.initializers.lecun_normal()(k, (fan_in, fan_out)).T
        assert jnp.array_equal(layer.weight, want) and not jnp.any(layer.bias)
        assert abs(float(jnp.std(layer.weight)) * fan_in**0.5 - 1.0) < 0.05
        assert float(jnp.max(jnp.abs(layer.weight))) * fan_in**0.5 < 2.0 / 0.8796 + 1e-3


def test_a_stride_that_divides_the_kernel_is_folded_into_the_channels():
    # The fold is the speed (benchmarks/speed/conv_cpu.py): a 4x4 kernel of stride 2 concatenates
    # 2 x 2 slices of 4 x channels, not 16 strided ones; a stride that does not divide stays
    # strided.
    def pieces(kernel, stride):
        conv = Conv2d(3, 5, kernel, stride=stride, key=jax.random.key(0))
        jaxpr = jax.make_jaxpr(conv.patches_last)(jnp.ones((11, 11, 3)))
        (concat,) = [e for e in jaxpr.eqns if e.primitive.name == "concatenate"]
        return [v.aval.shape[-1] for v in concat.invars]

    assert pieces(4, 2) == [12] * 4
    assert pieces(3, 2) == [3] * 9
