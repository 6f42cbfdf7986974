"""The host runner, split by job. Nothing here changes a number of a learning curve.

cli.py         the command line: flags from Config, presets, sweeps, bad input exits 2
runner.py      run(): compile, loop over intervals, checkpoint, log, report
programs.py    the compiled interval and its layout over devices
batch.py       seeds x sweep points as one vmapped axis; keys.py: per-seed keys
devices.py     CPU cores as devices, sharding, data-parallel minibatches
rundir.py      the run directory's layout and config.json; files.py: atomic writes
checkpoint.py  save / load the whole state; interrupts.py: SIGTERM / SIGINT
logging.py     metric sinks (CSV, TensorBoard, W&B); report.py: summaries, curves
health.py      divergence checks; debug.py: --debug (eager, NaN checks)
memory.py      the memory a run needs, estimated from its traced program
heartbeat.py   a line while a long compile or interval goes on
evaluation.py  episodes of a policy (run_episodes)
"""
