"""Orthogonal weight initialisation without LAPACK.

`jax.nn.initializers.orthogonal` calls LAPACK's QR. On XLA:CPU (jaxlib 0.10) that custom call
runs on a worker of the intra-op thread pool, fans its batch out into the same pool and blocks
on it; with several seeds vmapped (a batched QR) and two layers' QRs in flight, every worker
ends up waiting and the program hangs at 0% CPU. Seen here as a hung `ppo_rnn` learning test,
with native stacks parked in `jax::ParallelBatchMap` under `lapack_sgeqrf_ffi`.

`orthogonal` draws the same Gaussian matrix as JAX's initializer and orthonormalises its columns
with classical Gram-Schmidt, applied twice per column ("twice is enough" for float32). The
resulting Q has a positive diagonal in R, the same sign convention JAX applies after its QR,
so the two agree to float tolerance for the same key; it is built from matmuls only.

`orthogonal_linear` is the dense layer of the PPO files: orthogonal weights, zero bias.
"""

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, PRNGKeyArray


def orthonormal_columns(a: Float[Array, "m k"]) -> Float[Array, "m k"]:
    """The Q of a = QR with diag(R) > 0, for m >= k and `a` of full column rank."""

    def add_column(q: Float[Array, "m k"], j: Array) -> tuple[Float[Array, "m k"], None]:
        v = a[:, j]
        for _ in range(2):  # columns not yet filled are zero and project to nothing
            v = v - q @ (q.T @ v)
        return q.at[:, j].set(v / jnp.sqrt(jnp.sum(v * v))), None

    q, _ = jax.lax.scan(add_column, jnp.zeros_like(a), jnp.arange(a.shape[1]))
    return q


def orthogonal(
    key: PRNGKeyArray, shape: tuple[int, int], scale: float = 1.0
) -> Float[Array, "rows cols"]:
    """A (rows, cols) matrix with orthonormal rows or columns (whichever are fewer), times
    `scale`; the same values as `jax.nn.initializers.orthogonal(scale)(key, shape)`."""
    rows, cols = shape
    a = jax.random.normal(key, (max(rows, cols), min(rows, cols)))
    q = orthonormal_columns(a)
    return scale * (q if rows >= cols else q.T)


def orthogonal_linear(in_size: int, out_size: int, gain: float, key: PRNGKeyArray) -> eqx.nn.Linear:
    """Linear layer with orthogonal weights of gain `gain` and zero bias (a PPO detail: CleanRL,
    PureJaxRL)."""
    weight = orthogonal(key, (out_size, in_size), gain)
    layer = eqx.nn.Linear(in_size, out_size, key=key)
    return eqx.tree_at(lambda lin: (lin.weight, lin.bias), layer, (weight, jnp.zeros(out_size)))
