"""Action masks: only valid actions are sampled, chosen greedily, explored, or bootstrapped from.

An env with action masks (Jumanji's tasks, common/envs/jumanji.py) gives the valid actions of
each state; `common.envs.vector_mask(env)` returns them for a batch of states as booleans
`[n, num_actions]`, or None for an env without masks. Every function here takes that mask and,
given None, computes exactly what it would without masking (the same ops, the same random
draws), so an env without masks compiles no masking at all.

A masked action gets the lowest finite logit (not -inf): its probability under the softmax is
exactly 0, so it is never sampled and adds nothing to the entropy or the KL estimate, while
every value and gradient stays finite (an infinite logit makes `0 * inf` NaNs in the entropy).
"""

import distrax
import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool, Float, Int, PRNGKeyArray

Mask = Bool[Array, "*batch num_actions"] | None


def masked_logits(logits: Float[Array, "*batch num_actions"], mask: Mask) -> Float[Array, "..."]:
    """`logits` with every invalid action's set to the lowest finite value."""
    if mask is None:
        return logits
    return jnp.where(mask, logits, jnp.finfo(logits.dtype).min)


def sample_masked(
    key: PRNGKeyArray, logits: Float[Array, "*batch num_actions"], mask: Mask
) -> tuple[Int[Array, "*batch"], Float[Array, "*batch"]]:
    """An action drawn from the softmax policy over the valid actions, and its log-probability."""
    logits = masked_logits(logits, mask)
    action = jax.random.categorical(key, logits)
    return action, distrax.Categorical(logits=logits).log_prob(action)


def masked_argmax(values: Float[Array, "*batch num_actions"], mask: Mask) -> Int[Array, "*batch"]:
    """The valid action of the highest value (action 0 where no action is valid)."""
    return jnp.argmax(masked_logits(values, mask), axis=-1)


def masked_max(values: Float[Array, "*batch num_actions"], mask: Mask) -> Float[Array, "*batch"]:
    """The highest value over the valid actions; 0 where no action is valid (a terminal state
    of many Jumanji tasks: its mask is all False)."""
    if mask is None:
        return jnp.max(values, axis=-1)
    best = jnp.max(masked_logits(values, mask), axis=-1)
    return jnp.where(jnp.any(mask, axis=-1), best, 0.0)


def random_action(key: PRNGKeyArray, mask: Mask, num: int, num_actions: int) -> Int[Array, " num"]:
    """`num` actions drawn uniformly from the valid ones (all `num_actions` without a mask:
    `jax.random.randint`, as before masks existed; uniform over all where none is valid)."""
    if mask is None:
        return jax.random.randint(key, (num,), 0, num_actions)
    return jax.random.categorical(key, masked_logits(jnp.zeros(mask.shape), mask))
