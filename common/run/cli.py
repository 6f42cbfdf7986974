"""The command line of every algorithm file: Config fields and run options as flags (tyro).

Exit codes: 0 the run finished (or a callback stopped it); 2 bad input (a ConfigError from a
Config, `make_train` or the runner: a one-line message, before anything compiles); 3 the run
finished but a seed diverged (or `--stop-on-divergence` stopped it); 75 (EX_TEMPFAIL) stopped
by SIGTERM or SIGINT after checkpointing: `--resume` continues it; 143 or 130 a second signal
ended it at once (the previous checkpoint stands).
"""

import dataclasses
import datetime
import inspect
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Literal

import jax
import tyro
from canter.common.config import ConfigError
from canter.common.run.batch import make_batch, parse_sweep
from canter.common.run.debug import run_debug
from canter.common.run.devices import use_cpu_cores
from canter.common.run.interrupts import Interrupted
from canter.common.run.programs import check_resume
from canter.common.run.rundir import RunDir, config_record, new_run_dir, run_name
from canter.common.run.runner import RunResult, check, run


@dataclasses.dataclass(frozen=True)
class RunOptions:
    """How the host runner runs and what it writes; none of it changes the numbers."""

    run_dir: Path | None = None
    """Run directory (default: a new runs/<env>__<algo>__<seed>__<timestamp>[-N], the env id
    with ':' and '/' made '-')."""
    resume: Path | None = None
    """Continue the run in this directory from its last checkpoint (its config is the default)."""
    checkpoint_minutes: float = 1.0
    """A checkpoint once this much run time has passed since the last (0: not by time); always
    one at the end and when a run stops."""
    checkpoint_every: int = 0
    """Also a checkpoint every this many evaluation intervals (0: not by count)."""
    track: tuple[Literal["tensorboard", "wandb"], ...] = ()
    """Also log to TensorBoard and/or W&B (pip install -e '.[log]'; WANDB_MODE=offline works)."""
    sweep: Annotated[tuple[str, ...], tyro.conf.UseAppendAction] = ()
    """Grid over float fields in one program, e.g. --sweep learning_rate=1e-4,3e-4 (repeatable)."""
    stop_on_divergence: bool = False
    """Stop (checkpointed, exit 3) at the first seed whose state or metrics go NaN or inf;
    by default the other seeds go on and the run exits 3 at the end."""
    data_parallel: bool = False
    """With fewer seeds (x sweep points) than devices, split each seed's envs and minibatches
    over the devices, gradients averaged across them (same numbers as one device)."""
    debug: bool = False
    """Run eagerly (jit off), with NaN checks, on one seed for 2 iterations, writing nothing:
    a breakpoint() in step stops with real values (common/run/debug.py)."""
    dry_run: bool = False
    """Check the flags, the config (every sweep point) and the env, say what would train, and
    exit 0 without compiling or writing anything."""
    overlap: bool = True
    """Compute each interval while the host handles the previous one (same numbers); with a
    checkpoint due, callbacks or --stop-on-divergence that holds two copies of the state on
    the device: --no-overlap where memory is tight."""
    compile_cache: bool = True
    """Reuse compiled programs across runs (JAX's persistent cache, ~/.cache/canter/jax or
    $JAX_COMPILATION_CACHE_DIR); --no-compile-cache compiles cold."""


def use_compile_cache(enabled: bool) -> Path | None:
    """Turn JAX's persistent compilation cache on (in the user's cache directory unless
    JAX_COMPILATION_CACHE_DIR names one) or off; returns the directory in use."""
    if not enabled:
        jax.config.update("jax_enable_compilation_cache", False)
        return None
    if not jax.config.jax_compilation_cache_dir:
        base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
        jax.config.update("jax_compilation_cache_dir", str(base / "canter" / "jax"))
    jax.config.update("jax_enable_compilation_cache", True)
    return Path(jax.config.jax_compilation_cache_dir)


def main(
    config_cls: type,
    make_train: Callable,
    presets: dict[str, dict[str, Any]],
    explain: Callable[[ConfigError], str] = str,
) -> RunResult | None:
    """Parse the flags (a preset or a resumed run's config are the defaults), then `run`
    (or, with --debug, `run_debug`); exit with a nonzero code as the module doc says. Bad input
    is printed as `explain(error)` words it (the trainer adds which files to use instead)."""
    use_cpu_cores()  # before anything touches JAX's devices (common/run/devices.py)
    # Unwrapped: a decorated make_train (a fork's, or the tests' runtime type checks) names its
    # own file, not the decorator's.
    algo = Path(inspect.getfile(inspect.unwrap(make_train))).stem
    made = None  # the default run directory, once created
    try:
        argv = _aliases(sys.argv[1:], config_cls)
        argv, default, saved_sweep = _defaults(config_cls, algo, argv, presets)

        def parse(
            config: Annotated[config_cls, tyro.conf.OmitArgPrefixes] = default,
            options: Annotated[RunOptions, tyro.conf.OmitArgPrefixes] = RunOptions(),  # noqa: B008
        ) -> tuple[Any, RunOptions]:
            return config, options

        config, options = tyro.cli(parse, args=argv, description=_describe(make_train, presets))
        use_compile_cache(options.compile_cache)
        if options.debug:
            if options.sweep:
                raise ConfigError("--debug runs one configuration; drop --sweep.")
            run_debug(config, make_train, algo=algo)
            return None
        sweep = parse_sweep(options.sweep, config_cls) if options.sweep else saved_sweep
        if options.dry_run:
            data_parallel = options.data_parallel
            print(check(config, make_train, algo=algo, sweep=sweep, data_parallel=data_parallel))
            print("dry run: checked; nothing compiled or written")
            return None
        if options.resume is not None and _finished(
            options.resume, config, make_train, algo, sweep
        ):
            return None
        if options.resume is None and options.run_dir is None:
            stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
            made = new_run_dir(Path("runs") / run_name(config.env, algo, config.seed, stamp))
        result = run(
            config,
            make_train,
            algo=algo,
            run_dir=options.resume or options.run_dir or made,
            sweep=sweep,
            resume=options.resume is not None,
            checkpoint_every=options.checkpoint_every,
            checkpoint_minutes=options.checkpoint_minutes,
            track=options.track,
            stop_on_divergence=options.stop_on_divergence,
            data_parallel=options.data_parallel,
            overlap=options.overlap,
        )
    except ConfigError as error:
        _remove_if_empty(made)
        print(f"error: {explain(error)}", file=sys.stderr)
        raise SystemExit(EXIT_BAD_INPUT) from None
    except Interrupted as stop:  # the compilation goes on on a helper thread: do not wait for it
        _remove_if_empty(made)
        print(stop, file=sys.stderr)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(EXIT_PREEMPTED)
    code = exit_code(result.summary)
    if code:
        raise SystemExit(code)
    return result


EXIT_BAD_INPUT, EXIT_DIVERGED, EXIT_PREEMPTED = 2, 3, 75


def exit_code(summary: dict[str, Any]) -> int:
    """The exit code of a finished run (see the module doc)."""
    if summary["stopped"] in ("SIGTERM", "SIGINT"):
        return EXIT_PREEMPTED
    return EXIT_DIVERGED if summary["diverged"] else 0


def _describe(make_train: Callable, presets: dict[str, dict[str, Any]]) -> str:
    """--help: the algorithm file's docstring, then its presets."""
    doc = sys.modules[make_train.__module__].__doc__ or ""
    if not presets:
        return doc
    listed = "\n".join(
        f"  --preset {name}: " + " ".join(f"--{k.replace('_', '-')} {v}" for k, v in p.items())
        for name, p in presets.items()
    )
    return f"{doc}\nPresets (the defaults they set; other flags override them):\n{listed}"


def _defaults(config_cls: type, algo: str, argv: list[str], presets: dict) -> tuple:
    """(argv without --preset NAME, default Config, default sweep): a preset's values, or with
    `--resume DIR` the saved run's config and sweep, else the Config's own defaults."""
    preset = None
    if "--preset" in argv:
        at = argv.index("--preset")
        name = argv[at + 1] if at + 1 < len(argv) else ""
        if name not in presets:
            valid = ", ".join(presets) or "none (this algorithm has no presets)"
            raise ConfigError(f"--preset '{name}' is unknown. Presets: {valid}.")
        if "--resume" in argv:
            raise ConfigError("--preset and --resume do not mix: a resumed run keeps its config.")
        argv, preset = argv[:at] + argv[at + 2 :], presets[name]
        env = _flag_value(argv, "--env")
        if env is not None and "env" in preset and env != preset["env"]:
            match = [n for n, p in presets.items() if p.get("env") == env]
            instead = f"use --preset {match[0]}" if match else "no preset is tuned for it"
            raise ConfigError(
                f"--preset {name} is tuned for --env {preset['env']}, not --env {env}; drop "
                f"--env, or {instead} (presets: {', '.join(presets)})."
            )
    if "--resume" in argv and argv.index("--resume") + 1 < len(argv):
        run_dir = RunDir(Path(argv[argv.index("--resume") + 1]))
        _, config, sweep = run_dir.load_config(config_cls, algo)
        return argv, config, sweep
    return argv, config_cls(**(preset or {})), {}


ALIASES = {"--lr": "--learning-rate"}


def _aliases(argv: list[str], config_cls: type) -> list[str]:
    """`argv` with short aliases (`--lr`) spelled as their fields' flags, where the Config has
    the field."""
    fields = {f"--{f.name.replace('_', '-')}" for f in dataclasses.fields(config_cls)}
    out = []
    for arg in argv:
        flag, eq, value = arg.partition("=")
        if flag in ALIASES and ALIASES[flag] in fields:
            arg = ALIASES[flag] + eq + value
        out.append(arg)
    return out


def _finished(path: Path, config: Any, make_train: Callable, algo: str, sweep: dict) -> bool:
    """Whether the run in `path` (to be resumed with `config`) is finished; says so if it is.
    A config that differs from the saved one is refused here, before anything compiles."""
    record = config_record(algo, config, sweep)
    done, _ = check_resume(RunDir(path), record, make_train, make_batch(config, sweep))
    total = make_train(config).num_intervals  # builds the env, compiles nothing
    if done < total:
        return False
    print(f"{path} is finished ({done}/{total} intervals): nothing to resume.")
    return True


def _remove_if_empty(path: Path | None) -> None:
    if path is not None:
        try:
            path.rmdir()
        except OSError:
            pass


def _flag_value(argv: list[str], flag: str) -> str | None:
    """The value given to `flag` in `argv` (`--flag VALUE` or `--flag=VALUE`), if any."""
    for at, arg in enumerate(argv):
        if arg == flag and at + 1 < len(argv):
            return argv[at + 1]
        if arg.startswith(flag + "="):
            return arg.split("=", 1)[1]
    return None
