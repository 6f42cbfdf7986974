"""Atomic save and load of a whole (vmapped) train state with Equinox serialisation (no pickle).

A checkpoint file is: a magic line, the length of a JSON header, the header (what was saved,
by which algorithm and config, how far the run got, the leaf signature and a SHA-256 of the
payload), then the leaves as written by `eqx.tree_serialise_leaves`. PRNG keys are stored as
their raw key data and re-wrapped on load.
"""

import concurrent.futures
import hashlib
import io
import json
from pathlib import Path
from typing import Any

import equinox as eqx
import jax
from canter.common.config import ConfigError
from canter.common.run import keys
from canter.common.run.files import atomic_write

MAGIC = b"canter-checkpoint-v1\n"


class CheckpointError(ConfigError):
    """A checkpoint that cannot be resumed: missing, corrupted, truncated or mismatched."""


def signature(tree: Any) -> list[str]:
    """One 'path shape dtype' line per leaf: what a checkpoint must match to be loaded."""
    leaves = jax.tree_util.tree_leaves_with_path(tree)
    return [f"{jax.tree_util.keystr(p)} {tuple(x.shape)} {x.dtype}" for p, x in leaves]


def snapshot(tree: Any) -> Any:
    """A host (NumPy) copy of `tree` with keys as key data: safe to write while training goes on."""
    return jax.device_get(keys.to_data(tree))


def save(path: Path, tree: Any, header: dict[str, Any]) -> None:
    """Write `tree` and `header` to `path` atomically (common/run/files.py).

    `tree` may be a `snapshot` (the runner writes snapshots from a background thread).
    """
    data = snapshot(tree)
    payload = io.BytesIO()
    eqx.tree_serialise_leaves(payload, data)
    payload = payload.getvalue()
    header = {
        **header,
        "signature": signature(data),
        "sha256": hashlib.sha256(payload).hexdigest(),
    }
    head = json.dumps(header).encode()
    atomic_write(path, MAGIC + len(head).to_bytes(8, "little") + head + payload)


class Writer:
    """Writes checkpoints on one background thread, in order, while training goes on.

    Serialising and fsyncing (~5 ms of host work per checkpoint) overlap the next interval;
    `submit` waits for the previous write first, and `close` for the last.
    """

    def __init__(self) -> None:
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=1)
        self._pending: concurrent.futures.Future | None = None

    def submit(self, path: Path, tree: Any, header: dict[str, Any]) -> None:
        self.wait()
        self._pending = self._pool.submit(save, path, snapshot(tree), header)

    def wait(self) -> None:
        if self._pending is not None:
            self._pending.result()
            self._pending = None

    def close(self) -> None:
        self.wait()
        self._pool.shutdown()


def read_header(path: Path) -> tuple[dict[str, Any], bytes]:
    """The header and the verified payload of a checkpoint; raises CheckpointError if damaged."""
    if not path.is_file():
        raise CheckpointError(f"No checkpoint at {path}.")
    blob = path.read_bytes()
    if not blob.startswith(MAGIC) or len(blob) < len(MAGIC) + 8:
        raise CheckpointError(f"{path} is not a canter checkpoint (or is truncated).")
    size = int.from_bytes(blob[len(MAGIC) : len(MAGIC) + 8], "little")
    start = len(MAGIC) + 8
    try:
        header = json.loads(blob[start : start + size])
    except ValueError:
        raise CheckpointError(f"{path} has a damaged header (truncated or corrupted).") from None
    payload = blob[start + size :]
    if hashlib.sha256(payload).hexdigest() != header.get("sha256"):
        raise CheckpointError(f"{path} is truncated or corrupted (its checksum does not match).")
    return header, payload


def load(path: Path, like: Any, expect: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    """Load the tree saved at `path` into the structure of `like` (arrays or shapes).

    Every key of `expect` (algorithm, env, config...) must equal the saved header's; so must
    the leaf signature. A mismatch names what differs. Nothing on disk is changed.
    """
    header, payload = read_header(path)
    for name, value in expect.items():
        saved = header.get(name)
        if saved == value:
            continue
        if isinstance(value, dict) and isinstance(saved, dict):
            fields = sorted(k for k in value.keys() | saved.keys() if value.get(k) != saved.get(k))
            diffs = ", ".join(f"{k}: saved {saved.get(k)!r}, now {value.get(k)!r}" for k in fields)
            raise CheckpointError(f"The checkpoint at {path} has a different {name}: {diffs}.")
        raise CheckpointError(
            f"The checkpoint at {path} has a different {name}: saved {saved!r}, now {value!r}."
        )
    wanted = signature(keys.to_data(like))
    saved_signature = header["signature"]
    if wanted != saved_signature:
        pairs = zip(saved_signature, wanted, strict=False)
        first = next(((s, w) for s, w in pairs if s != w), (len(saved_signature), len(wanted)))
        raise CheckpointError(
            f"The checkpoint at {path} holds differently shaped state (saved '{first[0]}', "
            f"expected '{first[1]}')."
        )
    try:
        data = eqx.tree_deserialise_leaves(io.BytesIO(payload), keys.to_data(like))
    except Exception as error:  # equinox raises several types on damaged payloads
        raise CheckpointError(f"{path} could not be read: {error}.") from None
    return keys.from_data(data, like), header
