"""The command line: a tiny run and one refusal by subprocess (the slow tier), the rest of the
flags, refusals and --dry-run through the CLI's `main` in the test's process."""

import json
import os
import re
import subprocess
import sys

import pytest

from tests.checks import cli_in_process

TINY = ["--total-timesteps", "2048", "--eval-every", "1024", "--num-eval-envs", "2"]


def ppo(repo_root, *args, cwd=None, env=None):
    command = [sys.executable, str(repo_root / "algorithms" / "ppo.py"), *args]
    return subprocess.run(command, capture_output=True, text=True, cwd=cwd, env=env, timeout=300)


def user_cache(tmp_path):
    """The environment of a CLI process whose JAX cache is the user's (XDG_CACHE_HOME under
    `tmp_path`, not the test session's) and that cache's directory."""
    env = {k: v for k, v in os.environ.items() if k != "JAX_COMPILATION_CACHE_DIR"}
    env["XDG_CACHE_HOME"] = str(tmp_path / "cache")
    return env, tmp_path / "cache" / "canter" / "jax"


@pytest.mark.slow  # a CLI process that compiles (cold) and trains
def test_smoke_run_writes_the_run_directory(repo_root, tmp_path, monkeypatch, capsys):
    run_dir = tmp_path / "run"
    args = ["--num-seeds", "2", "--seed", "3", "--lr", "1e-3"]  # --lr: learning_rate's alias
    env, cache = user_cache(tmp_path)  # the persistent compilation cache where users get it
    done = ppo(repo_root, *TINY, *args, "--run-dir", str(run_dir), env=env)
    assert done.returncode == 0, done.stderr
    assert cache.is_dir() and list(cache.iterdir())
    assert "[  2/2] env steps" in done.stdout and "env steps/s" in done.stdout
    summary = json.loads((run_dir / "summary.json").read_text())
    for key in ("env", "algo", "num_seeds", "total_timesteps", "compile_s", "run_s"):
        assert key in summary
    assert summary["algo"] == "ppo" and summary["num_seeds"] == 2 and summary["seeds"] == [3, 4]
    assert len(summary["final_return"]) == 2 and len(summary["eval_return"]) == 2
    assert summary["env_steps_per_s"] > 0
    config = json.loads((run_dir / "config.json").read_text())
    assert config["total_timesteps"] == 2048 and config["env"] == "CartPole-v1"
    assert config["learning_rate"] == 1e-3
    for seed in (3, 4):
        lines = (run_dir / f"seed_{seed}" / "metrics.csv").read_text().splitlines()
        assert lines[0].startswith("interval,env_steps,") and len(lines) == 3
    assert not (run_dir / "run.lock").exists()  # removed by the run as it ended
    # The same directory again without --resume is refused and left as it was.
    before = {p: p.read_bytes() for p in run_dir.rglob("*") if p.is_file()}
    code, _, err = ppo_in_process(monkeypatch, capsys, *TINY, "--run-dir", str(run_dir))
    assert code == 2 and "already holds a run" in err and "--resume" in err, err
    assert before == {p: p.read_bytes() for p in run_dir.rglob("*") if p.is_file()}


def test_help_shows_every_field_with_its_docstring(monkeypatch, capsys):
    code, out, _ = ppo_in_process(monkeypatch, capsys, "--help")
    assert code == 0
    for flag in ("--env", "--num-seeds", "--gae-lambda", "--clip-coef", "--run-dir"):
        assert flag in out
    assert "Surrogate clipping coefficient" in out


@pytest.mark.slow  # a fresh interpreter: 5-15 s on 2 busy cores
def test_bad_input_fails_before_compiling(repo_root, tmp_path):
    # By subprocess once, for every algorithm file (they all refuse through trainer.cli; the
    # other refusals run in-process): exit code 2, the message, no traceback, nothing written.
    done = ppo(repo_root, "--env", "CartPole-v9", "--run-dir", str(tmp_path / "run"))
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr
    for needle in ("Unknown environment", "CartPole-v1", "Acrobot-v1"):
        assert needle in done.stderr
    assert "compiled" not in done.stdout
    assert not (tmp_path / "run").exists()


def ppo_in_process(monkeypatch, capsys, *args) -> tuple[int, str, str]:
    return cli_in_process("ppo", monkeypatch, capsys, *args)


@pytest.mark.parametrize(
    "args, needles",
    [
        (["--env", "Pendulum-v1"], ["continuous action space", "ppo.py"]),
        (["--num-minibatches", "3"], ["num_envs * num_steps = 512", "num_minibatches = 3"]),
        # With --dry-run, the same refusal.
        (["--num-minibatches", "3", "--dry-run"], ["num_envs * num_steps = 512", "= 3"]),
        (["--num-envs", "0"], ["Out of range", "num_envs = 0 (allowed: [1, inf))"]),
        (["--num-steps", "-4"], ["Out of range", "num_steps = -4 (allowed: [1, inf))"]),
        (["--num-seeds", "0"], ["Out of range", "num_seeds = 0 (allowed: [1, inf))"]),
        (["--total-timesteps", "100"], ["smaller than one iteration", "512"]),
        (["--gamma", "2"], ["Out of range", "gamma = 2.0 (allowed: [0, 1])"]),
        (["--env", "CartPol-v1"], ["Unknown environment 'CartPol-v1' (did you mean CartPole-v1?)"]),
        # An unknown task of a continuous suite: its name is the problem, not its action kind.
        (["--env", "brax:hoper"], ["Unknown Brax environment 'hoper'"]),
        # Known continuous before Playground builds its model (about 20 s).
        (["--env", "playground:CheetahRun"], ["continuous action space", "ppo_continuous.py"]),
        (
            ["--preset", "HalfCheetah-v5"],
            ["It is a preset of algorithms/sac.py, algorithms/td3.py"],
        ),
    ],
)
def test_bad_flags_exit_2_with_the_reason(monkeypatch, capsys, tmp_path, args, needles):
    from canter.common.envs import registry

    def build(name):
        raise AssertionError(f"{name} was built: the refusal should come before")

    if "playground:CheetahRun" in args:
        monkeypatch.setattr(registry, "_build", build)
    code, out, err = ppo_in_process(monkeypatch, capsys, *args, "--run-dir", str(tmp_path / "r"))
    assert code == 2, (out, err)
    assert err.startswith("error: ") and err.count("\n") == 1, err  # one line, no tyro box
    for needle in needles:
        assert needle in err
    assert "compiled" not in out
    assert not (tmp_path / "r").exists()


def test_dry_run_checks_every_sweep_point_and_writes_nothing(
    repo_root, tmp_path, monkeypatch, capsys
):
    sweep = ["--sweep", "learning_rate=1e-4,3e-4", "--num-seeds", "2"]
    monkeypatch.chdir(tmp_path)
    code, out, err = ppo_in_process(monkeypatch, capsys, *TINY, *sweep, "--dry-run")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == "ppo on CartPole-v1: 2 seeds, 2 sweep points"
    assert lines[1].startswith("2 evaluations, every 1,024 env steps of 2,048")
    assert lines[-1] == "dry run: checked; nothing compiled or written"
    assert list(tmp_path.iterdir()) == []  # no runs/ directory
    # A swept value that a point's Config refuses is refused as the run would refuse it.
    bad = ["--sweep", "learning_rate=1e-4,-1", "--dry-run"]
    code, _, err = ppo_in_process(monkeypatch, capsys, *TINY, *bad)
    assert code == 2 and "learning_rate" in err, err


def test_default_run_name_is_one_safe_folder_and_new_run_dir_never_reuses(tmp_path):
    from canter.common.run.rundir import new_run_dir, run_name

    name = run_name("gymnasium:ALE/Breakout-v5", "ppo", 3, "20260101-000000")
    assert name == "gymnasium-ALE-Breakout-v5__ppo__3__20260101-000000"
    assert run_name("CartPole-v1", "dqn", 0, "s") == "CartPole-v1__dqn__0__s"
    base = tmp_path / "runs" / name
    made = [new_run_dir(base) for _ in range(3)]
    assert [p.name for p in made] == [name, f"{name}-2", f"{name}-3"]
    assert all(p.is_dir() and p.parent == base.parent for p in made)


def start(repo_root, *args, cwd=None, env=None):
    command = [sys.executable, str(repo_root / "algorithms" / "ppo.py"), *args]
    return subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=cwd, env=env
    )


@pytest.mark.slow  # four tiny CLI runs, two at a time
def test_two_processes_started_together_never_share_a_run_directory(repo_root, tmp_path):
    # The default name: the same second, two directories, each with its own run; compiled
    # without the persistent cache (--no-compile-cache: nothing written to the user's).
    env, cache = user_cache(tmp_path)
    args = [*TINY, "--seed", "0", "--no-compile-cache"]
    pair = [start(repo_root, *args, cwd=tmp_path, env=env) for _ in range(2)]
    for p in pair:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
    assert not cache.exists() or not list(cache.iterdir())
    dirs = sorted((tmp_path / "runs").iterdir())
    assert len(dirs) == 2, dirs
    for d in dirs:
        assert len((d / "seed_0" / "metrics.csv").read_text().splitlines()) == 3
        assert json.loads((d / "summary.json").read_text())["complete"]
    # One explicit --run-dir raced on: one run writes it, the other is refused in one line.
    same = tmp_path / "same"
    pair = [start(repo_root, *TINY, "--seed", str(s), "--run-dir", str(same)) for s in (1, 2)]
    done = [(p.returncode, out, err) for p in pair for out, err in [p.communicate(timeout=300)]]
    assert sorted(code for code, _, _ in done) == [0, 2], done
    (loser,) = [err for code, _, err in done if code == 2]
    errors = [line for line in loser.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "already holds a run" in errors[0], loser
    assert "Traceback" not in loser
    (winner,) = [i for i, (code, _, _) in enumerate(done) if code == 0]
    config = json.loads((same / "config.json").read_text())
    assert config["seed"] == (1, 2)[winner]
    assert list((same).glob("seed_*")) == [same / f"seed_{config['seed']}"]
    assert len((same / f"seed_{config['seed']}" / "metrics.csv").read_text().splitlines()) == 3


def test_lr_is_an_alias_of_learning_rate():
    # Through the CLI in the smoke run above; both spellings, and only the alias, rewritten.
    from canter.algorithms import ppo as ppo_file
    from canter.common.run.cli import _aliases

    argv = _aliases(["--lr=2e-3", "--lr", "1e-3", "--lrx", "1"], ppo_file.Config)
    assert argv == ["--learning-rate=2e-3", "--learning-rate", "1e-3", "--lrx", "1"]


def test_an_int_field_takes_a_whole_number_written_as_a_float():
    from canter.algorithms import ppo as ppo_file
    from canter.common.run.cli import _aliases

    argv = ["--total-timesteps", "1e6", "--eval-every=2.5e4", "--num-envs", "1.5"]
    argv += ["--learning-rate", "1e-3", "--env", "1e3"]  # not int fields: as given
    assert _aliases(argv, ppo_file.Config) == [
        "--total-timesteps",
        "1000000",
        "--eval-every=25000",
        "--num-envs",
        "1.5",  # a fraction: left for the parser to refuse
        "--learning-rate",
        "1e-3",
        "--env",
        "1e3",
    ]


def test_help_lists_presets_grouped_in_short_lines_with_tyros_bool_flags(monkeypatch, capsys):
    from canter.algorithms import ppo_continuous

    code, out, _ = cli_in_process("ppo_continuous", monkeypatch, capsys, "--help")
    assert code == 0
    listing = out[out.index("Presets (") : out.index("\n\n", out.index("Presets ("))]
    assert all(len(line) <= 100 for line in listing.splitlines()), listing
    for name in ppo_continuous.PRESETS:  # every preset is named
        assert re.search(rf"[ |]{re.escape(name)}(?=[ :\n])", listing), name
    assert "--env playground:<preset>" in listing and "--no-anneal-lr" in listing
    assert "False" not in listing and "True" not in listing
    assert len(listing.splitlines()) < 30  # 30 DM Control and Brax presets in one listing each


def test_a_gpu_sized_playground_program_is_refused_on_a_cpu_before_its_model_builds(
    monkeypatch, capsys, tmp_path
):
    import jax
    from canter.common.envs import registry

    monkeypatch.setattr(jax, "default_backend", lambda: "cpu")  # the refusal is a CPU's

    def build(name):
        raise AssertionError(f"{name} was built: the refusal should come before")

    monkeypatch.setattr(registry, "_build", build)
    run_dir = ["--run-dir", str(tmp_path / "r")]
    code, _, err = cli_in_process(
        "ppo_continuous", monkeypatch, capsys, "--preset", "CheetahRun", *run_dir
    )
    assert code == 2 and "2,048 envs in one program" in err, err
    assert "On a CPU use --num-envs and --num-eval-envs 1024 or fewer" in err
    seeds = ["--preset", "CheetahRun", "--num-envs", "512", "--num-seeds", "4", *run_dir]
    code, _, err = cli_in_process("ppo_continuous", monkeypatch, capsys, *seeds)
    assert code == 2 and "num_envs 512 or num_eval_envs 128, x 4 seeds" in err, err
    assert "--num-envs and --num-eval-envs 256 or fewer" in err
    assert not (tmp_path / "r").exists()


def test_wandb_without_credentials_is_refused_before_compiling(monkeypatch, capsys, tmp_path):
    for name in ("WANDB_MODE", "WANDB_API_KEY", "WANDB_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    netrc = tmp_path / "netrc"
    monkeypatch.setenv("NETRC", str(netrc))  # none there yet
    args = ["--track", "wandb", "--run-dir", str(tmp_path / "r")]
    for extra in ([], ["--dry-run"]):  # the dry run says what the run would
        code, out, err = ppo_in_process(monkeypatch, capsys, *args, *extra)
        assert code == 2 and err.count("\n") == 1, err
        assert "no W&B credentials for api.wandb.ai" in err and "WANDB_MODE=offline" in err
        assert "compiled" not in out and not (tmp_path / "r").exists()
    netrc.write_text("machine api.wandb.ai login user password " + "0" * 40 + "\n")
    code, out, err = ppo_in_process(monkeypatch, capsys, *args, "--dry-run")
    assert code == 0, err
    netrc.unlink()
    monkeypatch.setenv("WANDB_MODE", "offline")
    code, out, err = ppo_in_process(monkeypatch, capsys, *args, "--dry-run")
    assert code == 0, err
    monkeypatch.setenv("WANDB_MODE", "")
    code, out, err = ppo_in_process(monkeypatch, capsys, *args, "--dry-run")
    assert code == 2 and "WANDB_MODE='' is not a W&B mode" in err, err


def test_seeds_whose_program_exceeds_the_memory_are_refused_before_compiling(
    monkeypatch, capsys, tmp_path
):
    from canter.common.run import memory

    # The default PPO on CartPole needs about 0.64 MiB a seed (common/run/memory.py, its
    # interval's program and two more copies of its 0.1 MiB state): 16 MiB holds about 25.
    monkeypatch.setattr(memory, "memory_bytes", lambda: (16 * 2**20, "a 16 MiB test device"))
    run_dir = ["--run-dir", str(tmp_path / "r")]
    for extra in ([], ["--dry-run"]):
        code, out, err = ppo_in_process(monkeypatch, capsys, "--num-seeds", "64", *run_dir, *extra)
        assert code == 2 and err.count("\n") == 1, err
        assert "64 seeds need about" in err and "a 16 MiB test device" in err
        fits = int(re.search(r"At most ([\d,]+) seeds fit in one program", err).group(1))
        assert 5 <= fits < 64 and f"--num-seeds {fits} or fewer" in err
        assert "compiled" not in out and not (tmp_path / "r").exists()
    code, out, err = ppo_in_process(monkeypatch, capsys, "--num-seeds", str(fits), "--dry-run")
    assert code == 0, err  # as many as it said fit pass the check
    assert f"for {fits} seeds" in out and "of a 16 MiB test device" in out


def test_ctrl_c_outside_the_intervals_is_one_line_and_leaves_no_directory(
    monkeypatch, capsys, tmp_path
):
    from canter.common.envs import registry

    def interrupted(name):  # Ctrl-C while the env builds (Playground's take about 20 s)
        raise KeyboardInterrupt

    monkeypatch.setattr(registry, "_build", interrupted)
    monkeypatch.chdir(tmp_path)  # the default run directory would be made here
    code, out, err = ppo_in_process(monkeypatch, capsys, "--env", "Acrobot-v1")
    assert code == 130 and err.startswith("stopped (SIGINT) outside training's intervals"), err
    assert err.count("\n") == 1
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


def test_a_traced_value_error_names_the_line_that_asked_and_the_traced_fields():
    # The CLI's one line for JAX's errors about Python asking a traced value (a fork's trap,
    # tests/test_fork.py): here int() of a float field under the runner's vmap over the Config.
    import jax
    from canter.algorithms import ppo
    from canter.common.run.batch import make_batch
    from canter.common.run.cli import TRACED_VALUE, traced_value

    config = ppo.Config()
    configs, _ = make_batch(config, {}).inputs()
    with pytest.raises(TRACED_VALUE) as raised:
        jax.vmap(lambda c: int(c.gamma))(configs)
    line = traced_value(raised.value, config)
    # The last frame outside JAX and canter's common/: this file's line.
    asked = "(`jax.vmap(lambda c: int(c.gamma))(configs)`) asks Python for a concrete value"
    assert re.match(rf"\S*test_cli\.py:\d+ {re.escape(asked)}", line), line
    assert "(ConcretizationTypeError)" in line, line
    assert "gamma, gae_lambda" in line and "num_envs" not in line, line
    assert line.endswith("Rerun with --debug for the traceback."), line


def test_help_groups_are_titled_and_list_preset_with_its_help(monkeypatch, capsys):
    code, out, _ = ppo_in_process(monkeypatch, capsys, "--help")
    assert code == 0
    # Off a terminal, tyro writes each group's title above a rule of dashes.
    titles = re.findall(r"^ *(\w+(?: \w+)?) *\n *-{20,}", out, re.MULTILINE)
    assert titles == ["options", "config options", "run options"], titles
    first = " ".join(out[out.index(" options ") : out.index(" config options ")].split())
    assert "--help" in first and "--preset NAME" in first and "the Presets listed above" in first
    # A file without presets does not offer the flag.
    code, out, _ = cli_in_process("ppo_atari", monkeypatch, capsys, "--help")
    assert code == 0 and "--preset" not in out


def test_preset_is_taken_out_of_the_flags_in_either_spelling(monkeypatch, capsys, tmp_path):
    # `_defaults` takes --preset NAME (or --preset=NAME) before tyro, which lists it in --help:
    # tyro never sees it, so none is ignored.
    monkeypatch.chdir(tmp_path)
    outs = []
    for spelled in (["--preset", "Breakout-MinAtar"], ["--preset=Breakout-MinAtar"]):
        code, out, err = ppo_in_process(monkeypatch, capsys, *spelled, "--dry-run")
        assert code == 0, err
        outs.append(out)
    assert outs[0] == outs[1] and "ppo on Breakout-MinAtar" in outs[0], outs
    for args, needle in [
        (["--preset", "Breakout-MinAtar", "--resume", str(tmp_path)], "do not mix"),
        (["--preset=Breakout-MinAtar", "--resume", str(tmp_path)], "do not mix"),
        (["--preset", "Breakout-MinAtar", "--preset", "Asterix-MinAtar"], "more than once"),
        (["--preset=Nope"], "--preset 'Nope' is unknown. Presets: Asterix-MinAtar,"),
    ]:
        code, _, err = ppo_in_process(monkeypatch, capsys, *args, "--dry-run")
        assert code == 2 and err.count("\n") == 1 and needle in err, (args, err)
