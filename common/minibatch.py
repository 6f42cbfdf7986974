"""Minibatch SGD over a collected batch: the update loop of every on-policy algorithm.

A number-affecting building block shared by ppo.py, ppo_continuous.py, ppo_rnn.py and pqn.py
(ARCHITECTURE.md, "the numbers test"): each pass over the batch cuts it afresh into minibatches
with the algorithm's own `split` (shuffled samples, or whole sequences for a recurrent policy)
and takes one optimiser step per minibatch. Tested against a plain Python loop.
"""

from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
import optax
from canter.common.run.devices import shard_minibatches
from jaxtyping import Array, PRNGKeyArray, PyTree


def shuffled_minibatches(key: PRNGKeyArray, batch: PyTree, num_minibatches: int) -> PyTree:
    """`batch` (leading axis: samples) shuffled and cut into `[num_minibatches, minibatch, ...]`.

    One sort of random bits: jax.random.permutation sorts several times, and a sort of 16,384
    entries took 6.0 ms against 2.8 ms on XLA:CPU (benchmarks/README.md).
    """
    order = jnp.argsort(jax.random.bits(key, jax.tree.leaves(batch)[0].shape[:1]))
    return jax.tree.map(lambda x: x[order].reshape((num_minibatches, -1) + x.shape[1:]), batch)


def update_epochs(
    model: eqx.Module,
    opt_state: optax.OptState,
    batch: PyTree,
    key: PRNGKeyArray,
    *,
    loss_fn: Callable,
    optimizer: optax.GradientTransformation,
    num_epochs: int,
    split: Callable[[PRNGKeyArray, PyTree], PyTree],
) -> tuple[eqx.Module, optax.OptState, dict[str, Array]]:
    """`num_epochs` passes over `batch`, each cut afresh into minibatches by `split`, with one
    gradient step of `loss_fn(model, minibatch) -> (loss, stats)` per minibatch."""

    def update_minibatch(carry: tuple, minibatch: PyTree) -> tuple[tuple, dict[str, Array]]:
        model, opt_state = carry
        grads, stats = jax.grad(loss_fn, has_aux=True)(model, minibatch)
        updates, opt_state = optimizer.update(grads, opt_state, model)
        return (optax.apply_updates(model, updates), opt_state), stats

    def update_epoch(carry: tuple, epoch_key: PRNGKeyArray) -> tuple[tuple, dict[str, Array]]:
        minibatches = shard_minibatches(split(epoch_key, batch))
        return jax.lax.scan(update_minibatch, carry, minibatches)

    epoch_keys = jax.random.split(key, num_epochs)
    (model, opt_state), stats = jax.lax.scan(update_epoch, (model, opt_state), epoch_keys)
    return model, opt_state, stats
