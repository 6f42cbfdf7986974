"""The fork, as docs/forking.md tells it: copy an algorithm file, in the repository or into
another project, and it trains, resumes and evaluates; the test suite's checks stay green."""

import importlib.util
import json
import shutil
import subprocess
import sys
import tomllib
import uuid
from pathlib import Path

import numpy as np
import pytest

from tests.checks import algorithms_folder, kill_after_checkpoint
from tests.test_copies import copy_problems, unmarked_copies

SIZES = ["--num-envs", "4", "--num-steps", "16", "--num-minibatches", "2", "--update-epochs", "1"]
SIZES += ["--eval-every", str(4 * 16 * 4), "--num-eval-envs", "2"]
# 400 iterations, evaluated every 4: 100 intervals, seconds of training, so that the kill lands
# after the second checkpoint and long before the run's end (at 40 iterations the whole run took
# 0.4-0.6 s and the kill had 0.3 s to land).
TINY = [*SIZES, "--total-timesteps", str(4 * 16 * 400)]
# 40 iterations: the project's fork trains whole.
SHORT = [*SIZES, "--total-timesteps", str(4 * 16 * 40)]


def start(script: Path, cwd: Path, *args: str) -> subprocess.Popen:
    command = [sys.executable, str(script), *args]
    return subprocess.Popen(command, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def finish(process: subprocess.Popen) -> str:
    out, err = process.communicate(timeout=600)
    assert process.returncode == 0, err.decode()[-3000:]
    return out.decode()


def train_kill_resume(script: Path, cwd: Path, run_dir: Path) -> dict:
    """Train the fork, SIGKILL it after a checkpoint, resume it to the end, losing at most the
    work since that checkpoint; its config.json."""
    victim = start(script, cwd, *TINY, "--run-dir", str(run_dir), "--checkpoint-every", "1")
    saved = kill_after_checkpoint(victim, run_dir, 2)
    assert saved >= 2
    out = finish(start(script, cwd, "--resume", str(run_dir)))
    assert "resumed from" in out and "done: return" in out
    assert int(out.split("after interval ")[1].split("/")[0]) >= saved
    return json.loads((run_dir / "config.json").read_text())


def evaluate(cwd: Path, run_dir: Path, *args: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "canter.algorithms.evaluate", str(run_dir), *args]
    return subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=600)


@pytest.mark.slow
def test_a_fork_inside_the_repository_trains_resumes_evaluates(repo_root, tmp_path):
    name = f"my_ppo_{uuid.uuid4().hex[:8]}"
    fork = repo_root / "algorithms" / f"{name}.py"
    # The fork sits in algorithms/ for the test's length only: the tests that read every file
    # there wait for it (tests/checks.py, algorithms_folder).
    with algorithms_folder(exclusive=True):
        shutil.copy(repo_root / "algorithms" / "ppo.py", fork)
        try:
            check_the_fork_in_the_repository(repo_root, tmp_path, name, fork)
        finally:
            fork.unlink(missing_ok=True)


def check_the_fork_in_the_repository(repo_root, tmp_path, name, fork):
    from canter.algorithms import ppo, trainer

    record = train_kill_resume(fork, tmp_path, tmp_path / "run")
    assert record["algo"] == name
    assert record["source"] == {"file": str(fork), "module": f"canter.algorithms.{name}"}
    # Killed and resumed, it ends as an uninterrupted run of its config does (the fork is
    # ppo.py unchanged), with every interval's row once.
    sizes = dict(num_envs=4, num_steps=16, num_minibatches=2, update_epochs=1, num_eval_envs=2)
    config = ppo.Config(**sizes, eval_every=4 * 16 * 4, total_timesteps=4 * 16 * 400)
    whole = trainer.run(config, ppo.make_train, algo="ppo", verbose=False).summary
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    for key in ("final_return", "eval_return"):
        np.testing.assert_allclose(summary[key], whole[key], rtol=1e-4, atol=1e-4)
    rows = (tmp_path / "run" / "seed_0" / "metrics.csv").read_text().splitlines()[1:]
    assert [int(row.split(",")[0]) for row in rows] == list(range(1, 101))
    done = evaluate(tmp_path, tmp_path / "run", "--episodes", "2")
    assert done.returncode == 0 and "mean over entries" in done.stdout, done.stderr[-3000:]
    # The house's checks with the fork beside the house files: still green.
    assert not copy_problems(repo_root)[1]
    assert not unmarked_copies(repo_root)


@pytest.mark.slow
def test_a_fork_in_a_project_with_its_own_common_package(repo_root, tmp_path):
    project = tmp_path / "project"
    (project / "common").mkdir(parents=True)
    # The project's own `common` (a common folder name): the fork imports it, canter's code
    # must not be shadowed by it, nor shadow it.
    (project / "common" / "__init__.py").write_text("OWN = 'the project'\n")
    source = (repo_root / "algorithms" / "ppo.py").read_text()
    anchor = "from canter.algorithms import trainer\n"
    assert anchor in source
    own = "import common  # the project's own package\n"
    fork_text = source.replace(anchor, own + anchor) + "\nassert common.OWN == 'the project'\n"
    fork = project / "my_ppo.py"
    fork.write_text(fork_text)
    # Trained whole: the kill and resume of a fork are the test above's (the same runner path).
    run_dir = tmp_path / "run"
    out = finish(start(fork, project, *SHORT, "--run-dir", str(run_dir)))
    assert "done: return" in out
    record = json.loads((run_dir / "config.json").read_text())
    assert record["source"] == {"file": str(fork), "module": None}
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    done = evaluate(elsewhere, tmp_path / "run", "--episodes", "2")
    assert done.returncode == 0 and "mean over entries" in done.stdout, done.stderr[-3000:]
    # The project moved: evaluate says so before compiling, and --algorithm points to it.
    project.rename(tmp_path / "moved")
    moved = tmp_path / "moved" / "my_ppo.py"
    done = evaluate(elsewhere, tmp_path / "run", "--episodes", "2")
    assert done.returncode == 2 and "--algorithm PATH" in done.stderr, done.stderr[-3000:]
    assert "Traceback" not in done.stderr
    done = evaluate(elsewhere, tmp_path / "run", "--episodes", "2", "--algorithm", str(moved))
    assert done.returncode == 0, done.stderr[-3000:]


# The trap docs/forking.md names: a Python `if` on a float field, which is a tracer under the
# runner (make_train is vmapped over the Config).
BRANCH = "        if config.ent_coef > 0:\n"
ENTROPY = "        loss = pg_loss + config.vf_coef * v_loss - config.ent_coef * entropy\n"


def branching_fork(repo_root: Path, folder: Path) -> Path:
    """algorithms/ppo.py copied to `folder`/my_ppo.py with its entropy term under `BRANCH`."""
    source = (repo_root / "algorithms" / "ppo.py").read_text()
    assert source.count(ENTROPY) == 1, "ppo.py's loss changed: update this test"
    split = ENTROPY.replace(" - config.ent_coef * entropy", "")
    term = "            loss = loss - config.ent_coef * entropy\n"
    fork = folder / "my_ppo.py"
    fork.write_text(source.replace(ENTROPY, split + BRANCH + term))
    return fork


def assert_names_the_trap(line: str, fork: Path) -> None:
    """The one-line error: the fork's line, the rule, every traced field, the docs."""
    from canter.algorithms import ppo
    from canter.common.config import traced_fields

    number = fork.read_text().splitlines().index(BRANCH.rstrip("\n")) + 1
    assert line.startswith(f"error: my_ppo.py:{number} (`if config.ent_coef > 0:`) "), line
    assert "TracerBoolConversionError" in line and "jnp.where or lax.cond" in line, line
    fields = traced_fields(ppo.Config())
    assert "ent_coef" in fields and "num_envs" not in fields
    assert f"traced ({', '.join(fields)})" in line, line
    assert 'docs/forking.md, "Static and traced fields"' in line, line


@pytest.mark.slow  # a CLI process (the exit code and stderr end to end) that traces a program
def test_a_fork_branching_on_a_float_field_fails_in_one_line(repo_root, tmp_path):
    fork = branching_fork(repo_root, tmp_path)
    command = [sys.executable, str(fork), *SHORT, "--run-dir", str(tmp_path / "run")]
    done = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert done.returncode == 2, done.stderr[-3000:]
    assert "Traceback" not in done.stderr and done.stderr.count("\n") == 1, done.stderr
    assert_names_the_trap(done.stderr.strip(), fork)
    assert "Rerun with --debug for the traceback." in done.stderr
    assert not (tmp_path / "run").exists()
    # docs/forking.md shows this line (its line number aside).
    shown = (repo_root / "docs" / "forking.md").read_text()
    printed = done.stderr.strip().split(" (`if", 1)[1]
    assert f"error: my_ppo.py:403 (`if{printed}\n" in shown, "docs/forking.md: update the line"


def test_debug_traces_first_and_shows_a_forks_traceback(repo_root, tmp_path, monkeypatch, capsys):
    """--debug's eager run (jit off, one seed unvmapped) would let the fork's `if` pass: it
    traces the program as the runner does first, and fails there with the traceback, exit 2."""
    from canter.algorithms import trainer

    fork = branching_fork(repo_root, tmp_path)
    spec = importlib.util.spec_from_file_location("my_ppo", fork)
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "my_ppo", module)
    spec.loader.exec_module(module)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", ["my_ppo.py", "--debug", "--num-envs", "4"])
    with pytest.raises(SystemExit) as exited:
        trainer.cli(module.Config, module.make_train, module.PRESETS)
    out, err = capsys.readouterr()
    assert exited.value.code == 2, err
    assert "debug:" not in out, out  # stopped before the eager run
    assert err.startswith("Traceback") and f'File "{fork}", line' in err, err
    *_, line = err.strip().splitlines()
    assert_names_the_trap(line, fork)
    assert line.endswith("The traceback is above."), line


def test_every_package_folder_is_installed_under_canter(repo_root):
    """The wheel's package list names every folder with an __init__.py, mapped under canter."""
    project = tomllib.loads((repo_root / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert project["package-dir"] == {"canter.algorithms": "algorithms", "canter.common": "common"}
    folders = {
        "canter." + ".".join(init.parent.relative_to(repo_root).parts)
        for top in ("algorithms", "common")
        for init in (repo_root / top).rglob("__init__.py")
    }
    assert set(project["packages"]) == folders


def test_no_bare_algorithms_or_common_imports(repo_root):
    """Code imports canter's packages by their installed names only (`canter.common...`): a
    bare `import common` would pick up a user's own package of that name."""
    offenders = []
    for top in ("algorithms", "common", "tests", "benchmarks"):
        for path in (repo_root / top).rglob("*.py"):
            for number, line in enumerate(path.read_text().splitlines(), start=1):
                words = line.strip().split()
                if words[:1] in (["import"], ["from"]) and len(words) > 1:
                    if words[1].split(".")[0] in ("algorithms", "common"):
                        offenders.append(f"{path.relative_to(repo_root)}:{number}: {line}")
    assert not offenders, "\n".join(offenders)
