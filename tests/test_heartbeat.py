"""A run is never silent for long (common/run/heartbeat.py): a line while a long compile goes on,
and one while a long interval computes, which changes no number."""

import subprocess
import sys
import threading

import pytest
from canter.common.run import heartbeat, report

from tests.checks import training_env


class Steps:
    """A Train's `env_steps`: 1,000 env steps of one seed per interval."""

    @staticmethod
    def env_steps(i: int) -> int:
        return (i + 1) * 1000


def test_the_heartbeat_estimates_env_steps_at_the_pace_so_far_and_says_so():
    shown = []
    beat = heartbeat.Heartbeat(Steps(), 2, 0, shown.append, period_s=30.0, tic=100.0)
    assert beat.line(130.0) == (
        "interval 1 computing for 30 s: env steps, speed and return are known when it ends"
    )
    beat.done(1, 110.0, "12.34")  # interval 1 took 10 s: 2 seeds x 1,000 env steps
    line = beat.line(115.0)
    assert line.startswith("env steps ~     1,500  SPS        200  return 12.34 (interval 1)")
    assert "(interval 2 computing for 5 s; env steps estimated at the pace so far)" in line
    assert beat.line(200.0).startswith("env steps ~     2,000")  # never past the interval's end
    now = heartbeat.Heartbeat(Steps(), 2, 0, shown.append, period_s=30.0)  # the real clock
    now()  # less than 30 s since it started: nothing
    assert shown == []
    now.period_s = 0.0
    now()
    assert len(shown) == 1 and shown[0].startswith("interval 1 computing for 0 s")


def test_a_resumed_runs_heartbeat_counts_from_where_it_resumed():
    beat = heartbeat.Heartbeat(Steps(), 1, 3, lambda line: None, tic=0.0)
    assert beat.line(5.0).startswith("interval 4 computing for 5 s")
    beat.done(4, 20.0, "-")
    assert beat.line(30.0).startswith(
        "env steps ~     4,500  SPS         50  return - (interval 4)"
    )


def compile_lines(tty: bool, wait_for: int) -> list:
    """What `compiling` says (tty or not) about a body that lasts until it said `wait_for`
    things (or 10 s)."""
    said, enough = [], threading.Event()

    def say(*args, **kwargs):
        said.append(args[0])
        if len(said) >= wait_for:
            enough.set()

    with heartbeat.compiling(say, after_s=0.01, tty=tty):
        assert enough.wait(10.0)
    return said


def test_a_long_compile_says_so_once_piped_and_counts_in_place_on_a_terminal():
    (line,) = compile_lines(tty=False, wait_for=1)
    assert line.startswith("compiling ... (0 s so far; the next line says how long it took)")
    counted = compile_lines(tty=True, wait_for=2)
    assert all(line.startswith("\rcompiling ... ") for line in counted[:-1]), counted
    assert counted[-1] == "\r\033[K"  # erased before the runner's "compiled in" line
    quiet = []
    with heartbeat.compiling(lambda *a, **k: quiet.append(a), after_s=10.0, tty=False):
        pass  # a compile under 10 s says nothing
    assert quiet == []


def test_on_a_terminal_the_heartbeat_is_the_bars_text(monkeypatch, capsys):
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    bar = report.progress(3, 0, print)
    bar.pulse("interval 1 computing for 30 s: env steps ...")
    bar(0, "env steps  1,000")
    bar(None, "")
    err = capsys.readouterr().err  # tqdm writes to stderr
    assert "interval 1 computing for 30 s" in err and "1/3" in err


@pytest.mark.slow  # CLI processes that train (a few seconds each, once compiled)
def test_a_long_interval_prints_heartbeat_lines_and_changes_no_number(repo_root, tmp_path):
    # Two intervals of 256 PPO iterations on CartPole (a second or more each), a heartbeat
    # every 0.2 s instead of 30.
    args = ["--total-timesteps", "262144", "--eval-every", "131072", "--num-eval-envs", "2"]
    script = str(repo_root / "algorithms" / "ppo.py")
    outs = {}
    for period in ("0.2", ""):
        run_dir = tmp_path / f"run{period}"
        command = [sys.executable, script, *args, "--run-dir", str(run_dir)]
        env = training_env(CANTER_HEARTBEAT_S=period)
        done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=600)
        assert done.returncode == 0, done.stderr
        outs[period] = (done.stdout, (run_dir / "seed_0" / "metrics.csv").read_bytes())
    lines = outs["0.2"][0].splitlines()
    assert any(line.startswith("[  0/2] interval 1 computing for ") for line in lines), lines
    beats = [line for line in lines if line.startswith("[  1/2] env steps ~")]
    assert beats and all(
        "(interval 1)" in line and "interval 2 computing" in line for line in beats
    )
    assert "computing for" not in outs[""][0]  # the default period: none in a short run
    assert outs["0.2"][1] == outs[""][1]  # metrics.csv byte for byte


def test_the_period_is_a_positive_number_or_the_default(monkeypatch):
    from canter.common.run import heartbeat

    for value, period in (
        ("0.2", 0.2),
        ("", heartbeat.HEARTBEAT_S),
        ("soon", heartbeat.HEARTBEAT_S),
        ("-1", heartbeat.HEARTBEAT_S),
    ):
        monkeypatch.setenv("CANTER_HEARTBEAT_S", value)
        assert heartbeat.heartbeat_s() == period, value
