"""Distributional returns: the maths C51, QR-DQN, IQN and FastTD3's critic share.

A categorical return distribution (C51: Bellemare et al. 2017, arXiv:1707.06887) lives on a
fixed support of atoms; its Bellman target `r + discount * Z` falls between the atoms and is
projected back onto them (`categorical_projection`). A quantile distribution (QR-DQN: Dabney
et al. 2018, arXiv:1710.10044; IQN: Dabney et al. 2018, arXiv:1806.06923) is a set of return
samples at quantile fractions tau, learnt by quantile regression with a Huber loss
(`quantile_huber_loss`); IQN draws its fractions and embeds them with cosines
(`cosine_features`). Each is tested against a slow loop (tests/test_distributional.py).
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
