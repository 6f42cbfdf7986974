"""The command line of every algorithm file: Config fields and run options as flags (tyro).

Exit codes: 0 the run finished (or a callback stopped it); 2 bad input (a ConfigError from a
Config, `make_train` or the runner: a one-line message, before anything compiles; or code that
asks Python for a traced value, a fork's `if` on a float field: one line, --debug for the
traceback); 3 the run finished but a seed diverged (or `--stop-on-divergence` stopped it); 75
(EX_TEMPFAIL) stopped by SIGTERM or SIGINT after checkpointing: `--resume` continues it; 143 or
130 a second signal ended it at once (the previous checkpoint stands); 130 too for Ctrl-C
outside the intervals (building the env, checking the config, the final summary), in one line.
"""

import dataclasses
import datetime
import inspect
import os
import sys
import sysconfig
import textwrap
import traceback
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Literal

import canter.common
import jax
import jax.numpy as jnp
import tyro
from canter.common.config import ConfigError, checked, deferred_checks, traced_fields
from canter.common.run.batch import make_batch, parse_sweep
from canter.common.run.debug import run_debug
from canter.common.run.devices import use_cpu_cores
from canter.common.run.interrupts import Interrupted
from canter.common.run.resume import check_resume, done_iterations
from canter.common.run.rundir import RunDir, config_record, new_run_dir, run_name
from canter.common.run.runner import RunResult, check, check_trackers, run


@dataclasses.dataclass(frozen=True)
class RunOptions:
    """How the host runner runs and what it writes; none of it changes the numbers."""

    run_dir: Path | None = None
    """Run directory (default: a new runs/<env>__<algo>__<seed>__<timestamp>[-N], the env id
    with ':' and '/' made '-')."""
    resume: Path | None = None
    """Continue the run in this directory from its last checkpoint (its config is the default)."""
    extend: bool = False
    """With --resume and a larger --total-timesteps: continue even where the run would not equal
    one started with the new budget; schedules over the budget (an annealed learning rate, an
    epsilon decay) follow the new budget from the resume point on (docs/running.md)."""
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
    a breakpoint() in step stops with real values (common/run/debug.py). First the program is
    traced as the runner traces it: a Python `if` on a float field fails there, traceback shown."""
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
    explain: Callable[[ConfigError], str] | None = None,
) -> RunResult | None:
    """Parse the flags (a preset or a resumed run's config are the defaults), then `run`
    (or, with --debug, `run_debug`); exit with a nonzero code as the module doc says. Bad input
    is printed as `explain(error)` words it (by default `house_hint`: which files to use
    instead)."""
    use_cpu_cores()  # before anything touches JAX's devices (common/run/devices.py)
    # Unwrapped: a decorated make_train (a fork's, or the tests' runtime type checks) names its
    # own file, not the decorator's.
    algo = Path(inspect.getfile(inspect.unwrap(make_train))).stem
    made = None  # the default run directory, once created
    config, options = None, RunOptions()
    try:
        argv = _aliases(sys.argv[1:], config_cls)
        argv, default, saved_sweep = _defaults(config_cls, algo, argv, presets)
        # --help's groups: "options" (--help, --preset), "config options", "run options".
        # `preset` is for --help alone: `_defaults` took --preset NAME out of argv above.
        shown = tyro.conf.arg(metavar="NAME", help=PRESET_HELP, help_behavior_hint="(optional)")
        hidden = tyro.conf.Suppress if not presets else shown  # a file without presets

        def parse(
            config: Annotated[config_cls, tyro.conf.OmitArgPrefixes] = default,
            options: Annotated[
                RunOptions, tyro.conf.OmitArgPrefixes, tyro.conf.arg(name="run")
            ] = RunOptions(),  # noqa: B008
            preset: Annotated[str | None, hidden] = None,
        ) -> tuple[Any, RunOptions]:
            return config, options

        with deferred_checks():  # a range error is one line below, not tyro's box
            config, options = tyro.cli(parse, args=argv, description=_describe(make_train, presets))
        config = checked(config)
        if options.resume is not None and options.run_dir is not None:
            if options.run_dir.resolve() != options.resume.resolve():
                raise ConfigError(
                    f"--resume {options.resume} continues the run in that directory; drop "
                    f"--run-dir {options.run_dir} (a resumed run cannot move)."
                )
        use_compile_cache(options.compile_cache)
        if options.debug:
            if options.sweep:
                raise ConfigError("--debug runs one configuration; drop --sweep.")
            trace(config, make_train)  # what jit-off hides: a Python `if` on a float field
            run_debug(config, make_train, algo=algo)
            return None
        sweep = parse_sweep(options.sweep, config_cls) if options.sweep else saved_sweep
        if options.dry_run:
            check_trackers(options.track)
            data_parallel = options.data_parallel
            print(check(config, make_train, algo=algo, sweep=sweep, data_parallel=data_parallel))
            print("dry run: checked; nothing compiled or written")
            return None
        if options.extend and options.resume is None:
            raise ConfigError("--extend continues a resumed run: give --resume RUN_DIR too.")
        if options.resume is not None and _finished(
            options.resume, config, make_train, algo, sweep, options.extend
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
            extend=options.extend,
        )
    except ConfigError as error:
        _remove_if_empty(made)
        print(f"error: {(explain or house_hint)(error)}", file=sys.stderr)
        raise SystemExit(EXIT_BAD_INPUT) from None
    except TRACED_VALUE as error:  # tracing (compiling, a resume's check, --debug's trace)
        _remove_if_empty(made)
        if options.debug:
            traceback.print_exception(error)
        print(f"error: {traced_value(error, config, options.debug)}", file=sys.stderr)
        raise SystemExit(EXIT_BAD_INPUT) from None
    except KeyboardInterrupt:  # Ctrl-C outside the intervals (building the env, checks, the end)
        _remove_if_empty(made)
        print(
            "stopped (SIGINT) outside training's intervals: what was saved stands (--resume "
            "continues from the last checkpoint, if there is one)",
            file=sys.stderr,
        )
        raise SystemExit(EXIT_INTERRUPTED) from None
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


EXIT_BAD_INPUT, EXIT_DIVERGED, EXIT_PREEMPTED, EXIT_INTERRUPTED = 2, 3, 75, 130

PRESET_HELP = (
    "Start from the values of the preset NAME (the Presets listed above); other flags override "
    "them. Not with --resume: a resumed run keeps its config."
)

# JAX's errors for Python asking a traced value for its value while the program is traced: an
# `if` on it (TracerBoolConversionError, a ConcretizationTypeError), int(), an index, NumPy.
TRACED_VALUE = (
    jax.errors.ConcretizationTypeError,
    jax.errors.TracerIntegerConversionError,
    jax.errors.TracerArrayConversionError,
)
ASKED = {
    jax.errors.TracerBoolConversionError: "branches in Python (an `if`, bool()) on",
    jax.errors.TracerIntegerConversionError: "asks Python for an index (range(), a list's) of",
    jax.errors.TracerArrayConversionError: "hands NumPy",
}


def traced_value(error: Exception, config: Any, debug: bool = False) -> str:
    """The one-line message of a TRACED_VALUE error: the user's line that asked, the rule, the
    Config's traced fields, where to read more."""
    asked = next((a for kind, a in ASKED.items() if isinstance(error, kind)), None)
    asked = asked or "asks Python for a concrete value (int(), float(), a shape) of"
    frame = _user_frame(error)
    where = "make_train's code"
    if frame is not None:
        path = Path(frame.filename)
        path = path.relative_to(Path.cwd()) if path.is_relative_to(Path.cwd()) else path
        where = f"{path}:{frame.lineno}" + (f" (`{frame.line}`)" if frame.line else "")
    fields = ", ".join(traced_fields(config)) if config is not None else ""
    traced = f"its float fields are traced ({fields})" if fields else "its values are traced"
    more = "The traceback is above." if debug else "Rerun with --debug for the traceback."
    return (
        f"{where} {asked} a traced value ({type(error).__name__}): under the runner, make_train "
        f"is vmapped over the Config, so {traced}; branch on them with jnp.where or lax.cond, "
        f'not a Python `if` (docs/forking.md, "Static and traced fields"). {more}'
    )


def _user_frame(error: BaseException) -> traceback.FrameSummary | None:
    """The traceback's last frame in the user's code: outside the standard library, installed
    packages (JAX, Equinox, optax...) and canter's common/."""
    libraries = {sysconfig.get_path(p) for p in ("stdlib", "purelib", "platlib")}
    outside = [Path(p).resolve() for p in (*libraries, canter.common.__path__[0])]
    frames = traceback.extract_tb(error.__traceback__)
    mine = [f for f in frames if not any(_inside(f.filename, o) for o in outside)]
    return mine[-1] if mine else None


def _inside(file: str, folder: Path) -> bool:
    return Path(file).resolve().is_relative_to(folder)


def trace(config: Any, make_train: Callable) -> None:
    """--debug's first step: trace `start` and one `interval` as the runner does (vmapped over
    the batch, float fields as tracers; nothing compiled), so that Python asking a traced value
    fails here with its traceback, where jit-off's eager run would not fail at all. Breakpoints
    are silent while it traces; any other error is left to the eager run, with real values."""
    configs, keys = make_batch(config, {}).inputs()
    start = jax.vmap(lambda c, k: make_train(c).start(k))
    interval = jax.vmap(lambda c, s, k, i: make_train(c).interval(s, k, i), in_axes=(0, 0, 0, None))
    hook, sys.breakpointhook = sys.breakpointhook, lambda *args, **kwargs: None
    try:
        state, key = jax.eval_shape(start, configs, keys)
        jax.eval_shape(interval, configs, state, key, jax.ShapeDtypeStruct((), jnp.int32))
    except TRACED_VALUE:
        raise
    except Exception:
        pass  # the eager run meets it, with real values
    finally:
        sys.breakpointhook = hook


def exit_code(summary: dict[str, Any]) -> int:
    """The exit code of a finished run (see the module doc)."""
    if summary["stopped"] in ("SIGTERM", "SIGINT"):
        return EXIT_PREEMPTED
    return EXIT_DIVERGED if summary["diverged"] else 0


def _describe(make_train: Callable, presets: dict[str, dict[str, Any]]) -> str:
    """--help: the algorithm file's docstring, then its presets, wrapped to 100 columns. Presets
    whose env is named after them (`--env playground:<preset>`) form a family: the values all
    of them set are given once, then each group of presets that agree on the rest."""
    doc = sys.modules[make_train.__module__].__doc__ or ""
    if not presets:
        return doc
    families: dict[str | None, dict[str, dict]] = {}
    for name, values in presets.items():
        env = values.get("env", "")
        prefix = env[: -len(name)] if env.endswith(name) else None
        own = {k: v for k, v in values.items() if k != "env" or prefix is None}
        families.setdefault(prefix, {})[name] = own
    entries = []
    for prefix, members in families.items():
        first, *others = members.values()
        shared = {k: v for k, v in first.items() if all(k in o and o[k] == v for o in others)}
        if prefix is None or not others or not shared:
            members = {n: presets[n] for n in members} if prefix is not None else members
            shared = {}
        else:
            entries.append(_wrapped(f"--env {prefix}<preset> " + _flags(shared), "  "))
        groups: dict[tuple, list[str]] = {}
        for name, values in members.items():
            rest = tuple((k, v) for k, v in values.items() if k not in shared)
            groups.setdefault(rest, []).append(name)
        indent = "  " if not shared else "    "
        for rest, names in groups.items():
            entries.append(_wrapped(f"--preset {' | '.join(names)}: {_flags(dict(rest))}", indent))
    listed = "\n".join(entries)
    return f"{doc}\nPresets (the defaults they set; other flags override them):\n{listed}"


def flag(name: str, value: Any) -> str:
    """A Config field's value as the flag that sets it (a bool as `--name` or `--no-name`, as
    tyro spells them)."""
    name = name.replace("_", "-")
    if isinstance(value, bool):
        return f"--{name}" if value else f"--no-{name}"
    if isinstance(value, tuple | list):
        return f"--{name} {' '.join(map(str, value))}"
    return f"--{name} {value}"


def _flags(values: dict[str, Any]) -> str:
    return " ".join(flag(k, v) for k, v in values.items()) or "(the values above)"


def _wrapped(text: str, indent: str) -> str:
    return textwrap.fill(
        text, 100, initial_indent=indent, subsequent_indent=indent + "    ", break_on_hyphens=False
    )


def house_hint(error: Exception) -> str:
    """A bad-input message, with the house's files (canter.algorithms.HOUSE) for the env's kind
    of actions added, or the files that have an unknown preset."""
    import importlib

    from canter.algorithms import HOUSE, SUITE_ONLY
    from canter.common.envs import ActionSpaceError

    if isinstance(error, UnknownPreset):
        modules = {n: importlib.import_module(f"canter.algorithms.{n}") for n in HOUSE}
        files = [
            f"algorithms/{n}.py"
            for n, m in modules.items()
            if error.name in getattr(m, "PRESETS", {})
        ]
        return f"{error} It is a preset of {', '.join(files)}." if files else str(error)
    if not isinstance(error, ActionSpaceError):
        return str(error)
    files = [
        f"algorithms/{name}.py"
        for name, kind in HOUSE.items()
        if kind == error.kind and name not in SUITE_ONLY
    ]
    return f"{error} For {error.kind} actions use {' or '.join(files)} instead."


class UnknownPreset(ConfigError):
    """`--preset NAME` that this file does not have; `name` is NAME (the trainer's message
    adds the files that do have it)."""

    def __init__(self, message: str, name: str) -> None:
        super().__init__(message)
        self.name = name


def _defaults(config_cls: type, algo: str, argv: list[str], presets: dict) -> tuple:
    """(argv without --preset NAME, default Config, default sweep): a preset's values, or with
    `--resume DIR` the saved run's config and sweep, else the Config's own defaults."""
    preset = None
    # `--preset=NAME` too: tyro, which lists --preset in --help, must never see it.
    argv = [
        w for arg in argv for w in (arg.split("=", 1) if arg.startswith("--preset=") else [arg])
    ]
    if argv.count("--preset") > 1:
        raise ConfigError("--preset is given more than once: give one.")
    if "--preset" in argv:
        at = argv.index("--preset")
        name = argv[at + 1] if at + 1 < len(argv) else ""
        if name not in presets:
            valid = ", ".join(presets) or "none (this algorithm has no presets)"
            raise UnknownPreset(f"--preset '{name}' is unknown. Presets: {valid}.", name)
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
    the field, and a whole number written as a float (`--total-timesteps 1e6`, `2.5e5`) given
    to an int field as an int (a fraction is left for the parser to refuse)."""
    fields = {f"--{f.name.replace('_', '-')}" for f in dataclasses.fields(config_cls)}
    hints = typing.get_type_hints(config_cls)
    ints = {f"--{n.replace('_', '-')}" for n, t in hints.items() if t is int}
    out = []
    for arg in argv:
        flag, eq, value = arg.partition("=")
        if flag in ALIASES and ALIASES[flag] in fields:
            flag = ALIASES[flag]
            arg = flag + eq + value
        if eq and flag in ints:
            arg = flag + eq + _whole(value)
        elif out and out[-1] in ints and not arg.startswith("--"):
            arg = _whole(arg)
        out.append(arg)
    return out


def _whole(value: str) -> str:
    """`value` as an int's digits where it is a float literal of a whole number, else as is."""
    try:
        int(value)
        return value  # an int already (exact, however large)
    except ValueError:
        pass
    try:
        number = float(value)
    except ValueError:
        return value
    return str(int(number)) if number.is_integer() and abs(number) < 2**63 else value


def _finished(
    path: Path, config: Any, make_train: Callable, algo: str, sweep: dict, extend: bool
) -> bool:
    """Whether the run in `path` (to be resumed with `config`) is finished; says so if it is.
    A config that differs from the saved one is refused here, before anything compiles."""
    record = config_record(algo, config, sweep)
    done, saved = check_resume(RunDir(path), record, make_train, make_batch(config, sweep), extend)
    total = make_train(config).num_intervals  # builds the env, compiles nothing
    if done < total or done_iterations(make_train, config, saved, done):
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
