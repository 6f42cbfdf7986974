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


def test_shuffled_minibatches_partition_the_sample_indices():
    indices = shuffled_minibatches(jax.random.key(0), 12, 3)
    assert indices.shape == (3, 4)
    assert sorted(np.asarray(indices).ravel().tolist()) == list(range(12))
    assert not np.array_equal(indices, np.arange(12).reshape(3, 4))
    assert not np.array_equal(indices, shuffled_minibatches(jax.random.key(1), 12, 3))


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
        for indices in np.asarray(split(epoch_key, 16)):
            minibatch = {name: x[indices] for name, x in batch.items()}
            grads, _ = jax.grad(loss_fn, has_aux=True)(expected, minibatch)
            updates, opt_state = optimizer.update(grads, opt_state, expected)
            expected = optax.apply_updates(expected, updates)
    for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(expected), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    assert not np.allclose(got.weight, model.weight)
