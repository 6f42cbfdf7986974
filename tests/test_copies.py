"""Every `# Copied from <file>::<name>` block is identical to its source (STYLE.md, "Copies").

The marker sits on the line directly above a top-level `def` or `class`; a fork that changes a
copy deletes the marker.
"""

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MARKER = re.compile(r"^# Copied from (?P<path>[\w/.]+\.py)::(?P<name>\w+)\s*$")


def top_level_source(path: Path, name: str) -> str | None:
    text = path.read_text()
    for node in ast.parse(text).body:
        if isinstance(node, ast.FunctionDef | ast.ClassDef) and node.name == name:
            return ast.get_source_segment(text, node)
    return None


def copy_problems(root: Path) -> tuple[int, list[str]]:
    """The number of markers under `root/algorithms` and what is wrong with them."""
    count, problems = 0, []
    for path in sorted(root.glob("algorithms/*.py")):
        lines = path.read_text().splitlines()
        for number, line in enumerate(lines, start=1):
            if not (match := MARKER.match(line)):
                continue
            count += 1
            where, name = f"{path.name}:{number}", match["name"]
            if number == len(lines) or not re.match(rf"(def|class) {name}\b", lines[number]):
                problems.append(f"{where}: the marker must sit directly above `def {name}`")
                continue
            original = top_level_source(root / match["path"], name)
            if original is None:
                problems.append(f"{where}: {match['path']} defines no top-level {name}")
            elif top_level_source(path, name) != original:
                problems.append(f"{where}: {name} differs from {match['path']}::{name}")
    return count, problems


def test_every_marked_copy_matches_its_source():
    _, problems = copy_problems(ROOT)
    assert not problems, "\n".join(problems)


def test_the_check_catches_a_changed_copy(tmp_path):
    (tmp_path / "algorithms").mkdir()
    source = "def gae(x):\n    return x + 1\n"
    (tmp_path / "algorithms" / "a.py").write_text(source)
    marker = "# Copied from algorithms/a.py::gae\n"
    (tmp_path / "algorithms" / "b.py").write_text(marker + source)
    assert copy_problems(tmp_path) == (1, [])
    (tmp_path / "algorithms" / "b.py").write_text(marker + source.replace("+ 1", "+ 2"))
    count, problems = copy_problems(tmp_path)
    assert count == 1 and "differs" in problems[0]
    (tmp_path / "algorithms" / "b.py").write_text(marker + "\n" + source)
    assert "directly above" in copy_problems(tmp_path)[1][0]
