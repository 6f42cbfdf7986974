"""benchmarks/gpu/gpu.sh, the script of the GPU rows: its summary table and a tiny run on the
CPU."""

import json
import os
import re
import subprocess
import sys

import pytest

from benchmarks.gpu import gpu_summary


def _measurement(impl: str, run_s: float, **sizes) -> dict:
    return {"impl": impl, "run_s": run_s, "steps_per_s": 1000.0 / run_s, **sizes}


def test_summary_takes_ratios_within_rounds_and_leaves_out_what_did_not_run(tmp_path):
    """CLI / pure is taken per round from the two canter runs of that round; a work whose file
    is missing has no row; the ceiling row reads env steps/s against the random policy."""
    sizes = dict(num_envs=64, num_steps=128, iterations=100)
    rounds = [
        {
            "canter": _measurement("canter", 3.0, **sizes),
            "canter-pure": _measurement("canter-pure", 2.0, **sizes),
            "rejax": _measurement("rejax", 4.0, **sizes),
        },
        {
            "canter": _measurement("canter", 2.5, **sizes),
            "canter-pure": _measurement("canter-pure", 2.5, **sizes),
            "rejax": _measurement("rejax", 5.0, **sizes),
        },
    ]
    machine = "1 NVIDIA H100 80GB HBM3 (gpu), jax 0.11.2"
    record = {"machine": machine, "rows": {"16": {"rounds": rounds}}}
    (tmp_path / "speed_ppo-minatar.json").write_text(json.dumps(record))
    dqn = {"num_envs": 1, "num_steps": 1, "iterations": 30_000}
    ceiling = [
        {"canter": {**dqn, "steps_per_s": 6000.0}, "random": {**dqn, "steps_per_s": 60000.0}}
    ]
    (tmp_path / "speed_dqn-minatar.json").write_text(json.dumps({"rounds": ceiling}))

    lines = gpu_summary.summary(tmp_path).splitlines()
    row = next(line for line in lines if line.startswith("| PPO Breakout-MinAtar"))
    cells = [c.strip() for c in row.split("|")[1:-1]]
    assert cells[0] == "PPO Breakout-MinAtar, gymnax-blines config, 819,200 env steps"
    pure, cli, cli_over_pure = "0.50 (0.50, 0.50)", "0.62 (0.75, 0.50)", "1.25 (1.50, 1.00)"
    assert cells[1:] == ["16", pure, cli, cli_over_pure, "4.50", "2"]
    assert not any(line.startswith("| PPO CartPole") for line in lines)
    dqn_row = next(line for line in lines if line.startswith("| DQN MinAtar"))
    assert "| 6,000 | 60,000 | 0.100 (0.100) | 1 |" in dqn_row
    assert lines[-1].startswith(f"Machine: {machine}.")


def test_script_refuses_an_unknown_step_before_running_anything(repo_root):
    done = subprocess.run(
        ["bash", "benchmarks/gpu/gpu.sh", "--only", "ppo-atari"],
        capture_output=True,
        text=True,
        cwd=repo_root,
        timeout=30,
    )
    assert done.returncode == 2
    assert "no step 'ppo-atari'" in done.stderr and "dqn-minatar" in done.stderr


def test_every_step_is_listed_in_the_scripts_header_and_runs_in_order(repo_root):
    """The names `--only` takes are the script's steps, each described in its header, and each
    step line names one of them."""
    script = (repo_root / "benchmarks" / "gpu" / "gpu.sh").read_text()
    every = script.split('\nsteps="')[1].split('"')[0].split()
    header = script.split("\nset -euo pipefail")[0]
    for name in every:
        assert re.search(rf"(?<![\w-]){name}(?![\w-])", header), name
    called = re.findall(r"^ *(?:STEP_REPEATS=\S+ )?step (\S+) ", script, re.MULTILINE)
    assert called == every, (called, every)


@pytest.mark.slow  # about eight fresh processes that compile: 3-4 minutes on 2 cores
def test_tiny_run_writes_the_tables_of_its_own_scripts_and_the_summary_on_the_cpu(
    repo_root, tmp_path
):
    """`gpu.sh --tiny` on whatever device JAX has, for the steps whose scripts no other test
    runs: the head-to-head against rejax (speed_minatar.py: canter's CLI and pure program,
    rejax's), where the runner's time goes (runner_split.py) and the runner's cost
    (runner_overhead.py); each one's tables, and the summary. The other steps run
    speed_minatar.py again (PQN) or the speed_ppo.py and speed_dqn.py workers that
    tests/test_benchmarks.py runs at tiny size; their summary rows are checked on written
    results (test_summary_takes_ratios_...), and every step's name against the script's list
    (test_every_step_is_listed_...)."""
    done = subprocess.run(
        ["bash", "benchmarks/gpu/gpu.sh", "--tiny", "--out", str(tmp_path)]
        + ["--only", "ppo-minatar", "runner-split", "runner"],
        capture_output=True,
        text=True,
        cwd=repo_root,
        timeout=1000,
        env={**os.environ, "PYTHON": sys.executable},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    ran = [line.removeprefix("== ") for line in done.stderr.splitlines() if line.startswith("== ")]
    assert [s for s in ran if ":" not in s] == ["ppo-minatar", "runner-split", "runner"]
    written = {p.name for p in tmp_path.iterdir()}
    for name in ("speed_ppo-minatar", "runner_split", "runner_overhead"):
        assert {f"{name}.md", f"{name}.json"} <= written, (name, written)
    # Each worker's measurement (PPO MinAtar: 2 seeds, 64 envs x 128 steps, 2 iterations):
    # every seed's env steps per second of run time, and its final returns.
    (row,) = json.loads((tmp_path / "speed_ppo-minatar.json").read_text())["rows"].values()
    (measured,) = row["rounds"]
    assert sorted(measured) == ["canter", "canter-pure", "rejax"]
    for impl, result in measured.items():
        assert result["impl"] == impl and result["num_seeds"] == 2
        assert result["algo"] == "ppo-minatar"
        assert result["run_s"] > 0 and result["compile_s"] > 0 and result["peak_rss_mb"] > 0
        assert result["steps_per_s"] == pytest.approx(2 * 64 * 128 * 2 / result["run_s"])
        assert len(result["final_returns"]) == 2
    # The runner step: PPO CartPole, 4 iterations at 2 per interval (its table's first columns).
    overhead = (tmp_path / "runner_overhead.md").read_text().splitlines()
    assert any(line.startswith("| 2 | 2 |") for line in overhead), overhead
    summary = (tmp_path / "summary.md").read_text()
    assert "| PPO Breakout-MinAtar" in summary
    assert "skipped.txt" not in written


def test_the_suites_script_refuses_an_unknown_step(repo_root):
    done = subprocess.run(
        ["bash", "benchmarks/gpu/gpu_suites.sh", "--only", "minigrid"],
        capture_output=True,
        text=True,
        cwd=repo_root,
        timeout=30,
    )
    assert done.returncode == 2
    assert "no step 'minigrid'" in done.stderr and "brax-hopper" in done.stderr


def test_the_suites_scripts_steps_are_numbered_in_its_header_and_run_in_that_order(repo_root):
    """gpu_suites.sh: the steps `--only` takes are the header's numbered list, in order, and
    the script calls them in that order (a lent device runs them one call at a time)."""
    script = (repo_root / "benchmarks" / "gpu" / "gpu_suites.sh").read_text()
    every = " ".join(re.findall(r'^steps="(?:\$steps )?([^"]*)"', script, re.MULTILINE)).split()
    names = [name for name in every if ":" not in name]
    header = script.split("\nset -euo pipefail")[0]
    assert re.findall(r"^#\s+\d+\. ([\w-]+)", header, re.MULTILINE) == names
    called = re.findall(r"^ *step (\S+) ", script, re.MULTILINE)
    assert list(dict.fromkeys(called)) == names, called
    for row in (name for name in every if ":" in name):  # each row's step calls its algorithm
        step, algo = row.split(":")
        literal = rf"^ *step {step} {algo} "
        looped = (
            rf"^ *for algo in [^\n]*\b{algo}\b[^\n]*\n(?:[^\n]*\n){{0,3}} *step {step} \"\$algo\""
        )
        assert re.search(literal, script, re.M) or re.search(looped, script, re.M), row


@pytest.mark.parametrize("algo", ["ppo_continuous", "sac", "td3"])
def test_the_hopper_settings_build_their_runs(repo_root, algo):
    """benchmarks/returns/physics_settings.sh, the hopper rows of gpu_suites.sh and cpu_physics.sh:
    each algorithm's settings parse as returns.py parses them and build a training run, which
    checks the fields against each other (nothing compiles). The settings name no env; gymnax's
    Pendulum-v1 stands in for the hopper, whose Brax import and build took 7 s of the fast
    suite (the slow test above trains on it)."""
    import importlib

    from benchmarks.returns import returns

    name = {"ppo_continuous": "ppo_hopper", "sac": "sac_hopper", "td3": "td3_hopper"}[algo]
    shown = subprocess.run(
        ["bash", "-c", f'. benchmarks/returns/physics_settings.sh && echo "${name}"'],
        capture_output=True,
        text=True,
        cwd=repo_root,
        timeout=30,
    )
    module = importlib.import_module(f"canter.algorithms.{algo}")
    overrides = returns.parse_overrides(module.Config, shown.stdout.split())
    assert overrides["total_timesteps"] == 1_000_000 and overrides["gamma"] == 0.995
    config = module.Config(**overrides, env="Pendulum-v1")
    assert module.make_train(config).num_iterations > 0
