"""Learning regression against the reference returns (docs/design.md, "Reference returns")."""

import pytest
from canter.algorithms import ppo, trainer


@pytest.mark.learning
def test_ppo_cartpole_reaches_reference_return():
    # PureJaxRL's CartPole config (the defaults) over 4 seeds; gymnax-blines reaches 500.
    config = ppo.Config(env="CartPole-v1", num_seeds=4)
    result = trainer.run(config, ppo.make_train, algo="ppo", verbose=False)
    assert result.summary["final_return_mean"] >= 475, result.summary
    assert result.summary["eval_return_mean"] >= 475, result.summary
