"""`clip_by_global_norm`: optax's transform, its norm one reduction in programs for a GPU or TPU.

`optax.clip_by_global_norm` sums each leaf's squares on its own, then adds the sums. Compiled
for an H100 (`benchmarks/gpu/gpu_kernels.py`), the norm of PPO's MinAtar networks (12 leaves) alone
is 15 kernels that way and 2 as one sum over the concatenated leaves; a whole PPO MinAtar
minibatch step went from 65 kernels to 58. On the CPU the per-leaf sums cost nothing
measurable and keep the numbers canter's runs have always had, so a program compiled for the
CPU keeps optax's norm: the platform the program is compiled for decides
(`lax.platform_dependent`, as in `blocks.loops.scan`). The clip itself is optax's, op for op.
The two norms are the same sum in another order: a GPU's may differ in the last bit.
"""

import jax
import jax.numpy as jnp
import optax
from jaxtyping import Array, ArrayLike, Float, PyTree


def flat_norm(tree: PyTree) -> Float[Array, ""]:
    """The L2 norm of every leaf of `tree` together, as one sum of squares."""
    flat = jnp.concatenate([jnp.ravel(leaf) for leaf in jax.tree.leaves(tree)])
    return jnp.sqrt(jnp.sum(jnp.square(flat)))


def clip_by_global_norm(max_norm: float | Float[ArrayLike, ""]) -> optax.GradientTransformation:
    """`optax.clip_by_global_norm(max_norm)`: updates scaled to a global norm of at most
    `max_norm`; the norm in one reduction where the program is not compiled for the CPU."""

    def update(updates: PyTree, state: optax.EmptyState, params: PyTree = None) -> tuple:
        del params
        norm = jax.lax.platform_dependent(updates, cpu=optax.tree.norm, default=flat_norm)
        keep = jnp.squeeze(norm < max_norm)

        def clip(leaf: Array) -> Array:
            return jax.lax.select(keep, leaf, (leaf / norm.astype(leaf.dtype)) * max_norm)

        return jax.tree.map(clip, updates), state

    return optax.GradientTransformation(optax.init_empty_state, update)
