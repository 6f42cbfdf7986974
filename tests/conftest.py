import os
import re
import shutil
import sys
import tempfile
from pathlib import Path

# Bytecode caches on, for this process, its xdist workers and every CLI subprocess a test starts,
# where the environment turned them off (PYTHONDONTWRITEBYTECODE, as on this project's development
# machine): without them each new interpreter compiles the source of every module it imports
# (jax, gymnax's seaborn and pandas, distrax's TFP) again, 11 of the 16.6 s that a CLI refusing
# bad input took here. With them it takes 5.4 s. They change no test's meaning: Python checks
# each cache against its source's modification time and size.
sys.dont_write_bytecode = False
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)

import jax  # noqa: E402
import pytest  # noqa: E402
from canter.common.run.devices import use_cpu_cores  # noqa: E402

# One CPU device per core, as a run started from the CLI gets (common/run/devices.py): seeds of a
# vmapped run train in parallel. Before anything (gymnax included) starts JAX's backend.
use_cpu_cores()

# XLA:CPU's intra-op thread pool off: on 2 cores, single-threaded Eigen compiled the PPO step
# in 2.9 s instead of 4.2 s and ran as fast. Set before the first computation; CLI subprocesses
# inherit it. (The hangs once blamed on it came from async dispatch: see common/run/devices.py.)
# XLA_FLAGS takes only `--` flags: a bare word (as `intra_op_parallelism_threads=1` was here,
# a TensorFlow option) silently ends the parsing, and every flag after it is ignored.
if "xla_cpu_multi_thread_eigen" not in os.environ.get("XLA_FLAGS", ""):
    flags = "--xla_cpu_multi_thread_eigen=false"
    os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {flags}".strip()

# Many tests compile the same small programs (in-process and in CLI subprocesses, which inherit
# the environment): a persistent compilation cache for this session compiles each only once.
# Nothing is timed or counted through compilation, so the cache changes no test's meaning.
# The process that makes it (the xdist controller, or a lone pytest) removes it at the end; the
# workers and CLI subprocesses find it in the environment.
_own_cache = "JAX_COMPILATION_CACHE_DIR" not in os.environ
if _own_cache:
    os.environ["JAX_COMPILATION_CACHE_DIR"] = tempfile.mkdtemp(prefix="canter-test-jax-cache-")
_cache = os.environ["JAX_COMPILATION_CACHE_DIR"]
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")
jax.config.update("jax_compilation_cache_dir", _cache)
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)


# The slow tier compiles at LLVM's optimisation level 1 (XLA's default is 3) and without
# XLA:CPU's newer fusion emitters, the default tier at level 0 and without them; the learning
# tiers, whose thresholds were measured on what users run, keep XLA's defaults. Their programs
# are small and most of their cost was compiling. Eight slow tests run together (2026-11-29, 2
# cores, each pair back to back): 3 min 41 s at level 1 against 4 min 28 s at level 3, every one
# as fast or faster (vmapped SAC's setup 13 s instead of 30; a training-bound signal test 54
# instead of 59); then 3 min 37 s (398 CPU-s) with the fusion emitters off against 4 min 5 s
# (450 CPU-s) with them on (a tiny PPO program compiled in 8.9 s instead of 10.2, PPO-RNN's in
# 9.8 instead of 13.5, while PPO's CartPole training ran 1.8 times slower: the training-bound
# signal test took 72 s instead of 59). Level 0 ran that training 3-5 times slower, but the
# default tier's programs train for a few iterations: there level 0 compiles them in about half
# the time (2026-12-07, jax 0.10.2, one core beside a benchmark: ppo_rnd's tiny vmapped run 11.0
# -> 4.8 s, DQN's 1,500-iteration probe 1.7 -> 0.7 s while its run took 0.16 s instead of 0.07;
# test_dqn, test_sac, test_ppo_continuous and test_pqn_rnn in one process 57 -> 39 s, and
# test_probes, test_masking, test_run_management, test_robustness and test_eval_policy, the
# default tier's longest training, 72 -> 49 s). The results are the same computation (no
# fast-math anywhere) but not always bit-equal to the defaults': a test compares programs
# compiled the same way, or values known in closed form within a tolerance.
FAST_COMPILE = "--xla_backend_optimization_level=1 --xla_cpu_use_fusion_emitters=false"
DEFAULT_TIER_COMPILE = "--xla_backend_optimization_level=0 --xla_cpu_use_fusion_emitters=false"


def pytest_configure(config):
    from jax._src import xla_bridge

    learning = re.search(r"(?<!not )\blearning(_extra)?\b", config.option.markexpr or "")
    slow = re.search(r"(?<!not )\bslow\b", config.option.markexpr or "")
    if not learning and "xla_backend_optimization_level" not in os.environ["XLA_FLAGS"]:
        # Before JAX starts its backend, which reads XLA_FLAGS once; subprocesses inherit it.
        assert not xla_bridge.backends_are_initialized(), "JAX started before the tests' flags"
        flags = FAST_COMPILE if slow else DEFAULT_TIER_COMPILE
        os.environ["XLA_FLAGS"] = f"{os.environ['XLA_FLAGS']} {flags}"
    # Imported here, after the flags: importing gymnax starts JAX's backend.
    from canter.common.envs import register_env

    from tests.probes import PROBES

    for probe in PROBES:
        register_env(probe.__name__, lambda probe=probe: (probe(), probe().default_params))


def pytest_unconfigure(config):
    if _own_cache:
        shutil.rmtree(_cache, ignore_errors=True)


@pytest.fixture(scope="session")
def repo_root():
    return Path(__file__).resolve().parent.parent


# --- order: the costliest files first
#
# The tiers run on one pytest-xdist worker per core with `--dist loadfile` (pyproject.toml): a
# file's tests stay on one worker, so a module's fixture (a compiled vmapped run, say) is
# computed once, not once per worker, and its programs are compiled once. Files go to the
# workers in collection order, each to the first that is free: the longest first, so that no
# worker ends alone on a long file (longest-processing-time-first). A file's cost is the sum of
# its tests' estimates: worker seconds measured in whole runs of the slow and learning tiers
# on 2 busy cores (2026-11-29: the twenty-second session's slow run and five-test learning
# run; the other learning_extra ones from earlier runs), rounded to 5 s, for the tests of 30 s
# or more; any other learning test counts 100 s, any other slow test 20 s, a default-tier test
# 2 s. Only the order changes, never what runs; tests keep their order within a file (xdist
# keeps the files' order: --no-loadscope-reorder).
ESTIMATES = {  # node ids, or the start of one
    "test_pqn_rnn.py::test_memory_solves_cartpole_without_velocities": 600,
    "test_ppo_rnd.py::test_novelty_finds_the_deep_sea_treasure_that_dithering_never_does": 95,
    "test_pqn_rnn.py::test_memory_solves_memory_chain": 50,
    "test_ppo_trxl.py::test_memory_solves_cartpole_without_velocities": 270,
    "test_ppo_trxl.py::test_memory_solves_memory_chain_where_feed_forward_ppo_is_at_chance": 120,
    "test_ppo_rnn.py::test_memory_beats_feed_forward_ppo_without_velocities": 280,
    "test_gpu_script.py::test_tiny_run_writes_the_tables_of_its_own_scripts_and_the_summary_o": 275,
    "test_craftax.py::test_ppo_learns_craftax_classic_beyond_random_actions": 245,
    "test_ppo_continuous.py::test_pendulum_reaches_target": 225,
    "test_ppo_rnn.py::test_cartpole_reaches_reference_return": 215,
    "test_sac.py::test_sac_pendulum_reaches_target_return": 200,
    "test_run_management.py::test_multihost_run_resumes_there_and_on_one_or_four_devices_equa": 180,
    "test_pqn.py::test_pqn_cartpole_reaches_reference_return": 165,
    "test_td3.py::test_td3_pendulum_reaches_target_return": 160,
    "test_physics.py::test_ppo_continuous_balances_the_playground_cartpole": 155,
    "test_jumanji.py::test_ppo_with_masks_beats_random_valid_items_on_knapsack": 145,
    "test_physics.py::test_sac_trains_and_draws_on_playground": 125,
    "test_dqn.py::test_dqn_cartpole_reaches_reference_return": 115,
    "test_c51.py::test_c51_cartpole_reaches_reference_return": 160,
    "test_c51.py::test_cli_run_then_evaluate_and_render": 25,
    "test_c51.py::test_resume_equals_the_whole_run": 22,
    "test_qr_dqn.py::test_cli_preset_run_then_evaluate_and_render": 27,
    "test_qr_dqn.py::test_resume_equals_the_whole_run": 21,
    "test_ddpg.py::test_cli_smoke_run_then_evaluate_and_render": 40,
    "test_sac_discrete.py::test_cli_smoke_run_sampled_then_evaluate_and_render": 25,
    "test_sac_discrete.py::test_resume_equals_the_whole_run": 20,
    "test_sac_discrete.py::test_sac_discrete_cartpole_nears_reference_return": 60,
    "test_sac_discrete.py::test_every_leaf_is_an_array_and_metrics_have_their_shape": 6,
    "test_fast_td3.py::test_fast_td3_swings_up_the_playground_cartpole": 450,
    "test_physics.py::test_the_speed_benchmark_runs_and_writes_its_table": 105,
    "test_minatar.py::test_ppo_learns_breakout_minatar": 100,
    "test_craftax.py::test_the_speed_benchmark_runs_and_counts_the_ended_episodes": 95,
    "test_atari.py::test_ppo_atari_trains_repeats_its_numbers_and_evaluates": 90,
    "test_data_parallel.py::test_one_seed_split_over_devices_equals_one_device[4-2-ppo_rnn,sac": 80,
    "test_host.py::test_mujoco_halfcheetah_repeats_its_numbers_and_draws_offscreen": 75,
    "test_craftax.py::test_refill_gives_a_new_spare_to_the_envs_that_used_theirs_and_only_to_t": 65,
    "test_robustness.py::test_a_signal_checkpoints_the_interval_and_resume_equals_the_whole_ru": 65,
    "test_host.py::test_a_stopped_host_run_resumes_with_new_episodes_and_continues_the_metrics": 60,
    "test_cli.py::test_two_processes_started_together_never_share_a_run_directory": 55,
    "test_fast_td3.py::test_cli_runs_on_brax_where_episodes_terminate": 55,
    "test_run_management.py::test_train_longer_equals_a_run_started_with_the_larger_budget": 55,
    "test_minatar.py::test_cnn_variant_runs_vmapped_equal_to_single_runs[ppo]": 50,
    "test_robustness.py::test_a_diverged_sweep_point_is_named_and_the_others_are_untouched": 50,
    "test_robustness.py::test_a_second_signal_exits_at_once_and_keeps_the_previous_checkpoint": 50,
    "test_run_management.py::test_sweep_compiles_once_and_each_point_equals_a_plain_run": 50,
    "test_readme.py::test_readme_python_snippet_runs": 50,
    "test_readme.py::test_readme_commands_run[block1-part2]": 50,
    "test_learning.py::test_ppo_cartpole_reaches_reference_return": 40,
    "test_fork.py::test_a_fork_inside_the_repository_trains_resumes_evaluates": 40,
    "test_readme.py::test_readme_commands_run[block2-part0]": 40,
    "test_sac.py::test_cli_smoke_run_then_evaluate_and_render": 40,
    "test_invariants.py::test_vmapped_seed_equals_single_run": 35,
    "test_minatar.py::test_cli_minatar_preset_records_its_settings_and_renders": 35,
    "test_host.py::test_ppo_runs_vmapped_seeds_and_the_same_seed_gives_the_same_numbers": 35,
    "test_ppo_rnn.py::test_vmapped_seed_equals_single_run_and_seeds_differ": 35,
    "test_craftax.py::test_a_time_limit_is_a_truncation_and_the_episode_goes_on_in_the_spare_w": 35,
    "test_ppo_continuous.py::test_vmapped_seed_equals_single_run_and_seeds_differ": 35,
    "test_fork.py::test_a_fork_in_a_project_with_its_own_common_package": 30,
    "test_ppo_continuous.py::test_cli_smoke_run_then_evaluate_and_render": 30,
    "test_robustness.py::test_debug_runs_eagerly_with_concrete_values_and_names_a_nan": 30,
    # 2026-12-03, one worker beside a Craftax returns row (2 busy cores)
    "test_jumanji.py::test_frontier_files_keep_to_knapsacks_masks[ppo_trxl]": 60,
    "test_jumanji.py::test_frontier_files_keep_to_knapsacks_masks[ppo_rnd]": 40,
    # The default tier's tests of 4 s or more, setup included (a module fixture's compile counts
    # to the first test that reads it): 2026-12-07, the whole tier at level 0 with both workers
    # beside a benchmark that held a core (tests/README.md's per-file table)
    "test_ppo_rnd.py::test_the_intrinsic_return_runs_on_across_episode_ends": 23,
    "test_run_management.py::test_resume_equals_uninterrupted_run": 23,
    "test_ppo_rnd.py::test_intrinsic_rewards_match_a_loop_that_never_resets[raw]": 18,
    "test_invariants.py::test_every_state_leaf_is_an_array": 14,
    "test_ppo_rnn.py::test_every_state_leaf_is_an_array": 11,
    "test_ppo_continuous.py::test_every_state_leaf_is_an_array": 10,
    "test_robustness.py::test_a_run_checkpoints_by_run_time": 10,
    "test_robustness.py::test_stop_on_divergence_stops_at_the_first_and_checkpoints": 9,
    "test_ppo_trxl.py::test_chunked_replay_reproduces_the_rollout[4]": 9,
    "test_robustness.py::test_callbacks_see_every_interval_and_can_stop_the_run": 8,
    "test_pqn_rnn.py::test_every_state_leaf_is_an_array": 8,
    "test_fast_td3.py::test_every_leaf_is_an_array_and_metrics_have_their_shape": 8,
    "test_pqn_rnn.py::test_the_empty_first_window_weighs_nothing": 7,
    "test_envs.py::test_gymnaxs_plotting_modules_are_imported_only_when_used": 7,
    "test_ppo_continuous.py::test_time_limit_bootstraps_and_rewards_scale_by_return_std": 7,
    "test_sac.py::test_every_leaf_is_an_array_and_metrics_have_their_shape": 7,
    "test_ppo_trxl.py::test_a_step_sees_its_episode_within_the_window_and_nothing_else": 7,
    "test_masking.py::test_no_algorithm_takes_a_masked_action_though_it_pays_most[ppo]": 6,
    "test_probes.py::test_action_dependent_reward": 6,
    "test_pqn_rnn.py::test_the_window_replays_to_the_memory_the_rollout_ended_with": 6,
    "test_robustness.py::test_a_callback_that_raises_leaves_the_checkpoints_written_so_far_wh": 5,
    "test_pqn.py::test_every_leaf_is_an_array_and_metrics_have_their_shape": 5,
    "test_td3.py::test_every_leaf_is_an_array_and_metrics_have_their_shape": 5,
    "test_masking.py::test_without_the_mask_ppo_learns_the_forbidden_action": 5,
    "test_envs.py::test_help_names_every_env_family": 5,
    "test_pqn_rnn.py::test_sequence_loss_matches_a_loop[no mask]": 4,
    "test_eval_policy.py::test_a_discrete_sampled_policy_draws_from_the_softmax_greedy_takes_": 4,
    "test_dqn.py::test_every_leaf_is_an_array_and_metrics_have_their_shape": 4,
    "test_eval_policy.py::test_a_sampled_evaluation_plays_like_a_random_policy_before_trainin": 4,
    "test_config.py::test_cli_refuses_out_of_range_before_compiling": 4,
    "test_envs.py::test_importing_canter_leaves_jax_untouched": 4,
    "test_pqn.py::test_probe_time_limit_is_not_a_termination": 4,
    "test_robustness.py::test_a_discarded_interval_that_fails_loses_nothing": 4,
}


def estimate(item: pytest.Item) -> float:
    name = item.nodeid.removeprefix("tests/")
    known = [s for prefix, s in ESTIMATES.items() if name.startswith(prefix)]
    if known:
        return known[0]
    marks = {m.name for m in item.iter_markers()}
    return 100 if marks & {"learning", "learning_extra"} else 20 if "slow" in marks else 2


@pytest.hookimpl(trylast=True)  # after `-m` and `-k` deselect: the costs are of what runs
def pytest_collection_modifyitems(config, items):
    cost: dict[str, float] = {}
    for item in items:
        cost[item.nodeid.split("::")[0]] = cost.get(item.nodeid.split("::")[0], 0) + estimate(item)
    # sorted() is stable: a file's tests keep their order.
    items.sort(key=lambda item: -cost[item.nodeid.split("::")[0]])
