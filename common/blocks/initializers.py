"""Orthogonal weight initialisation without LAPACK.

`jax.nn.initializers.orthogonal` calls LAPACK's QR. On XLA:CPU (jaxlib 0.10) that custom call
runs on a worker of the intra-op thread pool, fans its batch out into the same pool and blocks
on it; with several seeds vmapped (a batched QR) and two layers' QRs in flight, every worker
ends up waiting and the program hangs at 0% CPU. Seen here as a hung `ppo_rnn` learning test,
with native stacks parked in `jax::ParallelBatchMap` under `lapack_sgeqrf_ffi`.

`orthogonal` draws the same Gaussian matrix as JAX's initializer and orthonormalises its columns
with classical Gram-Schmidt a block of up to 32 columns at a time: each block is projected off
the columns before it with two matmuls and then orthonormalised column by column inside
itself, both twice ("twice is enough" for float32). The resulting Q has a positive diagonal in
R, the same sign convention JAX applies after its QR, so the two agree to float tolerance for
the same key; it is built from matmuls only. Column by column over the whole matrix, reading
all of it per column, a 400x256 layer took 100 ms on the 2-core CPU and Craftax's 8268x512 one
3.7 s; in blocks they take 20 ms and 0.53 s (benchmarks/README.md).

Off the CPU, `orthogonal` is JAX's own initializer: the deadlock is XLA:CPU's, and on a GPU
the columns' sequential loop costs a kernel launch or more per step (about 1,000 columns in
PPO's two MinAtar MLPs, each orthonormalised twice: some 2,000 steps), where the QR is one
library call. The platform the program is compiled for decides (`lax.platform_dependent`, as
in `layers.Conv2d`), not the process's default backend: a program placed on the CPU of a GPU
machine, or compiled ahead of time for a GPU on a CPU-only one, takes its platform's path.

`orthogonal_linear` is the dense layer of the PPO files: orthogonal weights, zero bias.
`lecun_linear` is Flax's `nn.Dense` as its references build it: LeCun-normal weights, zero bias.
"""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, PRNGKeyArray


def orthonormal_columns(a: Float[Array, "m k"], widest: int = 32) -> Float[Array, "m k"]:
    """The Q of a = QR with diag(R) > 0, for m >= k and `a` of full column rank; blocks of
    columns as wide as the largest divisor of k up to `widest`."""
    k = a.shape[1]
    width = max(b for b in range(1, min(k, widest) + 1) if k % b == 0)

    def orthonormalise(block: Float[Array, "m b"]) -> Float[Array, "m b"]:
        """Gram-Schmidt inside one block, twice per column."""

        def add_column(done: Float[Array, "m b"], j: Array) -> tuple[Float[Array, "m b"], None]:
            column = block[:, j]
            for _ in range(2):  # columns not yet filled are zero and project to nothing
                column = column - done @ (done.T @ column)
            return done.at[:, j].set(column / jnp.sqrt(jnp.sum(column * column))), None

        return jax.lax.scan(add_column, jnp.zeros_like(block), jnp.arange(width))[0]

    def add_block(q: Float[Array, "m k"], start: Array) -> tuple[Float[Array, "m k"], None]:
        block = jax.lax.dynamic_slice_in_dim(a, start, width, axis=1)
        # Projected off the columns before it, then orthonormalised, twice: once is not enough
        # where a column is nearly in their span (a square matrix's last columns).
        for _ in range(2):
            block = orthonormalise(block - q @ (q.T @ block))
        return jax.lax.dynamic_update_slice_in_dim(q, block, start, axis=1), None

    return jax.lax.scan(add_block, jnp.zeros_like(a), jnp.arange(0, k, width))[0]


def orthogonal(
    key: PRNGKeyArray, shape: tuple[int, int], scale: float = 1.0
) -> Float[Array, "rows cols"]:
    """A (rows, cols) matrix with orthonormal rows or columns (whichever are fewer), times
    `scale`; the same values as `jax.nn.initializers.orthogonal(scale)(key, shape)`."""

    def gram_schmidt(key: PRNGKeyArray) -> Float[Array, "rows cols"]:
        rows, cols = shape
        q = orthonormal_columns(jax.random.normal(key, (max(rows, cols), min(rows, cols))))
        return scale * (q if rows >= cols else q.T)

    if jax.config.jax_disable_jit and not isinstance(key, jax.core.Tracer):
        return host_orthogonal(key, shape, scale)
    qr = jax.nn.initializers.orthogonal(scale)
    return jax.lax.platform_dependent(key, cpu=gram_schmidt, default=lambda k: qr(k, shape))


def host_orthogonal(
    key: PRNGKeyArray, shape: tuple[int, int], scale: float
) -> Float[Array, "rows cols"]:
    """`orthogonal` with jit off (`--debug`, common/run/debug.py), from NumPy's QR of the same
    Gaussian draw: run op by op, the Gram-Schmidt above is thousands of dispatches per layer
    (PPO's two-iteration `--debug` run took 38 s with them, 35 s without, on 2 cores), and
    NumPy's LAPACK is not XLA:CPU's thread pool. Equal to the jitted values to float
    tolerance, as the two paths are."""
    rows, cols = shape
    a = np.asarray(jax.random.normal(key, (max(rows, cols), min(rows, cols))), np.float64)
    q, r = np.linalg.qr(a)
    q = q * np.sign(np.diag(r))  # diag(R) > 0, JAX's convention
    return jnp.asarray(scale * (q if rows >= cols else q.T), jnp.float32)


def orthogonal_linear(in_size: int, out_size: int, gain: float, key: PRNGKeyArray) -> eqx.nn.Linear:
    """Linear layer with orthogonal weights of gain `gain` and zero bias (a PPO detail: CleanRL,
    PureJaxRL)."""
    weight = orthogonal(key, (out_size, in_size), gain)
    layer = eqx.nn.Linear(in_size, out_size, key=key)
    return eqx.tree_at(lambda lin: (lin.weight, lin.bias), layer, (weight, jnp.zeros(out_size)))


def lecun_linear(
    in_size: int, out_size: int, key: PRNGKeyArray, bias: bool = True
) -> eqx.nn.Linear:
    """Linear layer with truncated LeCun-normal weights and zero bias (flax.linen.Dense's init)."""
    weight = jax.nn.initializers.lecun_normal()(key, (in_size, out_size)).T
    layer = eqx.nn.Linear(in_size, out_size, use_bias=bias, key=key)
    layer = eqx.tree_at(lambda lin: lin.weight, layer, weight)
    return eqx.tree_at(lambda lin: lin.bias, layer, jnp.zeros(out_size)) if bias else layer
