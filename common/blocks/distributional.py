"""Distributional returns: the maths C51, QR-DQN, IQN and FastTD3's critic share.

A categorical return distribution (C51: Bellemare et al. 2017, arXiv:1707.06887) lives on a
fixed support of atoms; its Bellman target `r + discount * Z` falls between the atoms and is
projected back onto them (`categorical_projection`). A quantile distribution (QR-DQN: Dabney
et al. 2018, arXiv:1710.10044; IQN: Dabney et al. 2018, arXiv:1806.06923) is a set of return
samples at quantile fractions tau, learnt by quantile regression with a Huber loss
(`quantile_huber_loss`); IQN draws its fractions and embeds them with cosines
(`cosine_features`). MuZero (Schrittwieser et al. 2020, arXiv:1911.08265) predicts values and
rewards as categorical distributions too, of the squashed scalar h(x) (`signed_hyperbolic`, Pohlen
et al. 2018) two-hot encoded on integer atoms -B..B (`two_hot`), read back as h^-1 of the
expectation (`two_hot_scalar`), as rlax's `muzero_pair`. Each is tested against a slow loop
(tests/test_distributional.py).
"""

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float


def categorical_projection(
    probs: Float[Array, "batch num_atoms"],
    target: Float[Array, " batch"],
    discount: Float[Array, " batch"],
    support: Float[Array, " num_atoms"],
) -> Float[Array, "batch num_atoms"]:
    """The distribution of `target + discount * Z` (Z on `support`, evenly spaced, with `probs`)
    projected back onto the support: each atom's image, clipped to the support's ends, splits
    its probability between the two atoms around it by distance, all of it to an atom it lands
    on exactly (CleanRL's `l == u` case; FastTD3's fix #30). `discount` is 0 where the target
    does not bootstrap (all the mass then goes to the atoms around `target`)."""
    num_atoms, v_min, v_max = support.shape[0], support[0], support[-1]
    delta = (v_max - v_min) / (num_atoms - 1)
    image = jnp.clip(target[:, None] + discount[:, None] * support, v_min, v_max)
    position = (image - v_min) / delta
    lower = jnp.clip(jnp.floor(position), 0, num_atoms - 2).astype(jnp.int32)
    upper_weight = position - lower  # in [0, 1]: 1 only at the top atom

    def one(p: Array, low: Array, up: Array) -> Array:
        mass = jnp.zeros(num_atoms, p.dtype).at[low].add(p * (1.0 - up))
        return mass.at[low + 1].add(p * up)

    return jax.vmap(one)(probs, lower, upper_weight)


def quantile_huber_loss(
    quantiles: Float[Array, "batch num_quantiles"],
    targets: Float[Array, "batch num_targets"],
    taus: Float[Array, "#batch num_quantiles"],
    kappa: float | Float[Array, ""] = 1.0,
) -> Float[Array, ""]:
    """Quantile regression of `quantiles` (at fractions `taus`) on the target samples: for
    each pair, the Huber loss of `u = target - quantile` (threshold kappa; |u| - kappa/2
    outside it) weighted by |tau - 1{u < 0}| and divided by kappa (the QR-DQN paper's
    rho^kappa_tau), summed over the quantiles, averaged over the targets and the batch (the
    papers' and SB3-contrib's reduction). kappa 0 is the plain quantile loss |tau - 1{u<0}| |u|."""
    u = targets[:, None, :] - quantiles[:, :, None]  # [batch, quantile, target]
    abs_u = jnp.abs(u)
    safe_kappa = jnp.where(kappa > 0, kappa, 1.0)  # kappa may be traced (a sweep): no `if`
    huber = jnp.where(abs_u <= kappa, 0.5 * u**2 / safe_kappa, abs_u - 0.5 * kappa)
    weight = jnp.abs(taus[:, :, None] - (jax.lax.stop_gradient(u) < 0))
    return jnp.mean(jnp.sum(jnp.mean(weight * huber, axis=2), axis=1))


def quantile_midpoints(num_quantiles: int) -> Float[Array, " num_quantiles"]:
    """QR-DQN's fixed fractions: the midpoints (2i + 1) / 2N of N equal slices of [0, 1]."""
    return (2 * jnp.arange(num_quantiles) + 1) / (2.0 * num_quantiles)


def cosine_features(
    taus: Float[Array, " num_taus"], num_cosines: int
) -> Float[Array, "num_taus num_cosines"]:
    """IQN's embedding of fractions before its linear layer: cos(pi i tau) for i = 0 ..
    num_cosines - 1, as the paper's sum and rejax's `ImplicitQuantileNetwork` (i = 0 is the
    constant feature)."""
    return jnp.cos(jnp.pi * jnp.arange(num_cosines) * taus[:, None])


def signed_hyperbolic(x: Array, eps: float = 1e-3) -> Array:
    """h(x) = sign(x) (sqrt(|x| + 1) - 1) + eps x: MuZero's squashing of values and rewards."""
    return jnp.sign(x) * (jnp.sqrt(jnp.abs(x) + 1.0) - 1.0) + eps * x


def signed_parabolic(y: Array, eps: float = 1e-3) -> Array:
    """h^-1(y), the inverse of `signed_hyperbolic` (the root of a quadratic in sqrt(|x| + 1))."""
    z = (jnp.sqrt(1.0 + 4.0 * eps * (eps + 1.0 + jnp.abs(y))) - 1.0) / (2.0 * eps)
    return jnp.sign(y) * (z**2 - 1.0)


def two_hot(x: Float[Array, "*batch"], bound: int) -> Float[Array, "*batch atoms"]:
    """`x` clipped to [-bound, bound] as probabilities on the integer atoms -bound .. bound: all
    on the atom it equals, else split between the two around it by closeness (expectation x)."""
    x = jnp.clip(x, -bound, bound)
    below = jnp.floor(x)
    upper = x - below  # the weight of the atom above
    index = (below + bound).astype(jnp.int32)
    atoms = 2 * bound + 1
    above = jnp.minimum(index + 1, atoms - 1)
    low = jax.nn.one_hot(index, atoms) * (1.0 - upper)[..., None]
    return low + jax.nn.one_hot(above, atoms) * upper[..., None]


def two_hot_scalar(logits: Float[Array, "*batch atoms"]) -> Float[Array, "*batch"]:
    """The scalar a categorical prediction on atoms -B .. B stands for: h^-1 of its mean atom."""
    bound = (logits.shape[-1] - 1) // 2
    mean = jax.nn.softmax(logits) @ jnp.arange(-bound, bound + 1, dtype=logits.dtype)
    return signed_parabolic(mean)
