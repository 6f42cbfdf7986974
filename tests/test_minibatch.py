"""ppo.py's minibatch loop against plain Python: the shuffle partitions, the loop equals a loop.

ppo_continuous.py, ppo_rnn.py, ppo_atari.py and pqn.py hold marked copies (tests/test_copies.py).
"""

import functools

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
from canter.algorithms.ppo import shuffled_minibatches, update_epochs


def test_shuffled_minibatches_partition_the_batch_and_keep_rows_together():
    batch = {"x": jnp.arange(12.0), "y": jnp.arange(24.0).reshape(12, 2)}
    minibatches = shuffled_minibatches(jax.random.key(0), batch, 3)
    assert minibatches["x"].shape == (3, 4) and minibatches["y"].shape == (3, 4, 2)
    assert sorted(np.asarray(minibatches["x"]).ravel().tolist()) == list(range(12))
    np.testing.assert_array_equal(minibatches["y"][..., 0], 2 * minibatches["x"])
    other = shuffled_minibatches(jax.random.key(1), batch, 3)
    assert not np.array_equal(minibatches["x"], other["x"])


def test_update_epochs_equals_a_python_loop():
    model = eqx.nn.Linear(3, 1, key=jax.random.key(0))
    optimizer = optax.adam(0.05)
    batch = {"x": jax.random.normal(jax.random.key(1), (16, 3)), "y": jnp.arange(16.0)}

    def loss_fn(model, minibatch):
        loss = jnp.mean((jax.vmap(model)(minibatch["x"])[:, 0] - minibatch["y"]) ** 2)
        return loss, {"loss": loss}

    split = functools.partial(shuffled_minibatches, num_minibatches=4)
    key = jax.random.key(2)
    got, _, stats = update_epochs(
        loss_fn, optimizer, split, 3, model, optimizer.init(model), batch, key
    )
    assert stats["loss"].shape == (3, 4)  # [epochs, minibatches]
    expected, opt_state = model, optimizer.init(model)
    for epoch_key in jax.random.split(key, 3):
        minibatches = split(epoch_key, batch)
        for i in range(4):
            minibatch = jax.tree.map(lambda x, i=i: x[i], minibatches)
            grads, _ = jax.grad(loss_fn, has_aux=True)(expected, minibatch)
            updates, opt_state = optimizer.update(grads, opt_state, expected)
            expected = optax.apply_updates(expected, updates)
    for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(expected), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    assert not np.allclose(got.weight, model.weight)
