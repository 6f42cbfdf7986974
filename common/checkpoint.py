"""Atomic save and load of a whole (vmapped) train state with Equinox serialisation (no pickle).

A checkpoint file is: a magic line, the length of a JSON header, the header (what was saved,
by which algorithm and config, how far the run got, the leaf signature and a SHA-256 of the
payload), then the leaves as written by `eqx.tree_serialise_leaves`. PRNG keys are stored as
their raw key data and re-wrapped on load.
"""

import hashlib
import io
import json
import os
import tempfile
from pathlib import Path
from typing import Any

import equinox as eqx
import jax

from common.config import ConfigError

MAGIC = b"canter-checkpoint-v1\n"


class CheckpointError(ConfigError):
    """A checkpoint that cannot be resumed: missing, corrupted, truncated or mismatched."""


def _is_key(leaf: Any) -> bool:
    return jax.dtypes.issubdtype(leaf.dtype, jax.dtypes.prng_key)


def _unkey(tree: Any) -> Any:
    """Replace typed PRNG keys by their key data (shape-only leaves are handled too)."""
    return jax.tree.map(lambda x: jax.eval_shape(jax.random.key_data, x) if _is_key(x) else x, tree)


def signature(tree: Any) -> list[str]:
    """One 'path shape dtype' line per leaf: what a checkpoint must match to be loaded."""
    leaves = jax.tree_util.tree_leaves_with_path(tree)
    return [f"{jax.tree_util.keystr(p)} {tuple(x.shape)} {x.dtype}" for p, x in leaves]


def snapshot(tree: Any) -> Any:
    """A host (NumPy) copy of `tree` with keys as key data: safe to write while training goes on."""
    return jax.device_get(jax.tree.map(lambda x: jax.random.key_data(x) if _is_key(x) else x, tree))


def save(path: Path, tree: Any, header: dict[str, Any]) -> None:
    """Write `tree` and `header` to `path` atomically: temp file, fsync, rename, fsync dir.

    `tree` may be a `snapshot` (the host runner writes snapshots from a background thread).
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
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(MAGIC + len(head).to_bytes(8, "little") + head + payload)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


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
    wanted = signature(_unkey(like))
    saved_signature = header["signature"]
    if wanted != saved_signature:
        pairs = zip(saved_signature, wanted, strict=False)
        first = next(((s, w) for s, w in pairs if s != w), (len(saved_signature), len(wanted)))
        raise CheckpointError(
            f"The checkpoint at {path} holds differently shaped state (saved '{first[0]}', "
            f"expected '{first[1]}')."
        )
    try:
        data = eqx.tree_deserialise_leaves(io.BytesIO(payload), _unkey(like))
    except Exception as error:  # equinox raises several types on damaged payloads
        raise CheckpointError(f"{path} could not be read: {error}.") from None
    # Keys come from jax.random.key, so they use the default implementation.
    tree = jax.tree.map(lambda d, x: jax.random.wrap_key_data(d) if _is_key(x) else d, data, like)
    return tree, header
