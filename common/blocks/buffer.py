"""A pure-JAX uniform replay buffer: a fixed-capacity ring of transitions inside the TrainState.

The buffer is an `eqx.Module` whose leaves are arrays, so it is vmapped over seeds, carried
through `lax.scan` and checkpointed with the rest of the run. It stores whatever pytree of
per-transition arrays the algorithm hands it; the algorithms store `next_obs` as the final
observation of an ending episode (`info["final_observation"]`), so targets bootstrap from it
on truncation. Written here rather than taken from flashbax: ~60 lines, no extra dependency.
"""

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Int, PRNGKeyArray, PyTree


class ReplayBuffer(eqx.Module):
    """Ring buffer: `data` leaves are `[buffer_size, ...]`; the oldest entries are overwritten."""

    data: PyTree[Array]
    position: Int[Array, ""]  # next row to write
    size: Int[Array, ""]  # rows filled so far, at most buffer_size

    @property
    def buffer_size(self) -> int:
        return int(jax.tree.leaves(self.data)[0].shape[0])

    @staticmethod
    def create(example: PyTree[Array], buffer_size: int) -> "ReplayBuffer":
        """An empty buffer for transitions shaped like `example` (one transition, no batch)."""
        data = jax.tree.map(
            lambda x: jnp.zeros((buffer_size,) + jnp.shape(x), jnp.asarray(x).dtype), example
        )
        return ReplayBuffer(data, jnp.zeros((), jnp.int32), jnp.zeros((), jnp.int32))

    def add(self, batch: PyTree[Array]) -> "ReplayBuffer":
        """Append a batch of transitions (leading axis: how many), wrapping around the ring."""
        count = int(jax.tree.leaves(batch)[0].shape[0])
        if count > self.buffer_size:
            raise ValueError(f"cannot add {count} transitions to a buffer of {self.buffer_size}")
        rows = (self.position + jnp.arange(count)) % self.buffer_size
        data = jax.tree.map(lambda store, x: store.at[rows].set(x), self.data, batch)
        position = (self.position + count) % self.buffer_size
        size = jnp.minimum(self.size + count, self.buffer_size)
        return ReplayBuffer(data, position, size)

    def sample(self, key: PRNGKeyArray, batch_size: int) -> PyTree[Array]:
        """`batch_size` transitions drawn uniformly, with replacement, from the filled rows."""
        # maxval >= 1 keeps the draw defined on an empty buffer (callers gate on warm-up anyway).
        rows = jax.random.randint(key, (batch_size,), 0, jnp.maximum(self.size, 1))
        return jax.tree.map(lambda store: store[rows], self.data)
