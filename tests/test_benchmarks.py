"""The benchmark scripts run end to end on tiny budgets and compute their statistics right."""

import argparse
import json
import subprocess
import sys

import numpy as np
import pytest

from benchmarks import harness
from benchmarks.returns import returns


def test_the_map_names_every_script_in_its_folder(repo_root):
    """benchmarks/README.md's map has a row for every script of returns/, speed/ and gpu/, named
    with its folder, and none for a script not there; the top holds only what they share."""
    import re

    top = repo_root / "benchmarks"
    text = (top / "README.md").read_text()
    rows = set(re.findall(r"^\| `((?:returns|speed|gpu)/[\w.-]+)` \|", text, re.MULTILINE))
    folders = ("returns", "speed", "gpu")
    scripts = {f"{d}/{p.name}" for d in folders for p in (top / d).iterdir() if p.is_file()}
    assert rows == scripts, (sorted(rows - scripts), sorted(scripts - rows))
    assert {p.name for p in top.iterdir() if p.is_file()} == {
        "README.md",
        "harness.py",
        "render_docs.py",
    }


def test_iqm_is_the_mean_of_the_middle_half():
    assert returns.iqm(np.array([8.0, 1, 7, 2, 6, 3, 5, 4])) == 4.5  # mean of 3, 4, 5, 6
    assert returns.iqm(np.array([0.0, 10, 10, 1000])) == 10.0
    low, high = harness.bootstrap_ci(np.arange(16.0), returns.iqm)
    assert low < returns.iqm(np.arange(16.0)) < high


def test_overrides_are_typed_and_unknown_fields_fail():
    from canter.algorithms import ppo

    parsed = returns.parse_overrides(ppo.Config, ["total_timesteps=2048", "gamma=0.9"])
    assert parsed == {"total_timesteps": 2048, "gamma": 0.9}
    assert isinstance(parsed["total_timesteps"], int)
    assert returns.parse_overrides(ppo.Config, ["anneal_lr=false"]) == {"anneal_lr": False}
    with pytest.raises(SystemExit, match="learning_rate"):
        returns.parse_overrides(ppo.Config, ["lr=1e-3"])


@pytest.mark.slow  # 20-30 s on 2 busy cores: CLI processes or benchmark runs
def test_returns_writes_a_result_and_a_table_row(tmp_path):
    overrides = {"total_timesteps": 2048, "eval_every": 1024, "num_eval_envs": 2}
    record = returns.run_one("ppo", "CartPole-v1", 2, overrides, tmp_path)
    assert len(record["final_eval_returns"]) == 2 and record["reference"] == 500.0
    saved = json.loads((tmp_path / "ppo__CartPole-v1.json").read_text())
    assert saved["mean"] == pytest.approx(np.mean(record["final_eval_returns"]))
    assert (tmp_path / "runs" / "ppo__CartPole-v1" / "learning_curve.png").exists()
    row = returns.table(tmp_path).splitlines()[-1]
    assert row.startswith("| ppo | CartPole-v1 | --total-timesteps 2048") and "| 2 |" in row


@pytest.mark.slow  # 20-30 s on 2 busy cores: CLI processes or benchmark runs
def test_returns_resume_continues_a_run_cut_short(tmp_path):
    from canter.algorithms import ppo, trainer

    overrides = {"total_timesteps": 4096, "eval_every": 1024, "num_eval_envs": 2}
    config = ppo.Config(**overrides, num_seeds=2)
    run_dir = tmp_path / "runs" / "ppo__CartPole-v1"
    first = trainer.run(
        config,
        ppo.make_train,
        algo="ppo",
        run_dir=run_dir,
        verbose=False,
        callbacks=[lambda event: event.index == 0],  # stop after the first interval
    )
    assert not first.summary["complete"]
    (run_dir / "kept").touch()  # a fresh run would clear the directory first
    record = returns.run_one("ppo", "CartPole-v1", 2, overrides, tmp_path, resume=True)
    assert (run_dir / "kept").exists()
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["complete"] and record["env_steps"] == summary["env_steps"] == 4096
    rows = (run_dir / "seed_0" / "metrics.csv").read_text().splitlines()[1:]
    assert [row.split(",")[0] for row in rows] == ["1", "2", "3", "4"]  # no gap, no repeat


@pytest.mark.slow  # three PPO programs compile: about 20 s
def test_seeds_in_turn_give_the_returns_of_seeds_together(tmp_path, monkeypatch):
    """`--seeds-per-program 1` (Craftax's memory) trains seed 0, then seed 1, each in a program
    of its own: the same final returns as both seeds in one vmapped program; a resumed row
    reads the finished parts back."""
    from canter.common.run import report

    overrides = {"total_timesteps": 2048, "eval_every": 1024, "num_eval_envs": 2}
    together = returns.run_one("ppo", "CartPole-v1", 2, overrides, tmp_path / "together")
    drawn = []
    plot = report.plot_learning_curves
    monkeypatch.setattr(report, "plot_learning_curves", lambda *a: drawn.append(a) or plot(*a))
    apart = returns.run_one("ppo", "CartPole-v1", 2, overrides, tmp_path, seeds_per_program=1)
    # The row's curve is drawn last, over both parts' seeds: 2 seeds x 2 intervals each.
    _, _, steps, metrics, _ = drawn[-1]
    assert steps == [1024, 2048] and metrics["eval"]["episodic_return"].shape == (2, 2)
    finals = metrics["eval"]["episodic_return"][:, -1]
    assert finals.tolist() == pytest.approx(together["final_eval_returns"], rel=1e-4)
    assert apart["final_eval_returns"] == pytest.approx(together["final_eval_returns"], rel=1e-4)
    assert apart["seeds_per_program"] == 1 and apart["env_steps"] == together["env_steps"]
    runs = tmp_path / "runs" / "ppo__CartPole-v1"
    assert sorted(p.name for p in runs.iterdir()) == [
        "learning_curve.png",  # over both parts' seeds (each part's own plots one)
        "seeds_0-0",
        "seeds_1-1",
    ]
    assert apart["curve"].endswith("runs/ppo__CartPole-v1/learning_curve.png")
    (runs / "seeds_1-1" / "kept").touch()  # a part that would run again would be cleared
    again = returns.run_one(
        "ppo", "CartPole-v1", 2, overrides, tmp_path, resume=True, seeds_per_program=1
    )
    assert (runs / "seeds_1-1" / "kept").exists()
    assert again["final_eval_returns"] == apart["final_eval_returns"]
    # A finished part of another config is never read into the row.
    with pytest.raises(SystemExit, match="another config .*gamma: saved 0.99, now 0.9"):
        returns.run_one(
            "ppo",
            "CartPole-v1",
            2,
            {**overrides, "gamma": 0.9},
            tmp_path,
            resume=True,
            seeds_per_program=1,
        )


@pytest.mark.slow  # compiles TD3's 256-unit networks: about 25 s
def test_speed_worker_measures_canter_updates_alone(repo_root):
    """The bound's worker: TD3 with the MuJoCo preset's networks on gymnax Pendulum-v1, 1,000
    random steps then 500 updates, reporting updates per second and the preset's warm-up."""
    args = ["--worker", "canter-updates", "td3", "1", "1500"]
    done = subprocess.run(
        [sys.executable, "benchmarks/speed/speed_mujoco.py", *args],
        capture_output=True,
        text=True,
        cwd=repo_root,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["env_steps"] == 1500 and result["preset_learning_starts"] == 25_000
    assert result["updates_per_s"] == pytest.approx(500 / result["run_s"])


def test_rounds_take_turns_and_ratios_stay_within_a_round(capsys):
    """Each round runs every implementation once, in order; a ratio divides by the peer's
    measurement of the same round, and the cell is the median with the rounds beside it."""
    calls = []
    times = {"canter": [2.0, 6.0, 3.0], "rejax": [1.0, 2.0, 1.0]}

    def run(impl):
        calls.append(impl)
        return {"run_s": times[impl][calls.count(impl) - 1]}

    measured = harness.rounds(3, ("canter", "rejax"), run, lambda r: f"{r['run_s']} s", "x ")
    assert calls == ["canter", "rejax"] * 3
    assert harness.ratios(measured, "canter", "rejax", "run_s") == [2.0, 3.0, 3.0]
    assert harness.ratio_cell([2.0, 3.0, 3.0]) == "3.00 (2.00, 3.00, 3.00)"
    assert harness.median(measured, "canter", "run_s") == 3.0
    assert "x round 1: canter 6.0 s, rejax 2.0 s" in capsys.readouterr().out
    assert harness.mean([1.0, float("nan"), 3.0]) == 2.0


def test_speed_table_with_the_one_core_bound(monkeypatch, tmp_path):
    """ppo-dp adds the 1-core column: the workers run in turn, rejax last; every row has as many
    cells as the header, and the bound is half the 1-core run time over rejax's, per round."""
    from benchmarks.speed import speed_dp

    impls = speed_dp.IMPLS
    assert impls == ("canter", "canter-dp", "canter-1core", "rejax")
    run_s = dict(zip(impls, (4.0, 5.0, 6.0, 4.0), strict=True))
    spawned = []

    def spawn(script, impl, num_seeds, *args):
        spawned.append((script, impl, num_seeds, args))
        return dict(
            compile_s=1.0,
            run_s=run_s[impl],
            steps_per_s=1.0 / run_s[impl],
            peak_rss_mb=100.0,
            final_returns=[500.0],
        )

    monkeypatch.setattr(harness, "spawn", spawn)
    rows = harness.head_to_head(speed_dp.SCRIPT, 2, [1], impls)
    assert spawned == [(speed_dp.SCRIPT, impl, 1, ()) for impl in impls] * 2
    lines = harness.speed_table(rows, impls).splitlines()
    assert len({line.count("|") for line in lines}) == 1, lines
    assert "| 1 | run time (s) | 4.00 | 5.00 | 6.00 | 4.00 | 1.00 (1.00, 1.00) |" in lines[2]
    assert "0.75x rejax's run time (per round: 0.75, 0.75)" in harness.two_core_bound(rows[1])
    assert harness.impls("canter", "canter-pure") == ("canter", "canter-pure", "rejax")
    harness.report(tmp_path, "speed_ppo-dp", rows, impls)
    written = (tmp_path / "speed_ppo-dp.md").read_text()
    assert written.startswith("\n".join(lines) + "\n\nMachine: ")
    assert json.loads((tmp_path / "speed_ppo-dp.json").read_text())["rows"]["1"]["run_s"] == run_s


def test_workers_route_each_impl_and_count_every_seed(monkeypatch):
    """A worker sends `canter` (and `canter-dp`) to the CLI runner and the others to
    `jit(vmap(train))`, and its env steps/s counts every seed's steps: PPO's iterations x envs x
    steps, DQN's and PQN's total_timesteps (timers replaced: nothing is compiled or run)."""
    from benchmarks.speed import rejax_peer, speed_dp, speed_dqn, speed_minatar, speed_ppo

    timed = []

    def timed_cli(config, make_train, algo, data_parallel=False):
        timed.append(("cli", algo, config.num_seeds, data_parallel))
        return 1.0, 2.0, [5.0] * config.num_seeds

    def timed_jit(train, final_return, num_seeds):
        timed.append(("jit", train, num_seeds))
        return 1.0, 2.0, [5.0] * num_seeds

    monkeypatch.setattr(harness, "timed_cli", timed_cli)
    monkeypatch.setattr(harness, "timed_jit", timed_jit)
    monkeypatch.setattr(rejax_peer, "ppo", lambda setup, eval_every: (eval_every, None))
    monkeypatch.setattr(rejax_peer, "dqn", lambda config: (config.num_seeds, None))

    dp = speed_dp.work("canter-dp", 1)
    assert timed.pop() == ("cli", "ppo", 1, True)
    assert dp["steps_per_s"] == 100 * 1024 * 16 / 2.0 and dp["algo"] == "ppo-dp"
    ppo = speed_ppo.work("rejax", 2, 4, 16, 4)
    assert timed.pop() == ("jit", 4, 2)  # evaluated at the end of a 4-iteration run
    assert ppo["steps_per_s"] == 2 * 4 * 16 * 4 / 2.0 and ppo["final_returns"] == [5.0, 5.0]
    assert ppo["num_envs"] == 4 and ppo["num_steps"] == 16 and ppo["iterations"] == 4
    dqn = speed_dqn.work("canter", 8, 500_000)
    assert timed.pop() == ("cli", "dqn", 8, False) and dqn["steps_per_s"] == 8 * 500_000 / 2.0
    speed_dqn.work("rejax", 8, 500_000)
    assert timed.pop() == ("jit", 1, 8)  # one seed's config, vmapped over 8 keys
    pqn = speed_minatar.work("canter", 1, "pqn", 50)
    assert timed.pop() == ("cli", "pqn", 1, False) and pqn["algo"] == "pqn-minatar"
    ceiling = speed_minatar.work("random", 1, "pqn", 50)
    assert timed.pop()[0] == "jit" and ceiling["steps_per_s"] == pqn["steps_per_s"]
    dqn_minatar = speed_dqn.work("canter", 1, 30_000, "minatar")
    assert timed.pop() == ("cli", "dqn", 1, False) and dqn_minatar["steps_per_s"] == 15_000
    dqn_ceiling = speed_dqn.work("random", 1, 30_000, "minatar")
    assert timed.pop()[0] == "jit" and dqn_ceiling["algo"] == "dqn-minatar"
    acting = speed_dqn.work("canter-acting", 1, 30_000, "minatar")
    assert timed.pop() == ("cli", "dqn", 1, False) and acting["impl"] == "canter-acting"
    assert speed_dqn.minatar_config(30_000, acting_only=True).learning_starts == 30_000
    assert speed_dqn.minatar_config(30_000).learning_starts == 5_000


@pytest.mark.parametrize(
    "script",
    ["ppo", "dqn", "offpolicy", "minatar", "dp", "host", "mujoco", "craftax", "replay", "frontier"],
)
def test_speed_scripts_show_help_without_the_peers(repo_root, script):
    """Each comparison loads and explains itself without rejax, sbx or MuJoCo installed (the
    peers are imported inside the workers), naming the command that reproduces it."""
    path = f"benchmarks/speed/speed_{script}.py"
    done = subprocess.run(
        [sys.executable, path, "--help"], capture_output=True, text=True, cwd=repo_root, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert f"python {path}" in done.stdout and "--repeats" in done.stdout


def test_mujoco_update_bound_and_table_keep_each_algorithm():
    """The bound counts only post-warm-up updates (1e5 steps, 25,000 warm-up, 250 updates/s:
    300 s, so 333 env steps/s, 3.33x a 100 steps/s sbx); the table keeps an algorithm not
    measured this time, and every row has the header's cells."""
    from benchmarks.speed import speed_mujoco

    free = {"updates_per_s": 250.0, "preset_learning_starts": 25_000}
    bound, ratios = speed_mujoco.update_bound(free, [100.0, 200.0])
    assert bound == pytest.approx(1e5 / 300.0)
    assert ratios == pytest.approx([bound / 100.0, bound / 200.0])
    entry = dict(repeats=1, machine="m", date="d")
    measured = {
        "td3": dict(entry, rows=["| td3 | env steps/s | 2 | 1 | 2.00 (2.00) |"]),
        "sac": dict(entry, rows=["| sac | env steps/s | 3 | 1 | 3.00 (3.00) |"]),
    }
    lines = speed_mujoco.mujoco_table(measured).splitlines()
    table = [line for line in lines if line.startswith("|")]
    assert [line.split("|")[1].strip() for line in table[2:]] == ["sac", "td3"]
    assert len({line.count("|") for line in table}) == 1, table
    assert "- td3: 1 round(s), m, d." in lines


def test_peer_returns_table_sets_sbx_seeds_beside_canter(tmp_path, capsys):
    """sbx's seeds of one (algo, env, budget) sit beside canter's seeds of the same preset and
    budget, gathered over several `returns*/` directories; a canter run at another budget,
    with other changed settings, or of an earlier version of the preset than sbx ran is left
    out, and a group without canter says so."""
    from benchmarks.returns import peer_returns

    out, results = tmp_path / "peer", tmp_path / "results"
    for seed, curve in ((0, [0.0, 1000.0]), (1, [0.0, 3000.0])):
        result = dict(
            algo="td3",
            env="Hopper-v5",
            env_steps=20_000,
            seed=seed,
            curve=[{"eval_return": r} for r in curve],
            settings=dict(seed=seed, tau=0.005, total_timesteps=20_000),
        )
        peer_returns.write_json(out / f"sbx_td3__Hopper-v5__seed{seed}.json", result)
    peer_returns.write_json(
        out / "sbx_sac__Hopper-v5__seed0.json",
        dict(algo="sac", env="Hopper-v5", env_steps=20_000, seed=0, curve=[{"eval_return": 9.0}]),
    )

    def canter_run(folder, algo, steps, overrides, curves, tau=0.005, new_field=True) -> None:
        row = dict(env_steps=steps, preset="Hopper-v5", overrides=overrides)
        peer_returns.write_json(results / folder / f"{algo}__Hopper-v5.json", row)
        config = dict(algo=algo, seed=min(curves), num_seeds=len(curves), tau=tau)
        if not new_field:  # a program older than the settings field sbx also has: not a change
            config.pop("tau")
        peer_returns.write_json(
            results / folder / "runs" / f"{algo}__Hopper-v5/config.json", config
        )
        for seed, curve in curves.items():
            log = results / folder / "runs" / f"{algo}__Hopper-v5" / f"seed_{seed}" / "metrics.csv"
            log.parent.mkdir(parents=True)
            rows = [f"{i + 1},{r}" for i, r in enumerate(curve)]
            log.write_text("\n".join(["interval,eval/episodic_return", *rows]) + "\n")

    canter_run("returns", "td3", 20_000, {"total_timesteps": 20_000}, {0: [5.0, 300.0]})
    canter_run("returns_more", "td3", 20_000, {"seed": 1}, {1: [5.0, 400.0], 2: [7.0, 500.0]})
    canter_run("returns_before", "td3", 20_000, {"seed": 3}, {3: [1e4, 1e4]}, tau=0.01)
    canter_run("returns_older", "td3", 20_000, {"seed": 4}, {4: [9.0, 600.0]}, new_field=False)
    canter_run("returns_other", "td3", 20_000, {"tau": 0.01}, {5: [1e4, 1e4]})
    canter_run("returns_short", "sac", 10_000, {}, {0: [1.0]})
    lines = peer_returns.table(out, results, last=2).splitlines()
    assert lines[2:] == [
        "| sac | Hopper-v5 | 20,000 | sbx | 0 | 9 (9) | 9 (9) |  |",
        "| sac | Hopper-v5 | 20,000 | canter | | no run at this budget | | |",
        "| td3 | Hopper-v5 | 20,000 | sbx | 0, 1 | 2,000 (1,000, 3,000) | 1,000 (500, 1,500) |  |",
        "| td3 | Hopper-v5 | 20,000 | canter | 0, 1, 2, 4 | 450 (300, 400, 500, 600) "
        "| 228 (152, 202, 254, 304) | -772: t = -1.54 (p = 0.37), permutation p = 0.07 |",
    ]
    assert "returns_before" in capsys.readouterr().err  # said, not silently dropped


def test_welch_t_test_against_its_formula():
    """t = (mean(a) - mean(b)) / sqrt(va / na + vb / nb), sample variances, and the two-sided p
    of Student's t at the Welch-Satterthwaite degrees of freedom; too few values or no spread
    give NaN, not a number that looks like evidence."""
    from scipy import stats

    from benchmarks.harness import welch

    a, b = [1.0, 2.0, 3.0, 4.0], [2.0, 4.0, 6.0, 8.0, 10.0]
    sa, sb = np.var(a, ddof=1) / len(a), np.var(b, ddof=1) / len(b)  # 5/12 and 2
    t = (np.mean(a) - np.mean(b)) / np.sqrt(sa + sb)
    df = (sa + sb) ** 2 / (sa**2 / (len(a) - 1) + sb**2 / (len(b) - 1))
    assert t == pytest.approx(-2.2514, abs=1e-4) and df == pytest.approx(5.521, abs=1e-3)
    np.testing.assert_allclose(welch(a, b), [t, 2 * stats.t.sf(abs(t), df)], rtol=1e-12)
    assert welch(b, a)[0] == pytest.approx(-t)
    assert all(np.isnan(welch([1.0], b))) and all(np.isnan(welch([1.0, 1.0], [1.0, 1.0])))


def test_permutation_p_is_exact():
    """Two groups apart: only the observed split (1 of 15) is as extreme; equal groups: 1."""
    from benchmarks.returns.peer_returns import permutation_p

    assert permutation_p([10.0, 11.0], [0.0, 1.0, 2.0, 3.0]) == 1 / 15
    assert permutation_p([1.0, 1.0], [1.0, 1.0]) == 1.0


@pytest.mark.slow  # 20-30 s on 2 busy cores: CLI processes or benchmark runs
def test_td3_variants_change_only_what_they_name():
    """Each variant is td3.py with its flags: sbxrule's targets follow at the first critic update
    (td3.py's wait for the delayed actor), flaxinit starts from zero biases."""
    import sys

    import jax
    from canter.algorithms import td3

    from benchmarks.returns import td3_variants

    sbx = sys.modules[f"canter.algorithms.{td3_variants.load_variant('sbxrule')}"]
    flax = sys.modules[f"canter.algorithms.{td3_variants.load_variant('flaxinit')}"]
    small = dict(hidden_size=8, batch_size=4, learning_starts=1)

    def start(module):
        train = module.make_train(module.Config(**small))
        return train, train.init(jax.random.key(0))

    def biases(agent):
        return [layer.bias for net in (agent.actor, agent.critic.nets) for layer in net.layers]

    assert all((bias == 0).all() for bias in biases(start(flax)[1].agent))
    assert not all((bias == 0).all() for bias in biases(start(td3)[1].agent))
    for module, moved in ((td3, False), (sbx, True)):
        # One iteration, one update (count 1 of policy_frequency 2: no actor update).
        train, state = start(module)
        after, _ = train.step(state, jax.numpy.int32(0))
        first = lambda critic: critic.nets.layers[0].weight  # noqa: E731
        assert bool((first(after.agent.critic) != first(state.agent.critic)).any())
        target_moved = bool((first(after.agent.target_critic) != first(state.agent.critic)).any())
        assert target_moved is moved, module.__name__


def test_random_returns_draw_valid_actions_only():
    """ProbeMasked pays 0, 1 or 10 for its actions and forbids action 2: uniformly random valid
    actions average 0.5 (3.67 if the mask were ignored)."""
    from benchmarks.returns import random_returns

    result = random_returns.random_return("ProbeMasked", episodes=2000)
    assert result["mean_return"] == pytest.approx(0.5, abs=0.05)
    assert result["mean_length"] == 1.0


# A preset's row names the preset (the game alone); a row run with --env names the env.
@pytest.mark.parametrize("env", ["craftax:Craftax-Symbolic-v1", "Craftax-Symbolic-v1"])
def test_craftax_rows_give_the_score_as_a_percentage_of_the_maximum(tmp_path, env):
    from benchmarks.returns import returns

    record = dict(
        algo="ppo",
        env=env,
        num_seeds=4,
        env_steps=983_040,
        overrides={},
        preset="Craftax-Symbolic-v1",
        label=None,
        sticky_action_prob=0.0,
        mean=4.52,
        std=0.3,
        iqm=4.5,
        iqm_ci95=[4.2, 4.8],
        final_train_return_mean=4.0,
        train_statistic=returns.TRAIN_STATISTIC,
        run_s=3600.0,
        machine="2 CPU cores (x86_64)",
    )
    path = tmp_path / "ppo__craftax-Craftax-Symbolic-v1.json"
    path.write_text(json.dumps(record))
    row = returns.table(tmp_path).splitlines()[-1]
    # 4.0 of 226: the training return's score (the sampled policy's, as the README's)
    published = "published 2.2% at 1,000,000 (Craftax README, PPO)"
    score = "| 60 min (2-core CPU) | score 1.8% of the maximum"
    assert f"| 4.0 {score} (final train return); {published}" in row
    assert "sticky" not in row
    # A record measured before the statistic was the references' says so.
    del record["train_statistic"]
    path.write_text(json.dumps(record))
    row = returns.table(tmp_path).splitlines()[-1]
    assert f"| 4.0 (old) {score} (final train return (old))" in row
    # Kept from a preset since changed, the record leaves the table for the earlier presets'.
    path.rename(tmp_path / "ppo__craftax-Craftax-Symbolic-v1__before-43.json")
    assert len(returns.table(tmp_path).splitlines()) == 2  # the header alone
    assert "| 4.0 (old) |" in returns.table(tmp_path, earlier=True).splitlines()[-1]


# A preset's row names the task alone (CheetahRun); a row run with --env names it in full.
@pytest.mark.parametrize("env", ["playground:CheetahRun", "CheetahRun"])
def test_playground_rows_set_the_figure_reading_at_the_configs_budget_beside_random(env):
    """PPO's reading is at the 6e7 env steps its config asks; SAC lists CheetahRun among the
    tasks it runs for 1e7. Both name where the number came from and give the random return."""
    from benchmarks.returns import returns

    ppo, ppo_budget, ppo_source = returns.reference("ppo_continuous", env)
    sac, sac_budget, sac_source = returns.reference("sac", env)
    assert (ppo, ppo_budget, sac, sac_budget) == (900, 60_000_000, 920, 10_000_000)
    assert "PPO, figure read second-hand" in ppo_source and "SAC" in sac_source
    assert "random valid actions: 3.17" in ppo_source
    assert returns.reference("td3", env)[0] is None  # the report has no TD3 curves


def test_profile_sorts_a_programs_ops_by_kind_and_counts_their_self_time(tmp_path):
    """benchmarks/speed/profile_ops.py on a small program: the trace jax writes on this backend is
    read, its matmul is found through the fusion that holds it, and a loop's time excludes its
    body."""
    import jax
    import jax.numpy as jnp

    from benchmarks.speed import profile_ops

    def program(w, x):
        def body(h, _):
            return jnp.tanh(h @ w), None

        return jax.lax.scan(body, x, None, length=20)[0].T.sum(0)

    w, x = jnp.eye(64) * 0.5, jnp.ones((256, 64))
    compiled = jax.jit(program).lower(w, x).compile()
    kinds = profile_ops.op_kinds(compiled.as_text())
    assert any(kind == "matmul" for kind, _ in kinds.values()), kinds
    assert any(kind == "loop control" for kind, _ in kinds.values()), kinds
    compiled(w, x).block_until_ready()
    run = lambda: compiled(w, x).block_until_ready()  # noqa: E731
    wall, times, counts = profile_ops.traced(run, tmp_path)
    row = profile_ops.summarise(times, counts, kinds, per=20)
    assert row["kinds"]["matmul"] > 0, (times, kinds)
    assert row["runs"]["matmul"] == 1.0, counts  # the scan's 20 matmuls: one per step, each counted
    assert wall > 0
    assert len(row["top"]) <= profile_ops.TOP and all(op["ms"] >= 0 for op in row["top"])
    rates = profile_ops.matmul_rates(repeats=1, steps=2)
    assert "1024x400 @ 400x256" in rates and all(rate > 0 for rate in rates.values())

    # Self time per thread: a loop of 10 us holding two ops of 3 us keeps 4 us.
    events = [
        dict(ph="X", name="while.1", ts=0, dur=10, pid=1, tid=1),
        dict(ph="X", name="dot.2", ts=1, dur=3, pid=1, tid=1),
        dict(ph="X", name="add.3", ts=5, dur=3, pid=1, tid=1),
        dict(ph="X", name="dot.2", ts=2, dur=5, pid=1, tid=2),
        dict(ph="X", name="ThunkExecutor::Execute", ts=0, dur=10, pid=1, tid=1),
    ]
    ops = profile_ops.op_events({"traceEvents": events})
    assert profile_ops.self_times(ops) == {"while.1": 4, "dot.2": 8, "add.3": 3}
    # A trace the profiler cut short (its ops span 10 us of a 1 s run) is refused.
    with pytest.raises(SystemExit, match="smaller --size"):
        profile_ops.check_covered(ops, seconds=1.0)
    profile_ops.check_covered(ops, seconds=10e-6)

    # On a GPU: the kernels of the device's process, by the op that launched them (a gemm and
    # its epilogue kernel are one op); the host's events of the same op are not counted.
    names = [("/device:GPU:0 (NVIDIA H100)", 1), ("/host:CPU", 2)]
    gpu = [dict(ph="M", name="process_name", pid=pid, args=dict(name=n)) for n, pid in names]
    gpu += [
        dict(ph="X", name="nvjet_sgemm", ts=0, dur=6, pid=1, tid=7, args=dict(hlo_op="gemm.4")),
        dict(ph="X", name="loop_fusion", ts=6, dur=2, pid=1, tid=7, args=dict(hlo_op="gemm.4")),
        dict(ph="X", name="gemm.4", ts=0, dur=50, pid=2, tid=3, args=dict(hlo_op="gemm.4")),
    ]
    ops = profile_ops.op_events({"traceEvents": gpu})
    assert profile_ops.self_times(ops) == {"gemm.4": 8} and len(ops) == 2
    hlo = """ENTRY %main (p: f32[8,4], q: f32[4,2]) -> f32[8,2] {
  %p = f32[8,4]{1,0} parameter(0)
  %q = f32[4,2]{1,0} parameter(1)
  ROOT %gemm.4 = f32[8,2]{1,0} custom-call(%p, %q), custom_call_target="__cublas$lt$matmul"
}"""
    assert profile_ops.op_kinds(hlo)["gemm.4"] == ("matmul", "f32[8,2]")


def test_profile_tables_count_the_minatar_iterations_matmuls_and_set_the_sides_apart():
    """The matmul work of gymnax-blines' MinAtar PPO iteration, by hand: actor 400*256 +
    256*256 + 256*3 and critic 400*256 + 256*256 + 256 multiply-adds per sample; the update has
    3x that less the two first layers' input gradients, 4 epochs; 64 x 128 samples."""
    from benchmarks.speed import profile_ops, speed_minatar, speed_ppo

    config = speed_ppo.canter_config(speed_minatar.PPO_SETUP, 1)
    actor, critic = 400 * 256 + 256 * 256 + 256 * 3, 400 * 256 + 256 * 256 + 256
    update = 3 * (actor + critic) - 2 * 400 * 256
    expected = 2 * 64 * 128 * (actor + critic + 4 * update) / 1e9
    assert profile_ops.iteration_gflop(config, 400, 3) == pytest.approx(expected)
    assert expected == pytest.approx(58.33, abs=0.01)

    def side(matmul_ms: float, wall_ms: float) -> dict:
        kinds = dict.fromkeys(profile_ops.KINDS, 1.0) | {"matmul": matmul_ms}
        top = [
            dict(op="ynn_fusion.1", kind="matmul", shape="f32[2,2] f32[2,2] -> f32[2,2]", ms=1.0)
        ]
        runs = dict.fromkeys(profile_ops.KINDS, 10.0)
        return dict(kinds=kinds, runs=runs, top=top, wall_ms=wall_ms, plain_ms=wall_ms, cpu_ms=1.0)

    record = dict(machine="m", work="ppo-minatar", size=4, repeats=2, iteration_gflop=58.33)
    record["matmul_gflops"] = {"1024x400 @ 400x256": 130.0}
    record["rounds"] = {
        "canter": [side(400.0, 500.0), side(500.0, 600.0)],
        "rejax": [side(500.0, 600.0), side(500.0, 600.0)],
    }
    lines = profile_ops.table(record).splitlines()
    assert lines[0] == "ms per iteration (4 iterations, 1 seed, median of 2 rounds)"
    eight = profile_ops.table(record | {"seeds": 8}).splitlines()
    assert eight[0] == "ms per iteration (4 iterations, 8 seeds vmapped, median of 2 rounds)"
    assert "An iteration's matmuls: 58.3 GFLOP (8 seeds, the same on both sides)." in eight
    assert "| matmul | 450.0 | 500.0 | 0.90 |" in lines
    assert "| wall time, untraced | 550.0 | 600.0 | 0.92 |" in lines
    assert "| ops run per iteration | 60 | 60 | 1.00 |" in lines
    whole = [line for line in lines if "whole run per iteration" in line]
    assert whole[0].startswith("| canter's") and whole[0].endswith("| 106 |"), whole
    assert "| `1024x400 @ 400x256` alone, 100 in a scan (best of 2) | 130 |" in lines

    # DQN: microseconds per env step, its two sides, no matmul rates.
    record = dict(machine="m", work="dqn-minatar", size=4000, repeats=2)
    record["rounds"] = {"canter": [side(1.0, 1.5)] * 2, "canter, no updates": [side(0.1, 0.2)] * 2}
    lines = profile_ops.table(record).splitlines()
    assert lines[0] == "us per env step (4000 env steps, 1 seed, median of 2 rounds)"
    assert "| kind | canter | canter, no updates | canter / canter, no updates |" in lines
    assert "| wall time, untraced | 1500.0 | 200.0 | 7.50 |" in lines
    assert not any("GFLOP" in line for line in lines)


GPU_HLO = """HloModule m

%body (p: (s32[], f32[4])) -> (s32[], f32[4]) {
  %p = (s32[], f32[4]{0}) parameter(0)
  %i = s32[] get-tuple-element(%p), index=0
  %x = f32[4]{0} get-tuple-element(%p), index=1
  %f = f32[4]{0} fusion(%x), kind=kLoop, calls=%fused_tanh
  %c = f32[4]{0} copy(%f)
  %n = s32[] fusion(%i), kind=kLoop, calls=%fused_add
  ROOT %t = (s32[], f32[4]{0}) tuple(%n, %c)
}

%cond (p: (s32[], f32[4])) -> pred[] {
  %p = (s32[], f32[4]{0}) parameter(0)
  %i = s32[] get-tuple-element(%p), index=0
  ROOT %lt = pred[] fusion(%i), kind=kLoop, calls=%fused_lt
}

%yes (a: f32[4]) -> f32[4] {
  %a = f32[4]{0} parameter(0)
  %g = f32[4]{0} custom-call(%a), custom_call_target="__cublas$gemm"
  ROOT %e = f32[4]{0} fusion(%g), kind=kLoop, calls=%fused_relu
}

%no (a: f32[4]) -> f32[4] {
  %a = f32[4]{0} parameter(0)
  ROOT %b = f32[4]{0} bitcast(%a)
}

ENTRY %main (x: f32[4], b: pred[]) -> f32[4] {
  %x = f32[4]{0} parameter(0)
  %b = pred[] parameter(1)
  %z = s32[] constant(0)
  %t = (s32[], f32[4]{0}) tuple(%z, %x)
  %w = (s32[], f32[4]{0}) while(%t), condition=%cond, body=%body, backend_config={TRIPS}
  %u = (s32[], f32[4]{0}) while(%t), condition=%cond, body=%body
  %y = f32[4]{0} get-tuple-element(%w), index=1
  %k = f32[4]{0} conditional(%b, %y, %y), true_computation=%yes, false_computation=%no
  ROOT %s = f32[4]{0} sort(%k), dimensions={0}, to_apply=%less
}
""".replace("{TRIPS}", '{"known_trip_count":{"n":"10"}}')


def test_gpu_kernels_counts_launches_through_loops_and_conditionals():
    """benchmarks/gpu/gpu_kernels.py on a hand-written module: a fusion, a copy and a library call
    are a kernel each, bitcasts and tuples none; a loop of known trips runs its body and its
    condition per trip, one of unknown trips once; a conditional its larger (or smaller)
    branch. Then on a program XLA:CPU compiled (the same text format as a GPU's): the loop of
    the unit of work is found by its trip count, with the loop nested in it."""
    import jax
    import jax.numpy as jnp

    from benchmarks.gpu import gpu_kernels

    computations, entry = gpu_kernels.parse(GPU_HLO)
    assert entry == "main" and set(computations) == {"body", "cond", "yes", "no", "main"}
    # while: 10 x (3 + 1); the unknown-trip while: 3 + 1; conditional: 2 or 0; sort: 1
    assert gpu_kernels.launches(computations, "main") == 40 + 4 + 2 + 1
    assert gpu_kernels.launches(computations, "main", pick=min) == 40 + 4 + 0 + 1
    found = gpu_kernels.loops(computations, "main")
    assert found == [dict(depth=0, trips=10, per_trip=4), dict(depth=0, trips=None, per_trip=4)]
    assert gpu_kernels.per_unit(computations, "main", 10) == (4, [])
    with pytest.raises(SystemExit, match="no loop of 7 trips"):
        gpu_kernels.per_unit(computations, "main", 7)

    def program(x):
        def inner(h, _):
            return jnp.tanh(h) * 1.5, None

        def outer(h, _):
            return jax.lax.scan(inner, jnp.sin(h), None, length=13)[0] + 1.0, None

        return jax.lax.scan(outer, x, None, length=7)[0]

    hlo = jax.jit(program).lower(jnp.ones(8)).compile().as_text()
    computations, entry = gpu_kernels.parse(hlo)
    per_trip, inside = gpu_kernels.per_unit(computations, entry, 7)
    assert [loop["trips"] for loop in inside] == [13] and inside[0]["depth"] == 0
    assert per_trip >= 13 * inside[0]["per_trip"] + 1
    total = gpu_kernels.launches(computations, entry)
    assert total >= 7 * per_trip

    record = dict(machine="m", target="an NVIDIA H100", work="ppo-minatar")
    row = {"launches": 80, "loops": [dict(depth=0, trips=8, per_trip=9)]}
    record["seeds"] = {"1": {"canter": row, "rejax": row | {"launches": 100}}}
    text = gpu_kernels.table(record)
    assert "| 1 | 80 | 100 | 0.80 |" in text and "| canter | loop 1 | 8 | 9 |" in text


FAKE_CB_PPO = """
import argparse
import wandb

parser = argparse.ArgumentParser()
for flag in ("--env_name", "--total_timesteps", "--num_envs", "--num_steps", "--lr", "--seed"):
    parser.add_argument(flag)
parser.add_argument("--use_wandb", action=argparse.BooleanOptionalAction, default=True)
parser.add_argument("--debug", action=argparse.BooleanOptionalAction, default=True)
args = parser.parse_args()
assert args.use_wandb and args.debug and args.lr == "0.0003" and args.num_envs == "256"
wandb.init(project=None)
updates = int(args.total_timesteps) // int(args.num_envs) // int(args.num_steps)
for update in range(updates):  # CB's batch_log drops a NaN statistic: no episode ended
    wandb.log({"episode_length": 9.0} if update == 2 else {"episode_return": 1.0 + update})
"""


def test_the_craftax_peer_keeps_what_cb_logs_per_update_and_reads_the_last(tmp_path, repo_root):
    """benchmarks/returns/craftax_peer.py against a stand-in for CB's ppo.py (CB is not on PyPI):
    CB's flags reach it, every `wandb.log` is kept, and an update with no ended episode is None."""
    import subprocess
    import sys

    (tmp_path / "cb").mkdir()
    (tmp_path / "cb" / "ppo.py").write_text(FAKE_CB_PPO)
    command = [sys.executable, "benchmarks/returns/craftax_peer.py", "--cb-dir", tmp_path / "cb"]
    command += ["--total-timesteps", 4 * 256 * 16, "--out", tmp_path, "--returns", tmp_path]
    done = subprocess.run([str(c) for c in command], capture_output=True, text=True, cwd=repo_root)
    assert done.returncode == 0, done.stderr[-2000:]
    record = json.loads((tmp_path / "cb_ppo__Craftax-Symbolic-v1__seed0.json").read_text())
    assert record["episode_return"] == [1.0, 2.0, None, 4.0] and record["updates"] == 4
    assert record["final_train_return"] == 4.0
    assert record["score_percent"] == pytest.approx(400 / 226)
    assert "--num_envs=256 --num_steps=16 --lr=0.0003" in record["command"]
    # ppo_rnd's preset trains at CB's default lr, 2e-4 (its RND 1M sweep sets none); CB's ppo.py
    # and ppo_rnd.py take the same flags.
    from benchmarks.returns import craftax_peer

    flags = dict(env="Craftax-Symbolic-v1", total_timesteps=10**6, num_envs=256, num_steps=16)
    rnd = argparse.Namespace(script="ppo_rnd", lr=None, seed=3, **flags)
    assert "--lr=0.0002" in craftax_peer.cb_arguments(rnd)
    assert "--lr=0.001" in craftax_peer.cb_arguments(
        argparse.Namespace(**{**vars(rnd), "lr": 1e-3})
    )


def test_the_craftax_table_sets_cb_seeds_beside_canters_finished_programs(tmp_path):
    """canter's seeds come from every finished `--seeds-per-program` part in seed order (a part
    cut short is left out), CB's from its records, each budget in a row of its own; Welch's
    t-test against CB's seeds of the same budget, a seed with no ended episode left out of it;
    an env with no run has no rows, and seeds repeated across parts are refused."""
    from benchmarks.returns import craftax_peer

    out, returns = tmp_path / "peer", tmp_path / "returns"
    run = returns / "runs" / "ppo__Craftax-Symbolic-v1"
    parts = {
        "seeds_10-11": dict(complete=True, seeds=[10, 11], final_return=[4.4, 4.8]),
        "seeds_2-3": dict(complete=True, seeds=[2, 3], final_return=[4.0, 5.0]),
        "seeds_12-13": dict(complete=False, seeds=[12, 13], final_return=[0.0, 0.0]),
    }
    for name, part in parts.items():
        part.update(env_steps=999_424, compile_s=60.0, run_s=2_940.0)
        craftax_peer.write_json(run / name / "summary.json", part)
    cb = ((0, 5.0, 999_424), (1, 6.0, 999_424), (2, None, 999_424), (3, 1.0, 16_384))
    for seed, final, steps in cb:
        record = dict(seed=seed, final_train_return=final, env_steps=steps, wall_s=1_200.0)
        craftax_peer.write_json(out / f"cb_ppo__Craftax-Symbolic-v1__seed{seed}.json", record)
    lines = craftax_peer.table(out, returns).splitlines()
    gap = np.mean([4.0, 5.0, 4.4, 4.8]) - 5.5
    t, p = craftax_peer.harness.welch([4.0, 5.0, 4.4, 4.8], [5.0, 6.0])
    env = "| Craftax-Symbolic-v1 "
    assert lines[2:] == [
        f"{env}| ppo | Craftax_Baselines | 16,384 | 3 | 1.00 (1.00) | 0.44% | 2.2% "
        "| 20 min (1) |  |",
        f"{env}| ppo | Craftax_Baselines | 999,424 | 0, 1, 2 | 5.50 (5.00, 6.00, -) | 2.43% "
        "| 2.2% | 60 min (1 + 1 + 1) |  |",
        f"{env}| ppo | canter | 999,424 | 2, 3, 10, 11 | 4.55 (4.00, 5.00, 4.40, 4.80) | 2.01% "
        f"| 2.2% | 100 min (2 + 2) | {gap:+.2f}: t = {t:.2f} (p = {p:.2f}) |",
        f"{env}| ppo_rnn | | | | no finished run | | 2.3% | | |",
        f"{env}| ppo_rnd | | | | no finished run | | 2.2% | | |",
        f"{env}| pqn_rnn | | | | no finished run | | none | | |",
        f"{env}| ppo_trxl | | | | no finished run | | none | | |",
    ]
    assert t < 0 and 0 < p < 1
    craftax_peer.write_json(run / "seeds_2-11" / "summary.json", parts["seeds_2-3"])
    with pytest.raises(SystemExit, match="repeat"):
        craftax_peer.table(out, returns)


def test_the_pqn_table_sets_purejaxqls_seeds_beside_canters_row(tmp_path):
    from benchmarks import harness
    from benchmarks.returns import pqn_peer

    out, returns = tmp_path / "peer", tmp_path / "returns"
    peer = dict(env="Acrobot-v1", env_steps=499_712, final_test_returns=[-90.0, -100.0, -95.0])
    pqn_peer.write(out / "pjq_pqn__Acrobot-v1.json", peer)
    pqn_peer.write(out / "pjq_pqn__CartPole-v1.json", peer | dict(env="CartPole-v1"))
    row = dict(env_steps=499_712, final_eval_returns=[-80.0, -84.0, -82.0, -86.0])
    pqn_peer.write(returns / "pqn__Acrobot-v1.json", row)
    t, p = harness.welch(row["final_eval_returns"], peer["final_test_returns"])
    assert pqn_peer.table(out, returns).splitlines()[2:] == [
        "| Acrobot-v1 | purejaxql | 499,712 | 3 | -95.0 (-90.0, -100.0, -95.0) |  |",
        "| Acrobot-v1 | canter | 499,712 | 4 | -83.0 (-80.0, -84.0, -82.0, -86.0) | "
        f"+12.0: t = {t:.2f} (p = {p:.2f}) |",
        "| CartPole-v1 | purejaxql | 499,712 | 3 | -95.0 (-90.0, -100.0, -95.0) |  |",
    ]
    assert t > 0 and p < 0.05


def test_knapsack_bounds_solve_exactly_where_the_greedy_fill_falls_short():
    from benchmarks.returns import knapsack_bounds

    weights, values = np.array([3.0, 2.0, 2.0]), np.array([5.0, 3.0, 3.0])
    # By value per weight the first item goes in first, and then nothing else fits.
    assert knapsack_bounds.greedy(weights, values, 4.0) == 5.0
    assert knapsack_bounds.optimum(weights, values, 4.0) == 6.0
    assert knapsack_bounds.optimum(weights, values, 7.0) == 11.0  # everything fits


def test_updates_per_iteration_counts_each_algorithms_gradient_steps():
    """speed_physics.py's updates/s column: PPO's minibatches of every epoch, sac's and td3's
    updates per step of the envs, fast_td3's critic updates per vector step."""
    from canter.algorithms import fast_td3, ppo_continuous, sac, td3

    from benchmarks.speed import speed_physics

    count = speed_physics.updates_per_iteration
    assert count(ppo_continuous.Config(update_epochs=3, num_minibatches=4)) == 12
    assert count(sac.Config(num_envs=16, train_frequency=2)) == 8
    assert count(td3.Config(num_envs=4, train_frequency=8)) == 1
    assert count(fast_td3.Config(num_updates=3)) == 3


FAKE_CLEANRL_PPO_ATARI = """
import argparse
from torch.utils.tensorboard import SummaryWriter  # the stand-in: no TensorBoard, no torch

parser = argparse.ArgumentParser()
for flag in ("--env-id", "--total-timesteps", "--num-envs", "--num-steps", "--seed"):
    parser.add_argument(flag)
parser.add_argument("--no-cuda", action="store_true")
args = parser.parse_args()
assert args.env_id == "BreakoutNoFrameskip-v4" and args.no_cuda, args
writer = SummaryWriter("runs/x")
writer.add_text("hyperparameters", "...")
# Games as CleanRL logs them, at its global step (counted before the step): two end in the
# first iteration of 8 x 128 steps (one on its last step), none in the second, one in the third.
for step, ret, length in ((1000, 2.0, 100), (1024, 4.0, 120), (2056, 7.0, 300)):
    writer.add_scalar("charts/episodic_return", ret, step)
    writer.add_scalar("charts/episodic_length", length, step)
writer.add_scalar("charts/SPS", 99, 3072)
writer.close()
"""


def test_the_atari_peer_runs_cleanrls_script_and_keeps_each_game(tmp_path, repo_root):
    """benchmarks/returns/atari_peer.py against a stand-in for CleanRL's ppo_atari.py in a
    checkout of its own (with a `torch` package that has no TensorBoard): the flags reach it, the
    child's writer keeps every game, and the statistic is per iteration (None where no game
    ended)."""
    import subprocess
    import sys

    checkout = tmp_path / "cleanrl"
    for package in ("cleanrl", "torch", "torch/utils"):
        (checkout / package).mkdir(parents=True)
        (checkout / package / "__init__.py").write_text("")
    (checkout / "cleanrl" / "ppo_atari.py").write_text(FAKE_CLEANRL_PPO_ATARI)
    command = [sys.executable, "benchmarks/returns/atari_peer.py", "--cleanrl-dir", checkout]
    command += ["--python", sys.executable, "--total-timesteps", 3 * 1024, "--out", tmp_path]
    command += ["--results", tmp_path]
    done = subprocess.run([str(c) for c in command], capture_output=True, text=True, cwd=repo_root)
    assert done.returncode == 0, done.stderr[-2000:]
    record = json.loads(
        (tmp_path / "cleanrl_ppo_atari__BreakoutNoFrameskip-v4__seed0.json").read_text()
    )
    assert [g["ret"] for g in record["games"]] == [2.0, 4.0, 7.0]
    assert [g["length"] for g in record["games"]] == [100.0, 120.0, 300.0]
    assert record["episode_return"] == [3.0, None, 7.0] and record["final_train_return"] == 7.0
    assert record["env_steps"] == 3072 and record["versions"]["gymnasium"] is not None
    assert "--num-envs=8 --num-steps=128 --seed=0 --no-cuda" in record["command"]
    assert not list(tmp_path.glob(".cleanrl_*")) and not (tmp_path / "runs").exists()
    assert "| BreakoutNoFrameskip-v4 | 3,072 | canter | | no run at this budget |" in done.stdout


def test_the_atari_table_reads_cleanrl_at_canters_interval_ends(tmp_path):
    """CleanRL's per-iteration statistic is read where canter's intervals end (the last
    iteration up to there in which a game ended), canter's seeds come from every returns*/
    folder run with default flags, and Welch's test compares the means of the last points."""
    from canter.common.run.files import write_json

    from benchmarks import harness
    from benchmarks.returns import atari_peer

    out, results = tmp_path / "peer", tmp_path
    game, steps = "BreakoutNoFrameskip-v4", 6 * 1024
    for seed, statistic in ((0, [1.0, None, 3.0, None, 5.0, None]), (1, [2.0] * 6)):
        record = dict(game=game, env_steps=steps, iteration_env_steps=1024, seed=seed)
        record.update(episode_return=statistic, final_train_return=[5.0, 2.0][seed], wall_s=600)
        write_json(out / f"cleanrl_ppo_atari__{game}__seed{seed}.json", record)
    curves = {"returns": {0: [4.0, 6.0, 8.0]}, "returns_seed_1": {1: [2.0, 2.0, 5.0]}}
    curves["returns_lr"] = {2: [99.0, 99.0, 99.0]}  # another learning rate: not this row
    for folder, seeds in curves.items():
        overrides = {"total_timesteps": steps, "eval_every": 2048}
        if folder == "returns_lr":
            overrides["learning_rate"] = 1e-3
        record = dict(env=f"gymnasium:{game}", env_steps=steps, overrides=overrides, num_seeds=1)
        write_json(
            results / folder / f"ppo_atari__{game}.json", dict(record, compile_s=60, run_s=540)
        )
        for seed, curve in seeds.items():
            log = results / folder / "runs" / f"ppo_atari__{game}" / f"seed_{seed}" / "metrics.csv"
            log.parent.mkdir(parents=True)
            rows = "".join(f"{2048 * (i + 1)},{v}\n" for i, v in enumerate(curve))
            log.write_text("env_steps,train/episodic_return\n" + rows)
    statistic = [1.0, None, 3.0, None, 5.0, None]
    assert atari_peer.at_steps(statistic, 1024, [1024, 2048, 4096, 6144]) == [1.0, 1.0, 3.0, 5.0]
    lines = atari_peer.table(out, results).splitlines()
    peer_tails, tails = [3.0, 2.0], [6.0, 3.0]  # the means of each seed's three points
    t, p = harness.welch(tails, peer_tails)
    assert lines[2:] == [
        f"| {game} | 6,144 | CleanRL | 0, 1 | 3.5 (5.0, 2.0) | 2.5 (3.0, 2.0) |  "
        "| 20 min (1 + 1) |",
        f"| {game} | 6,144 | canter | 0, 1 | 6.5 (8.0, 5.0) | 4.5 (6.0, 3.0) | +2.0: t = {t:.2f} "
        f"(p = {p:.2f}) | 20 min (1 + 1) |",
    ]
    assert t > 0 and 0 < p < 1
    seed_again = results / "returns_again" / "runs" / f"ppo_atari__{game}" / "seed_1"
    seed_again.mkdir(parents=True)
    (seed_again / "metrics.csv").write_text("env_steps,train/episodic_return\n6144,1.0\n")
    again = dict(env=f"gymnasium:{game}", env_steps=steps, overrides={}, num_seeds=1)
    write_json(results / "returns_again" / f"ppo_atari__{game}.json", again)
    with pytest.raises(SystemExit, match="seed 1 in"):
        atari_peer.table(out, results)


def test_the_frontier_table_sets_each_algorithm_beside_ppo_rnn_within_each_round():
    from benchmarks.speed import speed_frontier

    def run(speed, compile_s=90.0, rss=4000.0):
        return {"steps_per_s": speed, "compile_s": compile_s, "peak_rss_mb": rss}

    rounds = [
        {"ppo_rnn": run(800.0), "ppo_rnd": run(600.0), "pqn_rnn": run(400.0)},
        {"ppo_rnn": run(400.0), "ppo_rnd": run(320.0), "pqn_rnn": run(100.0)},  # a busy round
    ]
    text = speed_frontier.table(rounds, ("ppo_rnn", "ppo_rnd", "pqn_rnn"))
    rows = {line.split(" | ")[0].strip("| "): line for line in text.splitlines()[2:]}
    assert "| 1.00 (1.00, 1.00) |" in rows["ppo_rnn"]
    assert "600 (600, 320)" not in rows["ppo_rnd"] and "460 (600, 320)" in rows["ppo_rnd"]
    assert "0.78 (0.75, 0.80)" in rows["ppo_rnd"]  # per round, never 600 / 400
    assert "0.38 (0.50, 0.25)" in rows["pqn_rnn"]


def test_the_frontier_measurement_counts_every_seeds_env_steps(monkeypatch):
    """speed_frontier.py --num-seeds 2 (as the Craftax rows run): the preset at its sizes, the
    seeds in the config the runner gets, env steps/s over all of them (no compile here: the
    runner's timing is a stand-in)."""
    from benchmarks import harness
    from benchmarks.speed import speed_frontier

    seen = []

    def timed(config, make_train, algo):
        seen.append(config)
        return 100.0, 8.0, [1.0] * config.num_seeds

    monkeypatch.setattr(harness, "timed_cli", timed)
    record = speed_frontier.measure("pqn_rnn", "Craftax-Symbolic-v1", 3, 2)
    (config,) = seen
    assert (config.num_seeds, config.num_envs, config.num_steps) == (2, 256, 16)
    assert config.total_timesteps == config.eval_every == 3 * 256 * 16
    assert record["num_seeds"] == 2 and record["final_returns"] == [1.0, 1.0]
    assert record["steps_per_s"] == 2 * 3 * 256 * 16 / 8.0


def test_search_table_reads_each_sweep_point_against_the_preset(tmp_path, monkeypatch):
    """A pqn_rnn search of two sweep points x two seeds, one finished and one still going, beside
    the preset's own run and the one kept from before the preset changed: each point names only
    the fields it changes, its seeds' final training statistic and its share of Craftax's
    maximum."""
    from benchmarks.returns import search_table

    def seed(path, rows):
        path.mkdir(parents=True)
        lines = ["interval,env_steps,eval/episodic_return,train/episodic_return"]
        lines += [f"{i + 1},{steps},{ev},{tr}" for i, (steps, ev, tr) in enumerate(rows)]
        (path / "metrics.csv").write_text("\n".join(lines) + "\n")

    from canter.algorithms import pqn_rnn

    preset = pqn_rnn.PRESETS["Craftax-Symbolic-v1"]
    record = {"algo": "pqn_rnn", **preset, "end_e": 0.01, "num_seeds": 2}
    record["sweep"] = {"exploration_fraction": [0.3, 0.5]}
    run = tmp_path / "search" / "pqn_rnn__Craftax-Symbolic-v1__x"
    run.mkdir(parents=True)
    (run / "config.json").write_text(json.dumps(record))
    (run / "summary.json").write_text(json.dumps({"run_s": 600.0, "complete": True}))
    for p, values in enumerate([(2.0, 4.0), (1.0, 3.0)]):
        for s, value in enumerate(values):
            seed(run / f"point_{p}" / f"seed_{s}", [(500, 0.0, 1.0), (1000, 1.5, value)])
    base = tmp_path / "returns" / "runs" / "pqn_rnn__Craftax-Symbolic-v1" / "seeds_0-1"
    for s in range(2):
        seed(base / f"seed_{s}", [(1000, 0.5, 2.26)])
    (base / "summary.json").write_text(json.dumps({"complete": False}))
    # The preset's row before a search changed it reads as what it was.
    before = base.parent.parent / "pqn_rnn__Craftax-Symbolic-v1__before-71" / "seeds_0-0"
    seed(before / "seed_0", [(1000, 0.25, 1.13)])
    earlier = {"algo": "pqn_rnn", **preset, "norm_obs": not preset["norm_obs"], "num_seeds": 1}
    (before / "config.json").write_text(json.dumps(earlier))
    monkeypatch.setattr(search_table, "SEARCH", tmp_path / "search")
    monkeypatch.setattr(search_table.harness, "RESULTS", tmp_path)
    rows = search_table.table().splitlines()[2:]
    assert rows[0].startswith("| pqn_rnn | Craftax-Symbolic-v1 | the preset (returns table) | 2 ")
    assert "2.26 (1.00%) (at 1,000 env steps: running)" in rows[0]
    was = f"the preset before issue 71 (returns table): norm_obs {not preset['norm_obs']} | 1 "
    assert was + "| 1.13 | 1.13 (0.50%) | 0.25 | its row |" in rows[1]
    assert (
        "| end_e 0.01, exploration_fraction 0.3 | 2 | 2.00, 4.00 | 3.00 (1.33%) | 1.50 |" in rows[2]
    )
    assert (
        "| end_e 0.01, exploration_fraction 0.5 | 2 | 1.00, 3.00 | 2.00 (0.88%) | 1.50 |" in rows[3]
    )
    assert rows[2].endswith("| 10 min (" + search_table.HERE + ") |") and len(rows) == 4


FAKE_JAXMARL_IPPO = """
import jax.numpy as jnp
import wandb  # noqa: F401 (JaxMARL's script imports it at the top; the runner starts it)


def make_train(config):
    config["NUM_UPDATES"] = config["TOTAL_TIMESTEPS"] // config["NUM_STEPS"] // config["NUM_ENVS"]

    def train(rng):
        updates = jnp.arange(config["NUM_UPDATES"], dtype=jnp.float32)
        return {"metrics": {"returned_episode_returns": -80.0 + updates + rng[0] * 0}}

    return train
"""


@pytest.mark.slow  # two fresh processes, one of them canter's ippo.py at a tiny budget
def test_the_jaxmarl_peer_runs_its_script_as_main_does_and_tables_both_sides(tmp_path, repo_root):
    """benchmarks/returns/jaxmarl_peer.py against a stand-in for JaxMARL's ippo_ff_mpe.py (its
    baselines are not in the wheel): the yaml's values reach make_train with the budget, the
    final statistic is the last update's per seed, and the table sets canter's seeds beside."""
    import subprocess
    import sys

    pytest.importorskip("jaxmarl")
    pytest.importorskip("omegaconf")
    pytest.importorskip("wandb")
    script = tmp_path / "JM" / "baselines" / "IPPO"
    (script / "config").mkdir(parents=True)
    (script / "ippo_ff_mpe.py").write_text(FAKE_JAXMARL_IPPO)
    (script / "config" / "ippo_ff_mpe.yaml").write_text(
        '"NUM_ENVS": 16\n"NUM_STEPS": 128\n"TOTAL_TIMESTEPS": 1e7\n"NUM_SEEDS": 10\n'
        '"SEED": 30\n"WANDB_MODE": "disabled"\n'
    )
    command = [sys.executable, "benchmarks/returns/jaxmarl_peer.py", "--jaxmarl-dir"]
    command += [tmp_path / "JM", "--total-timesteps", 4 * 2048, "--num-seeds", 2]
    command += ["--out", tmp_path]
    done = subprocess.run([str(c) for c in command], capture_output=True, text=True, cwd=repo_root)
    assert done.returncode == 0, done.stderr[-2000:]
    record = json.loads((tmp_path / "jaxmarl_ippo_mpe.json").read_text())
    canter, peer = record["sides"]
    assert peer["final"] == [-77.0, -77.0] and peer["env_steps"] == 4 * 2048
    assert canter["env_steps"] == 4 * 2048 and len(canter["final"]) == 2
    assert "canter minus JaxMARL" in (tmp_path / "jaxmarl_ippo_mpe.md").read_text()
