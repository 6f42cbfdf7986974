"""canter's algorithm files, one algorithm each, and the trainer they share.

`HOUSE` names the files this repository maintains, with the kind of actions each handles: the
copy checks (tests/test_copies.py) and the CLI's "use ... instead" hint read it. A fork
(`cp algorithms/ppo.py algorithms/my_ppo.py`) is not in it, so it is free to differ.
"""

HOUSE = {
    "ppo": "discrete",
    "ppo_rnn": "discrete",
    "ppo_rnd": "discrete",
    "ppo_trxl": "discrete",
    "ppo_atari": "discrete",
    "dqn": "discrete",
    "iqn": "discrete",
    "c51": "discrete",
    "qr_dqn": "discrete",
    "pqn": "discrete",
    "pqn_rnn": "discrete",
    "sac_discrete": "discrete",
    "alphazero": "discrete",
    "muzero": "discrete",
    "ippo": "discrete",
    "mappo": "discrete",
    "ppo_continuous": "continuous",
    "sac": "continuous",
    "td3": "continuous",
    "ddpg": "continuous",
    "fast_td3": "continuous",
}
# The files that run one suite's envs only (its prefix): left out of the CLI's "use ... instead"
# hint, which names the files for any env of an action kind.
SUITE_ONLY = {"alphazero": "pgx:", "ippo": "jaxmarl:", "mappo": "jaxmarl:"}
