"""Typed PRNG keys <-> their raw key data, for a whole pytree (for sharding and serialising).

Keys come from `jax.random.key`, so they use JAX's default implementation; key data is what
crosses process boundaries, files and `make_array_from_callback`.
"""

from typing import Any

import jax


def is_key(leaf: Any) -> bool:
    """Whether a leaf (array or shape) holds typed PRNG keys."""
    return jax.dtypes.issubdtype(leaf.dtype, jax.dtypes.prng_key)


def to_data(tree: Any) -> Any:
    """`tree` with every typed key replaced by its key data (shape-only leaves too)."""

    def unkey(leaf: Any) -> Any:
        if not is_key(leaf):
            return leaf
        if isinstance(leaf, jax.ShapeDtypeStruct):
            return jax.eval_shape(jax.random.key_data, leaf)
        return jax.random.key_data(leaf)

    return jax.tree.map(unkey, tree)


def from_data(data: Any, like: Any) -> Any:
    """Re-wrap the key data in `data` wherever `like` (same structure) holds typed keys."""
    return jax.tree.map(lambda d, x: jax.random.wrap_key_data(d) if is_key(x) else d, data, like)
