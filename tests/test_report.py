"""What a run prints at its end (common/run/report.py), from summary.json's fields: pure Python."""

import math

from canter.common.run import report

NAN = math.nan


def summary(final_mean: float, final_std: float, finite: int = 2, sweep: bool = False) -> dict:
    point = {
        "final_return_mean": final_mean,
        "final_return_std": final_std,
        "eval_return_mean": 12.5,
        "eval_return_std": 0.5,
        "finite_seeds": finite,
    }
    return {
        "num_seeds": 2,
        "env_steps": 4096,
        "diverged": [],
        "compile_s": 1.0,
        "run_s": 2.0,
        "env_steps_per_s": 4096.0,
        "sweep": {"learning_rate": [1e-3, 3e-3]} if sweep else {},
        "points": [dict(point, learning_rate=1e-3), dict(point, learning_rate=3e-3)]
        if sweep
        else [point],
        **({} if sweep else point),
    }


def lines(values: dict) -> list[str]:
    said: list[str] = []
    report.report(lambda line, **_: said.append(line), values)
    return said


def test_the_done_line_gives_mean_and_spread():
    said = lines(summary(20.0, 1.5))
    assert (
        said[0] == "done: return 20.00 +- 1.50  eval 12.50 +- 0.50  (2 seeds, 4,096 env steps each)"
    )
    assert not any("no training episode ended" in line for line in said)
    one = lines({**summary(20.0, 0.0, finite=1), "num_seeds": 1})
    assert one[0].endswith("(1 seed, 4,096 env steps each)"), one[0]


def test_no_episode_ended_in_the_last_interval_is_a_dash_and_says_why():
    said = lines(summary(NAN, NAN))
    assert said[0].startswith("done: return -  eval 12.50 +- 0.50")
    assert "nan" not in " ".join(said)
    assert any("no training episode ended in the last interval" in line for line in said)


def test_every_seed_diverged_is_not_called_an_unended_interval():
    said = lines(summary(NAN, NAN, finite=0))
    assert not any("no training episode ended" in line for line in said)


def test_a_sweep_point_without_an_ended_episode_keeps_the_columns():
    said = lines(summary(NAN, NAN, sweep=True))
    rows = [line for line in said if line.lstrip()[:1].isdigit()]
    assert len(rows) == 2 and "nan" not in " ".join(rows)
    finite = [line for line in lines(summary(20.0, 1.5, sweep=True)) if line.lstrip()[:1].isdigit()]
    assert len(rows[0]) == len(finite[0])  # the dash pads to the width of mean +- std
