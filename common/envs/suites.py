"""The env suites: their names, prefixes and install lines. Constants, no code.

registry.py (what `make_env` accepts, its refusals and hints) and each suite's adapter
(host.py, craftax.py, jumanji.py, minigrid.py, physics.py, pgx.py) both read them here, so no
adapter imports the registry, and the registry names every suite without importing its adapter
or its package, which happens when one of its envs is first built (registry.py). This module
imports nothing; tests/test_envs.py keeps it that way, and keeps the adapters off the registry.
"""

HOST_PREFIX = "gymnasium:"  # `gymnasium:<id>`: any Gymnasium environment (common/envs/host.py)
# `craftax:<game>`: Craftax's symbolic games (common/envs/craftax.py, the `craftax` extra).
CRAFTAX_PREFIX = "craftax:"
CRAFTAX_GAMES = ("Craftax-Symbolic-v1", "Craftax-Classic-Symbolic-v1")
CRAFTAX_INSTALL = 'pip install -e ".[craftax]"'
# `jumanji:<Id>`: Jumanji's envs with one discrete action per step (common/envs/jumanji.py, the
# `jumanji` extra).
JUMANJI_PREFIX = "jumanji:"
JUMANJI_TASKS = (
    "Knapsack-v1",
    "Maze-v0",
    "Snake-v1",
    "PacMan-v1",
    "TSP-v1",
    "CVRP-v1",
    "Game2048-v1",
    "GraphColoring-v1",
    "SlidingTilePuzzle-v0",
)
JUMANJI_INSTALL = 'pip install -e ".[jumanji]"'
# `xminigrid:MiniGrid-<task>`: XLand-MiniGrid's MiniGrid ports (common/envs/minigrid.py, the
# `xminigrid` extra).
MINIGRID_PREFIX = "xminigrid:"
MINIGRID_TASKS = (
    "MiniGrid-BlockedUnlockPickUp",
    "MiniGrid-DoorKey-5x5",
    "MiniGrid-DoorKey-6x6",
    "MiniGrid-DoorKey-8x8",
    "MiniGrid-DoorKey-16x16",
    "MiniGrid-Empty-5x5",
    "MiniGrid-Empty-6x6",
    "MiniGrid-Empty-8x8",
    "MiniGrid-Empty-16x16",
    "MiniGrid-EmptyRandom-5x5",
    "MiniGrid-EmptyRandom-6x6",
    "MiniGrid-EmptyRandom-8x8",
    "MiniGrid-EmptyRandom-16x16",
    "MiniGrid-FourRooms",
    "MiniGrid-LockedRoom",
    "MiniGrid-MemoryS8",
    "MiniGrid-MemoryS16",
    "MiniGrid-MemoryS32",
    "MiniGrid-MemoryS64",
    "MiniGrid-MemoryS128",
    "MiniGrid-Playground",
    "MiniGrid-Unlock",
    "MiniGrid-UnlockPickUp",
)
MINIGRID_INSTALL = 'pip install -e ".[xminigrid]"'
# `playground:<Task>`: MuJoCo Playground's DM Control Suite on MJX (common/envs/physics.py, the
# `playground` extra).
PLAYGROUND_PREFIX = "playground:"
PLAYGROUND_TASKS = (
    "AcrobotSwingup",
    "AcrobotSwingupSparse",
    "BallInCup",
    "CartpoleBalance",
    "CartpoleBalanceSparse",
    "CartpoleSwingup",
    "CartpoleSwingupSparse",
    "CheetahRun",
    "FingerSpin",
    "FingerTurnEasy",
    "FingerTurnHard",
    "FishSwim",
    "HopperHop",
    "HopperStand",
    "HumanoidRun",
    "HumanoidStand",
    "HumanoidWalk",
    "PendulumSwingup",
    "PointMass",
    "ReacherEasy",
    "ReacherHard",
    "SwimmerSwimmer6",
    "WalkerRun",
    "WalkerStand",
    "WalkerWalk",
)
PLAYGROUND_INSTALL = 'pip install -e ".[playground]"'
# `brax:<name>`: Brax's envs on its positional backend (common/envs/physics.py, the `brax` extra).
BRAX_PREFIX = "brax:"
BRAX_ENVS = (
    "ant",
    "halfcheetah",
    "hopper",
    "humanoid",
    "humanoidstandup",
    "inverted_pendulum",
    "inverted_double_pendulum",
    "pusher",
    "reacher",
    "walker2d",
)
BRAX_INSTALL = 'pip install -e ".[brax]"'

# `pgx:<game>[-vs-<opponent>]`: pgx's two-player board games from one player's side against a
# fixed opponent (common/envs/pgx.py, the `pgx` extra).
PGX_PREFIX = "pgx:"
PGX_GAMES = (
    "tic_tac_toe",
    "connect_four",
    "hex",
    "othello",
    "animal_shogi",
    "gardner_chess",
    "go_9x9",
    "go_19x19",
    "chess",
    "shogi",
)
PGX_INSTALL = 'pip install -e ".[pgx]"'

# `jaxmarl:<MPE env>`, `jaxmarl:smax:<map>`, `jaxmarl:overcooked:<layout>`: JaxMARL's cooperative
# teams as one env with an agent axis (common/envs/jaxmarl.py, the `jaxmarl` extra), for the
# multi-agent files only. The MPE envs offered are the cooperative ones (every agent scores the
# team's task); the adversarial ones (tag, push, adversary, ...) are not a team's.
JAXMARL_PREFIX = "jaxmarl:"
JAXMARL_MPE = ("MPE_simple_spread_v3", "MPE_simple_reference_v3", "MPE_simple_speaker_listener_v4")
JAXMARL_INSTALL = 'pip install -e ".[jaxmarl]"'

# The MinAtar games (Young & Tian 2019) as gymnax names them: 10x10xC grids, sticky actions.
MINATAR_GAMES = ("Asterix", "Breakout", "Freeway", "Seaquest", "SpaceInvaders")
STICKY_ACTION_ENVS = tuple(f"{game}-MinAtar" for game in MINATAR_GAMES)
# The MuJoCo tasks every SAC / TD3 paper reports (Gymnasium v5, the `mujoco` extra).
MUJOCO_TASKS = ("HalfCheetah-v5", "Hopper-v5", "Walker2d-v5", "Ant-v5", "Humanoid-v5")
