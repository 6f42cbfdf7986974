"""The PPO files' `MLP`, and `Conv2d`: Equinox's convolution as one matmul of patches on the CPU.

`MLP` is the actor and the critic of ppo.py and ppo_continuous.py, and the heads of ppo_rnn.py:
`depth` hidden layers of one width, tanh, ReLU or swish (Brax's networks), orthogonal weights
(gain sqrt(2), or the caller's `gain`: PureJaxRL's and Craftax_Baselines' recurrent heads use 2)
and zero biases, then a linear output of a gain the caller chooses (0.01 for logits and means, 1
for values), as CleanRL's and PureJaxRL's PPO build them.

`Conv2d`:

XLA:CPU compiles a convolution that sits inside a loop (`lax.scan`, `while_loop`: every
training step runs inside the trainer's scan over iterations) as a generated loop nest instead
of its library kernel. The Nature CNN's gradient on 256 frames takes about 10x longer there than
as the matmul below (benchmarks/README.md has the figures); MinAtar's small convolutions lose
less. A matmul is not affected. So on the CPU this layer gathers, for every kernel offset, the
strided slice of the input that offset sees, concatenates them along the channels and multiplies
by the weights once. Same parameters (an `eqx.nn.Conv2d`, so initialisers and checkpoints do
not change), same numbers to float tolerance (tests/test_layers.py). On other backends, and for
dilated, grouped or non-zero-padded convolutions, the stock convolution runs.
"""

import equinox as eqx
import jax
import jax.numpy as jnp
from canter.common.blocks.initializers import orthogonal_linear
from jaxtyping import Array, Float, PRNGKeyArray

ACTIVATIONS = {"tanh": jnp.tanh, "relu": jax.nn.relu, "swish": jax.nn.swish}


class MLP(eqx.Module):
    """`depth` hidden layers (`activation`: tanh, relu or swish) of `sizes` (in, hidden, out);
    hidden gain `gain`, output gain `out_gain`."""

    layers: tuple[eqx.nn.Linear, ...]
    activation: str = eqx.field(static=True)

    def __init__(
        self,
        sizes: tuple[int, int, int],
        out_gain: float,
        key: PRNGKeyArray,
        activation: str = "tanh",
        depth: int = 2,
        gain: float = 2**0.5,
    ):
        in_size, hidden, out_size = sizes
        keys = jax.random.split(key, depth + 1)
        widths = (in_size,) + (hidden,) * depth
        hidden_layers = [
            orthogonal_linear(a, b, gain, k)
            for a, b, k in zip(widths[:-1], widths[1:], keys[:depth], strict=True)
        ]
        self.layers = (*hidden_layers, orthogonal_linear(hidden, out_size, out_gain, keys[depth]))
        self.activation = activation

    def __call__(self, x: Float[Array, " in_size"]) -> Float[Array, " out_size"]:
        # `x @ W.T`, not `eqx.nn.Linear`'s `W @ x`: the same sums, but vmapped over a batch (and
        # over seeds) it keeps activations batch-major, where `W @ x` under a seed axis made
        # XLA:CPU compute them features-major, about 25% slower (benchmarks/README.md).
        for layer in self.layers[:-1]:
            x = ACTIVATIONS[self.activation](x @ layer.weight.T + layer.bias)
        return x @ self.layers[-1].weight.T + self.layers[-1].bias


class Conv2d(eqx.nn.Conv2d):
    """`eqx.nn.Conv2d` (channels first, unbatched input) whose CPU forward is a patch matmul."""

    def __call__(
        self, x: Float[Array, "in_channels height width"], *, key: PRNGKeyArray | None = None
    ) -> Float[Array, "out_channels out_height out_width"]:
        if self.groups != 1 or self.dilation != (1, 1) or self.padding_mode != "ZEROS":
            return super().__call__(x, key=key)
        # The platform the program is compiled for picks the form, not the default backend.
        stock = eqx.nn.Conv2d.__call__
        return jax.lax.platform_dependent(self, x, cpu=Conv2d.patch_matmul, default=stock)

    def patch_matmul(
        self, x: Float[Array, "in_channels height width"]
    ) -> Float[Array, "out_channels out_height out_width"]:
        """The convolution as one matmul of strided patches (zero padding, no dilation)."""
        out_channels, in_channels, kh, kw = self.weight.shape
        (sh, sw), (top_bottom, left_right) = self.stride, self.padding
        x = jnp.pad(jnp.transpose(x, (1, 2, 0)), (top_bottom, left_right, (0, 0)))
        oh, ow = (x.shape[0] - kh) // sh + 1, (x.shape[1] - kw) // sw + 1
        # Offset (i, j) of the kernel sees rows i, i + sh, ... and columns j, j + sw, ...
        patches = jnp.concatenate(
            [
                x[i : i + sh * (oh - 1) + 1 : sh, j : j + sw * (ow - 1) + 1 : sw]
                for i in range(kh)
                for j in range(kw)
            ],
            axis=-1,
        )  # (oh, ow, kh * kw * in_channels), ordered as the weights below
        weight = jnp.transpose(self.weight, (2, 3, 1, 0)).reshape(-1, out_channels)
        y = jnp.transpose(patches @ weight, (2, 0, 1))
        return y + self.bias if self.use_bias else y
