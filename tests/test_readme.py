"""The README works as written, and stays a front door (at most 200 lines).

Every line of its bash blocks is accounted for: training, evaluation and file commands run (with
a tiny budget appended) in a scratch directory whose algorithms/ links to the repository's
files, so nothing is written into the repository; `RUN_DIR` stands for the run directory the
previous run wrote, and `~/` for a scratch home. A command whose algorithm another test trains
on the same env runs with --dry-run instead (TRAINED_ELSEWHERE); dry runs run in this process.
Set-up, install and CI lines are checked against .ci/run and pyproject.toml instead of run, and
a command whose extra is not installed is checked against the script's --help. The Python
snippet runs as it stands, at a tiny budget.
"""

import ast
import importlib.util
import os
import re
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path

import jax
import pytest

from tests.checks import cli_in_process

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
CI = (ROOT / ".ci" / "run").read_text()
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())

# Appended to a command (flags it does not already give) so that it runs in seconds; keyed by
# the algorithm file's name (a fork `my_ppo.py` gets ppo's). A `--resume` run takes none: its
# saved config is the default and a differing flag is refused.
TINY = {
    "ppo": "--num-envs 4 --num-steps 32 --total-timesteps 256 --eval-every 128 --num-eval-envs 2",
    "sac": "--total-timesteps 200 --learning-starts 100 --buffer-size 1000 --eval-every 100"
    " --num-eval-envs 1",
    "ppo_atari": "--num-envs 2 --num-steps 64 --total-timesteps 256 --eval-every 128"
    " --num-eval-envs 1 --eval-max-steps 50",
    "ppo_continuous": "--num-envs 4 --num-steps 8 --num-minibatches 2 --update-epochs 1"
    " --total-timesteps 64 --eval-every 32 --num-eval-envs 1",
}
# Commands whose program another test compiles and trains (at that test's sizes, through the
# same runner): here they run with --dry-run (flags, preset, every config check, the env built;
# nothing compiled) instead of compiling again what those tests compile (the parts that hold
# them took 969 s of a whole run on 2 cores, 349 s after). Each test named must exist, and the
# first must train the env the command names: its source, or a module-level constant it uses,
# holds the env id that the dry run prints. Everything else runs at a tiny budget. Craftax's and
# Jumanji's PPO programs are trained by learning_extra tests, which CI leaves out for time
# (tests/README.md): in CI their adapters are held by the slow tier's env tests.
TRAINED_ELSEWHERE = {
    "ppo.py --num-seeds 8": ["test_cli.py::test_smoke_run_writes_the_run_directory"],
    "ppo.py --num-seeds 4 --sweep": [
        "test_run_management.py::test_sweep_compiles_once_and_each_point_equals_a_plain_run"
    ],
    "ppo.py --track tensorboard wandb": [
        "test_run_management.py::test_trackers_write_tensorboard_and_offline_wandb"
    ],
    "ppo.py --preset Breakout-MinAtar": [
        "test_minatar.py::test_cnn_variant_runs_vmapped_equal_to_single_runs"
    ],
    "sac.py --preset HalfCheetah-v5": [
        "test_host.py::test_mujoco_halfcheetah_repeats_its_numbers_and_draws_offscreen"
    ],
    "ppo_atari.py --env gymnasium:ALE/Breakout-v5": [
        "test_atari.py::test_ppo_atari_trains_repeats_its_numbers_and_evaluates"
    ],
    "ppo.py --preset Craftax-Classic": [
        "test_craftax.py::test_ppo_learns_craftax_classic_beyond_random_actions"
    ],
    "ppo.py --env jumanji:Knapsack-v1": [
        "test_jumanji.py::test_ppo_with_masks_beats_random_valid_items_on_knapsack"
    ],
    "sac.py --env playground:CartpoleBalance": [
        "test_physics.py::test_sac_trains_and_draws_on_playground"
    ],
    # Its defaults ran 189 s here as a README command; the learning test trains them.
    "alphazero.py --env pgx:tic_tac_toe-vs-minimax": [
        "test_alphazero.py::test_tic_tac_toe_never_loses_to_the_perfect_player"
    ],
    # The preset's sizes and networks are built by the first; ppo_continuous's Playground
    # program compiles and trains in the second (its CartpoleBalance preset at 8 envs:
    # CheetahRun's 2,048 envs are a GPU's run, as the README says).
    "ppo_continuous.py --preset CheetahRun": [
        "test_ppo_continuous.py::test_the_playground_and_brax_presets_are_brax_ppo_at_the_published_sizes",
        "test_physics.py::test_the_speed_benchmark_runs_and_writes_its_table",
    ],
}
# Commands sized for a GPU, which the README says are: on a CPU each is refused before
# compiling (its dry run too), with the message naming what a CPU run needs instead.
GPU_ONLY = {"ppo_continuous.py --preset CheetahRun": "On a CPU use --num-envs and --num-eval-envs"}
# What a command's env needs beyond the base install: (a word in the command, its module).
EXTRAS = [("gymnasium:ALE/", "ale_py"), ("HalfCheetah-v5", "mujoco"), ("craftax:", "craftax")]
EXTRAS += [("Craftax-", "craftax"), ("jumanji:", "jumanji"), ("xminigrid:", "xminigrid")]
EXTRAS += [("playground:", "mujoco_playground"), ("CheetahRun", "mujoco_playground")]
EXTRAS += [("pgx:", "pgx")]


def blocks(language: str) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```", README, re.DOTALL | re.MULTILINE)


def commands(block: str) -> list[str]:
    """The commands of a bash block: one per line and per `&&`, comments dropped."""
    lines = [line.split("  #")[0].strip() for line in block.splitlines()]
    return [part.strip() for line in lines if line for part in line.split(" && ")]


BASH = blocks("bash")


def test_readme_is_a_front_door():
    assert len(README.splitlines()) <= 200, "README.md is over 200 lines: move text to docs/"
    # Every fenced block is bash (run below), python (run below) or the sample output.
    fences = re.findall(r"^```(\w*)\n(.*?)^```", README, re.DOTALL | re.MULTILINE)
    other = [body for lang, body in fences if lang not in ("bash", "python")]
    assert all(body.startswith("ppo on CartPole-v1: ") for body in other), other


def check_setup_line(command: str) -> None:
    """Lines that set up an environment or run CI's checks: they must be what .ci/run does, or
    name extras that pyproject.toml defines."""
    words = shlex.split(command)
    if words[:2] == ["pip", "install"]:
        assert len(words) == 4 and words[2] == "-e", command
        assert words[3].startswith(".[") and words[3].endswith("]"), command
        extras = words[3][2:-1].split(",")
        unknown = set(extras) - set(PYPROJECT["project"]["optional-dependencies"])
        assert not unknown, f"{command}: no such extra in pyproject.toml: {unknown}"
    elif words[:3] == ["python", "-m", "pytest"]:
        assert re.search(rf"^{re.escape(command)}\s*(#.*)?$", CI, re.MULTILINE), (
            f"`{command}`: the README's test commands are the ones .ci/run runs"
        )
        if "-m" in words[3:]:
            expression = words[words.index("-m", 3) + 1]
            markers = {
                m.split(":")[0] for m in PYPROJECT["tool"]["pytest"]["ini_options"]["markers"]
            }
            named = set(re.findall(r"\w+", expression)) - {"not", "and", "or"}
            assert named <= markers, f"{command}: unknown markers {named - markers}"
    else:
        assert re.search(rf"^{re.escape(command)}\s*(#.*)?$", CI, re.MULTILINE), (
            f"`{command}` is neither run by this test nor what .ci/run does"
        )


def algorithm_rows():
    """(file name, the row's cells after the link) for each algorithm row of README's table."""
    return re.findall(r"^\| \[`(\w+)\.py`\]\(algorithms/\1\.py\) \|(.*)\|$", README, re.M)


def test_every_maintained_algorithm_file_has_a_row_with_a_headline():
    from canter.algorithms import HOUSE

    rows = algorithm_rows()
    assert sorted(name for name, _ in rows) == sorted(HOUSE), rows
    for name, cells in rows:
        headline = cells.split("|")[-1]
        assert re.search(r"\d", headline) and "seed" in headline, (name, headline)


def test_every_headline_is_a_row_of_the_results_table():
    """A headline names its env and `mean +- std`; the results table has that row, so a re-run
    that changes the row cannot leave the README quoting the old figure."""
    table = (ROOT / "benchmarks" / "results" / "returns" / "returns.md").read_text()
    results = set()
    for line in table.splitlines():
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        if len(cells) > 5:
            results.add((cells[0], cells[1].split(":")[-1], cells[5]))
    rows = algorithm_rows()
    for name, cells in rows:
        headline = cells.split("|")[-1].strip()
        env = headline.split(",")[0].split(":")[-1]
        figure = re.search(r"seeds: (-?[\d.]+ \+- [\d.]+)", headline)
        assert figure, f"{name}'s headline names no `mean +- std`: {headline}"
        assert (name, env, figure[1]) in results, (
            f"{name}'s headline ({env}: {figure[1]}) is no row of returns.md"
        )


def test_no_extra_installs_both_pygames():
    """pygame (craftax requires it) and pygame-ce (gymnasium[classic-control] brings it) install
    one `pygame` folder, the later overwriting the other: the extras take pygame, and pygame-ce
    only where pygame has no wheel (pyproject.toml says why)."""
    for name, requirements in PYPROJECT["project"]["optional-dependencies"].items():
        assert not any("classic-control" in r for r in requirements), name
        for requirement in requirements:
            if requirement.startswith("pygame-ce"):
                assert requirement.endswith("; python_version >= '3.14'"), requirement
            elif requirement.startswith("pygame"):
                assert requirement.endswith("; python_version < '3.14'"), requirement


def test_set_up_and_test_lines_are_what_ci_runs():
    """Every install, CI or test line of the README's bash blocks (checked here without running
    the commands; the slow test below runs the rest)."""
    lines = [c for block in BASH for c in commands(block) if is_setup_line(c)]
    assert any(line.startswith("python -m pytest") for line in lines)
    for line in lines:
        check_setup_line(line)


def is_setup_line(command: str) -> bool:
    setup = ("python3 -m venv", ". .venv/bin/activate", "pip install", "python -m pytest", "ruff ")
    return command.startswith(setup)


def parts(block: str) -> list[list[str]]:
    """A block's commands in parts, a new part at each install line after the first command:
    the parts run as separate test items (in parallel under xdist; the common-tasks block
    took 18 minutes as one). A part never needs an earlier part's files (the test below fails
    on a `RUN_DIR` or `cd` that would)."""
    out: list[list[str]] = [[]]
    for command in commands(block):
        if command.startswith("pip install") and not all(map(is_setup_line, out[-1])):
            out.append([])
        out[-1].append(command)
    return out


PARTS = [(i, j) for i, block in enumerate(BASH) for j in range(len(parts(block)))]


# The README's first run, whose output the README shows (its one block without a language).
FIRST_RUN = "python algorithms/ppo.py --env CartPole-v1"
FENCES = re.findall(r"^```(\w*)\n(.*?)^```", README, re.DOTALL | re.MULTILINE)
(SAMPLE,) = [body for language, body in FENCES if not language]
# What varies from run to run in the sample: timings and the run directory's time stamp; and
# from CPU to CPU, the returns (XLA:CPU's kernels differ by instruction set, so a run repeats
# exactly on one machine, not across machines: the sample names the machine it came from).
TIMINGS = [
    (r"compiled in [\d.]+ s", "compiled in # s"),
    (r"SPS +[\d,]+", "SPS #"),
    (r"compile [\d.]+ s  run [\d.]+ s  [\d,]+ env", "compile # s  run # s  # env"),
    (r"__\d{8}-\d{6}$", "__#"),
    (r"(return|eval) +-?\d+\.\d\d( \+- \d+\.\d\d)?", r"\1 #"),
]


def masked(line: str) -> str:
    for pattern, mark in TIMINGS:
        line = re.sub(pattern, mark, line)
    return line


# Lines a run prints only where compiling or an interval takes long (a busy machine's).
PROGRESS = re.compile(r"^compiling \.\.\.|computing for \d+ s")


def assert_prints_the_sample(out: str) -> None:
    """`out` is the README's sample but for the timings and returns: the lines above its `...`
    are the first lines printed, the lines below it the last, env steps and counts and all."""
    head, tail = (part.splitlines() for part in SAMPLE.split("...\n"))
    printed = [masked(line) for line in out.splitlines() if not PROGRESS.search(line)]
    assert [masked(line) for line in head] == printed[: len(head)], out
    assert [masked(line) for line in tail] == printed[-len(tail) :], out


def test_the_sample_check_passes_other_timings_only():
    """The partner of the first run's check in test_readme_commands_run (slow): the sample
    with other timings, another return and its `...` filled passes; other env steps, a return
    that is no number or another wording fails."""
    out = SAMPLE.replace("...\n", "[  2/20] env steps  (a row the sample leaves out)\n")
    out = re.sub(r"(compiled in |compile |run )[\d.]+", r"\g<1>123.4", out)
    out = re.sub(r"(SPS +|s  )[\d,]+", r"\g<1>1,234", out)
    out = re.sub(r"__\d{8}-\d{6}", "__20270101-000000", out)
    assert out != SAMPLE
    assert_prints_the_sample(out)
    assert_prints_the_sample(re.sub(r"(return +)[\d.]+", r"\g<1>121.54", out, count=1))
    for other in (
        re.sub(r"(env steps +)25,600", r"\g<1>25,601", out, count=1),
        re.sub(r"(return +)[\d.]+", r"\g<1>-", out, count=1),
        out.replace("seed", "seed(s)"),
    ):
        with pytest.raises(AssertionError):
            assert_prints_the_sample(other)


def user_compile(env: dict[str, str]) -> dict[str, str]:
    """`env` without tests/conftest.py's compile flags (FAST_COMPILE): XLA's defaults."""
    fast = ("--xla_backend_optimization_level=", "--xla_cpu_use_fusion_emitters=")
    flags = [f for f in env.get("XLA_FLAGS", "").split() if not f.startswith(fast)]
    return {**env, "XLA_FLAGS": " ".join(flags)}


def with_tiny_budget(words: list[str]) -> list[str]:
    """`words` with the tiny budget of its algorithm file appended (flags it lacks)."""
    script = next((w for w in words if w.endswith(".py")), "")
    name = Path(script).stem.removeprefix("my_")
    if "--resume" in words or name not in TINY:
        return words
    tiny = shlex.split(TINY[name])
    pairs = [tiny[i : i + 2] for i in range(0, len(tiny), 2)]
    return words + [w for flag, value in pairs if flag not in words for w in (flag, value)]


def source_of(test: str) -> str:
    """The source of a test function ("file::name") and of the module-level assignments of the
    names it uses, and of the names those use (a test's config is often a constant above it)."""
    file, name = test.split("::")
    text = (ROOT / "tests" / file).read_text()
    tree = ast.parse(text)
    functions = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name]
    assert functions, f"no test {test}"
    parts, seen = [functions[0]], set()
    while True:
        used = {n.id for part in parts for n in ast.walk(part) if isinstance(n, ast.Name)}
        more = [
            node
            for node in tree.body
            if isinstance(node, ast.Assign)
            and id(node) not in seen
            and any(
                isinstance(n, ast.Name) and n.id in used for t in node.targets for n in ast.walk(t)
            )
        ]
        if not more:
            return "\n".join(ast.get_source_segment(text, part) for part in parts)
        seen.update(id(node) for node in more)
        parts += more


def trained_elsewhere(command: str) -> list[str]:
    """The tests that compile and train what `command` would (TRAINED_ELSEWHERE), or []."""
    found = [tests for words, tests in TRAINED_ELSEWHERE.items() if words in command]
    return found[0] if found else []


def test_the_commands_run_dry_are_trained_by_the_tests_named():
    """Each TRAINED_ELSEWHERE command is in the README, each test it names exists, and the
    first trains the env the command names (its --env, or its preset's; with neither, the
    Config's default env, which the test names or leaves to the default)."""
    readme_commands = [c for block in BASH for c in commands(block)]
    for words, tests in TRAINED_ELSEWHERE.items():
        (command,) = [c for c in readme_commands if words in c]
        args = shlex.split(command)
        module = importlib.import_module(f"canter.algorithms.{Path(args[1]).stem}")
        sources = [source_of(test) for test in tests]
        if "--env" in args:
            env = args[args.index("--env") + 1]
        elif "--preset" in args:
            env = module.PRESETS[args[args.index("--preset") + 1]]["env"]
        else:
            env = module.Config().env
            # The default env: a test that builds its Config without an env trains it too.
            default = f"{Path(args[1]).stem}.Config(" in sources[0]
            if default and not re.search(r"\benv\s*=", sources[0]):
                continue
        assert env in sources[0], (
            f"`{command}` runs dry because {tests[0]} trains {env}: it does not"
        )


def missing_extra(command: str) -> str | None:
    for word, module in EXTRAS:
        if word in command and importlib.util.find_spec(module) is None:
            return module
    return None


def workspace(tmp_path: Path) -> Path:
    """A scratch working directory whose algorithms/ holds links to the repository's files, so
    the README's relative paths work and a `cp` into algorithms/ stays in the scratch."""
    work = tmp_path / "work"
    (work / "algorithms").mkdir(parents=True)
    for path in (ROOT / "algorithms").glob("*.py"):
        (work / "algorithms" / path.name).symlink_to(path)
    (tmp_path / "home").mkdir()
    return work


def environment() -> dict[str, str]:
    return dict(os.environ, WANDB_MODE="offline", WANDB_SILENT="true")


@pytest.mark.slow
@pytest.mark.parametrize("block, part", PARTS, ids=[f"block{i}-part{j}" for i, j in PARTS])
def test_readme_commands_run(block, part, tmp_path, monkeypatch, capsys):
    work, home = workspace(tmp_path), tmp_path / "home"
    cwd, run_dir = work, None
    for command in parts(BASH[block])[part]:
        original = command
        if is_setup_line(command):
            check_setup_line(command)
            continue
        command = command.replace("~/", f"{home}/")
        if command.startswith("cd "):
            cwd = (cwd / command[3:].strip()).resolve()
            assert cwd.is_dir(), command
            continue
        if "RUN_DIR" in command:
            assert run_dir is not None, f"{command}: no earlier command wrote a run directory"
            command = command.replace("RUN_DIR", str(run_dir))
        words = shlex.split(command)
        env = environment()
        if original == FIRST_RUN:
            # The sample's numbers: the whole run, compiled as a user's is (XLA's defaults, not
            # the tests' level 1, whose returns part from them after the first interval).
            words, env = [sys.executable, *words[1:]], user_compile(env)
        elif words[0] == "python":
            words = [sys.executable, *with_tiny_budget(words[1:])]
        elif words[0] not in ("cp", "mkdir"):
            pytest.fail(f"`{command}`: a kind of command this test does not know; teach it")
        if module := missing_extra(command):
            # Not installed here (CI installs it): the script and the flags it is given exist.
            script = next(w for w in words if w.endswith(".py"))
            shown = subprocess.run(
                [sys.executable, script, "--help"],
                cwd=cwd,
                env=environment(),
                capture_output=True,
                text=True,
                timeout=300,
            )
            assert shown.returncode == 0, shown.stderr
            for flag in (w for w in words if w.startswith("--")):
                assert flag in shown.stdout, f"{command}: {flag} not in --help ({module} missing)"
            continue
        if trained_elsewhere(original) or "--dry-run" in words:
            # Ends before compiling: the script's `main` in this process (tests/checks.py,
            # cli_in_process), without an interpreter's start (5 s or more each here).
            args = [w for w in shlex.split(command)[2:] if w != "--dry-run"]
            monkeypatch.chdir(cwd)
            for name, value in environment().items():
                monkeypatch.setenv(name, value)
            algo = Path(shlex.split(command)[1]).stem
            code, out, err = cli_in_process(algo, monkeypatch, capsys, *args, "--dry-run")
            gpu = next((why for c, why in GPU_ONLY.items() if c in original), None)
            if gpu and jax.default_backend() == "cpu":
                said = next(line for line in README.splitlines() if original in line)
                assert "GPU" in said, f"the README does not say `{original}` is for a GPU"
                assert code == 2 and gpu in err, f"`{command}` was not refused on a CPU: {err}"
                continue
            assert code == 0, f"`{command}` failed:\n{out[-3000:]}\n{err}"
            assert "dry run: checked" in out, out
            continue
        done = subprocess.run(words, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, f"`{command}` failed:\n{done.stdout[-3000:]}\n{done.stderr}"
        if wrote := re.findall(r"^\s*wrote (\S+)\s*$", done.stdout, re.MULTILINE):
            run_dir = cwd / wrote[-1]
            assert (run_dir / "config.json").is_file(), run_dir
        if original == FIRST_RUN:
            assert_prints_the_sample(done.stdout)


# The snippet's budget, and the tiny one it runs at here as the commands above do (its 1,000,000
# env steps of training took 66 s here, at the tiny budget 40 s: its two programs compiling).
SNIPPET_BUDGET, TINY_SNIPPET_BUDGET = "total_timesteps=100_000", "total_timesteps=2_048"


@pytest.mark.slow
def test_readme_python_snippet_runs(tmp_path):
    (snippet,) = blocks("python")
    assert snippet.count(SNIPPET_BUDGET) == 1, "the snippet's budget changed: update this test"
    done = subprocess.run(
        [sys.executable, "-c", snippet.replace(SNIPPET_BUDGET, TINY_SNIPPET_BUDGET)],
        cwd=tmp_path,
        env=environment(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    finals = done.stdout.strip().splitlines()[0]
    assert finals.startswith("[") and len(finals.strip("[]").split()) == 8, done.stdout
    # The runner's call writes the run directory it names, as the snippet's comment says.
    assert (tmp_path / "runs" / "lr" / "summary.json").is_file(), done.stdout
