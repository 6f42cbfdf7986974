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
by the weights once; a stride that divides the kernel is first folded into the channels, and
`channels_last` spares a torso the transposes between its layers. Same parameters (an
`eqx.nn.Conv2d`, so initialisers and checkpoints do not change), same numbers to float tolerance
(tests/test_layers.py). On other backends, and for dilated, grouped or non-zero-padded
convolutions, the stock convolution runs.
"""

from typing import Literal

import equinox as eqx
import jax
import jax.numpy as jnp
from canter.common.blocks.initializers import lecun_linear, orthogonal_linear
from jaxtyping import Array, Float, PRNGKeyArray

ACTIVATIONS = {"tanh": jnp.tanh, "relu": jax.nn.relu, "swish": jax.nn.swish}


class MLP(eqx.Module):
    """`depth` hidden layers (`activation`: tanh, relu or swish) of `sizes` (in, hidden, out);
    hidden gain `gain`, output gain `out_gain`; `init="lecun"` draws every layer as Flax's
    `nn.Dense` does instead (LeCun-normal weights, zero biases, no gains)."""

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
        init: Literal["orthogonal", "lecun"] = "orthogonal",
    ):
        in_size, hidden, out_size = sizes
        keys = jax.random.split(key, depth + 1)
        widths = (in_size,) + (hidden,) * depth + (out_size,)
        gains = (gain,) * depth + (out_gain,)

        def linear(a: int, b: int, layer_gain: float, k: PRNGKeyArray) -> eqx.nn.Linear:
            if init == "lecun":
                return lecun_linear(a, b, k)
            return orthogonal_linear(a, b, layer_gain, k)

        self.layers = tuple(map(linear, widths[:-1], widths[1:], gains, keys))
        self.activation = activation

    def __call__(self, x: Float[Array, " in_size"]) -> Float[Array, " out_size"]:
        # `x @ W.T`, not `eqx.nn.Linear`'s `W @ x`: the same sums, but vmapped over a batch (and
        # over seeds) it keeps activations batch-major, where `W @ x` under a seed axis made
        # XLA:CPU compute them features-major, about 25% slower (benchmarks/README.md).
        for layer in self.layers[:-1]:
            x = ACTIVATIONS[self.activation](x @ layer.weight.T + layer.bias)
        return x @ self.layers[-1].weight.T + self.layers[-1].bias


class Conv2d(eqx.nn.Conv2d):
    """`eqx.nn.Conv2d` (unbatched input) whose CPU forward is a patch matmul; `channels_last`
    is the same convolution on (height, width, channels) arrays."""

    def __call__(
        self, x: Float[Array, "in_channels height width"], *, key: PRNGKeyArray | None = None
    ) -> Float[Array, "out_channels out_height out_width"]:
        if not self.patchable():
            return super().__call__(x, key=key)
        # The platform the program is compiled for picks the form, not the default backend.
        stock = eqx.nn.Conv2d.__call__
        return jax.lax.platform_dependent(self, x, cpu=Conv2d.patch_matmul, default=stock)

    def channels_last(
        self, x: Float[Array, "height width in_channels"]
    ) -> Float[Array, "out_height out_width out_channels"]:
        """The convolution with channels last in and out. A torso of several layers that keeps
        its activations so skips the two transposes per layer of Equinox's layout, which the
        patch matmul (channels last inside) would otherwise pay: the Nature CNN's SGD step about
        1.5x faster on XLA:CPU (benchmarks/speed/conv_cpu.py)."""

        def stock(conv: Conv2d, x: Array) -> Array:
            y = eqx.nn.Conv2d.__call__(conv, jnp.transpose(x, (2, 0, 1)))
            return jnp.transpose(y, (1, 2, 0))

        if not self.patchable():
            return stock(self, x)
        return jax.lax.platform_dependent(self, x, cpu=Conv2d.patches_last, default=stock)

    def patchable(self) -> bool:
        return self.groups == 1 and self.dilation == (1, 1) and self.padding_mode == "ZEROS"

    def patch_matmul(
        self, x: Float[Array, "in_channels height width"]
    ) -> Float[Array, "out_channels out_height out_width"]:
        """The convolution as one matmul of patches (zero padding, no dilation), channels first."""
        return jnp.transpose(self.patches_last(jnp.transpose(x, (1, 2, 0))), (2, 0, 1))

    def patches_last(
        self, x: Float[Array, "height width in_channels"]
    ) -> Float[Array, "out_height out_width out_channels"]:
        """The patch matmul on channels-last arrays.

        A stride that divides the kernel is folded into the channels first (space to depth): a
        kh x kw kernel with stride (sh, sw) reads the same numbers as a (kh/sh) x (kw/sw) kernel
        with stride 1 over blocks of sh x sw pixels, so the patches are (kh/sh)(kw/sw) slices
        where they were kh x kw strided ones: the Nature CNN's SGD step 1.8x faster on XLA:CPU
        (benchmarks/speed/conv_cpu.py). Stride 1 has nothing to fold.
        """
        out_channels, in_channels, kh, kw = self.weight.shape
        (sh, sw), (top_bottom, left_right) = self.stride, self.padding
        x = jnp.pad(x, (top_bottom, left_right, (0, 0)))
        oh, ow = (x.shape[0] - kh) // sh + 1, (x.shape[1] - kw) // sw + 1
        weight = jnp.transpose(self.weight, (2, 3, 1, 0))  # (kh, kw, in_channels, out_channels)
        if kh % sh == 0 and kw % sw == 0:
            kh, kw = kh // sh, kw // sw
            rows, cols = oh + kh - 1, ow + kw - 1  # the blocks the output reads
            x = x[: rows * sh, : cols * sw].reshape(rows, sh, cols, sw, in_channels)
            x = jnp.transpose(x, (0, 2, 1, 3, 4)).reshape(rows, cols, sh * sw * in_channels)
            weight = weight.reshape(kh, sh, kw, sw, in_channels, out_channels)
            weight = jnp.transpose(weight, (0, 2, 1, 3, 4, 5))  # a block's pixels as channels
            sh = sw = 1
        # Offset (i, j) of the kernel sees rows i, i + sh, ... and columns j, j + sw, ...
        patches = jnp.concatenate(
            [
                x[i : i + sh * (oh - 1) + 1 : sh, j : j + sw * (ow - 1) + 1 : sw]
                for i in range(kh)
                for j in range(kw)
            ],
            axis=-1,
        )  # (oh, ow, kh * kw * channels), ordered as the weights
        y = patches @ weight.reshape(-1, out_channels)
        return y + self.bias[:, 0, 0] if self.use_bias else y
