"""Copies cannot drift (docs/design.md, "Copies"), and the algorithm files keep the house shape.

Every `# Copied from <file>::<name>` marker sits directly above a top-level `def` or `class`
identical to its source; a fork that changes a copy deletes the marker. Any other function
(nested ones included) or class that two files in algorithms/ share word for word is an
unmarked copy, and fails: lift it to module level and mark it, or make it unique.
"""

import ast
import re
from pathlib import Path

from canter.algorithms import HOUSE

from tests.checks import algorithms_folder

ROOT = Path(__file__).resolve().parent.parent
MARKER = re.compile(r"^# Copied from (?P<path>[\w/.]+\.py)::(?P<name>\w+)\s*$")


def top_level_source(path: Path, name: str) -> str | None:
    text = path.read_text()
    for node in ast.parse(text).body:
        if isinstance(node, ast.FunctionDef | ast.ClassDef) and node.name == name:
            return ast.get_source_segment(text, node)
    return None


def algorithm_files(root: Path) -> list[Path]:
    """algorithms/*.py. Tests that read them all hold `algorithms_folder()`: a fork that
    tests/test_fork.py puts beside the house files is there for the whole of such a test."""
    return sorted(root.glob("algorithms/*.py"))


def marked_names(path: Path) -> dict[str, tuple[int, str, str]]:
    """Top-level names under a marker: name -> (line, source path, source name)."""
    lines = path.read_text().splitlines()
    marked = {}
    for number, line in enumerate(lines, start=1):
        if match := MARKER.match(line):
            below = re.match(r"(?:def|class) (\w+)", lines[number]) if number < len(lines) else None
            marked[below[1] if below else f"<line {number}>"] = (
                number,
                match["path"],
                match["name"],
            )
    return marked


def copy_problems(root: Path) -> tuple[int, list[str]]:
    """The number of markers under `root/algorithms` and what is wrong with them."""
    count, problems = 0, []
    for path in algorithm_files(root):
        for below, (number, source, name) in marked_names(path).items():
            count += 1
            where = f"{path.name}:{number}"
            if below != name:
                problems.append(f"{where}: the marker must sit directly above `def {name}`")
                continue
            original = top_level_source(root / source, name)
            if original is None:
                problems.append(f"{where}: {source} defines no top-level {name}")
            elif top_level_source(path, name) != original:
                problems.append(f"{where}: {name} differs from {source}::{name}")
    return count, problems


def house_files(root: Path) -> list[Path]:
    return [root / "algorithms" / f"{name}.py" for name in sorted(HOUSE)]


def unmarked_copies(root: Path, names: list[str] | None = None) -> list[str]:
    """Functions (at any depth) and top-level classes that two house files share word for
    word, outside marked copies (whose own nested functions come with them)."""
    seen: dict[str, list[str]] = {}
    for path in [root / "algorithms" / f"{name}.py" for name in sorted(names or HOUSE)]:
        marked = marked_names(path)
        for top in ast.parse(path.read_text()).body:
            if not isinstance(top, ast.FunctionDef | ast.ClassDef) or top.name in marked:
                continue
            units = [top] if isinstance(top, ast.ClassDef) else list(ast.walk(top))
            for node in units:
                if isinstance(node, ast.FunctionDef | ast.ClassDef):
                    seen.setdefault(ast.unparse(node), []).append(f"{path.name}::{node.name}")
    return [
        " and ".join(places)
        for places in seen.values()
        if len({place.split("::")[0] for place in places}) > 1
    ]


def test_every_marked_copy_matches_its_source():
    with algorithms_folder():
        count, problems = copy_problems(ROOT)
    assert count >= 10 and not problems, "\n".join(problems)


def test_no_unmarked_copies_between_algorithm_files():
    copies = unmarked_copies(ROOT)
    assert not copies, "unmarked copies (lift and mark, or make unique):\n" + "\n".join(copies)


def test_the_checks_catch_a_changed_copy_and_an_unmarked_nested_copy(tmp_path):
    (tmp_path / "algorithms").mkdir()
    source = "def gae(x):\n    return x + 1\n"
    (tmp_path / "algorithms" / "a.py").write_text(source)
    marker = "# Copied from algorithms/a.py::gae\n"
    (tmp_path / "algorithms" / "b.py").write_text(marker + source)
    assert copy_problems(tmp_path) == (1, []) and unmarked_copies(tmp_path, ["a", "b"]) == []
    (tmp_path / "algorithms" / "b.py").write_text(marker + source.replace("+ 1", "+ 2"))
    count, problems = copy_problems(tmp_path)
    assert count == 1 and "differs" in problems[0]
    (tmp_path / "algorithms" / "b.py").write_text(marker + "\n" + source)
    assert "directly above" in copy_problems(tmp_path)[1][0]
    nested = "def make_train(c):\n    def step(s):\n        return s * 2\n    return step\n"
    (tmp_path / "algorithms" / "a.py").write_text(nested)
    (tmp_path / "algorithms" / "b.py").write_text(nested.replace("c)", "config)"))
    assert unmarked_copies(tmp_path, ["a", "b"]) == ["a.py::step and b.py::step"]


def nesting_depth(node: ast.AST, depth: int = 0) -> int:
    children = ast.iter_child_nodes(node)
    return max(
        [depth] + [nesting_depth(c, depth + isinstance(c, ast.FunctionDef)) for c in children]
    )


def code_lines(source: str) -> int:
    """Lines of code: not blank, not a comment, not a docstring (of the module, a class, a
    function, or a dataclass field), counted as `ruff format` lays the file out."""
    docs = set()
    scopes = ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef
    for node in ast.walk(ast.parse(source)):
        for statement in node.body if isinstance(node, scopes) else []:
            if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant):
                if isinstance(statement.value.value, str):
                    docs.update(range(statement.lineno, statement.end_lineno + 1))
    return sum(
        1
        for number, line in enumerate(source.splitlines(), start=1)
        if line.strip() and not line.strip().startswith("#") and number not in docs
    )


def test_code_lines_skip_docstrings_comments_and_blanks():
    source = '"""Module."""\n\nimport os\n\n\ndef f():\n    """Doc\n    more."""\n    # why\n'
    source += '    return os.sep  # trailing\n\n\nclass C:\n    x: int = 1\n    """Field."""\n'
    assert code_lines(source) == 5


PRESETS_SECTION = "\n# --- presets\n"


def split_presets(text: str) -> tuple[str, str]:
    """(the algorithm, the presets section): a file's text before and after its
    `# --- presets` line (an empty section when it has none)."""
    algorithm, _, presets = text.partition(PRESETS_SECTION)
    return algorithm, presets


def preset_problems(presets: str) -> list[str]:
    """What a presets section holds besides tables: only assignments (a dict of settings, a
    comprehension over games or tasks, `|=`) and the `__main__` entry point, nothing callable
    defined or called but `dict`, so no algorithm code can sit outside the cap."""
    problems = []
    for statement in ast.parse(presets).body:
        main = isinstance(statement, ast.If) and "__main__" in ast.unparse(statement.test)
        if not (isinstance(statement, ast.Assign | ast.AugAssign) or main):
            problems.append(f"line {statement.lineno}: {type(statement).__name__}")
            continue
        for node in ast.walk(statement) if not main else []:
            callee = node.func if isinstance(node, ast.Call) else None
            if isinstance(node, ast.Lambda) or (
                callee is not None and ast.unparse(callee) != "dict"
            ):
                problems.append(f"line {statement.lineno}: {ast.unparse(node)[:60]}")
    return problems


def test_presets_sections_hold_tables_only():
    ok = "MINATAR = dict(\n    lr=1e-3,\n)\nPRESETS = {g: dict(MINATAR, env=g) for g in GAMES}\n"
    ok += 'PRESETS |= {"A": dict(MINATAR)}\n\nif __name__ == "__main__":\n    trainer.cli(C, m)\n'
    assert preset_problems(ok) == []
    assert split_presets("a = 1\n# --- presets\nB = 2\n") == ("a = 1", "B = 2\n")
    for code in ["def f():\n    return 1\n", "X = f(3)\n", "X = dict(f=lambda y: y)\n"]:
        assert preset_problems(ok + code), code


def test_algorithm_files_keep_the_house_shape():
    # docs/design.md: at most 300 lines of code per house file above its `# --- presets` line,
    # and at most 80 of preset tables below it, no def nested deeper than two levels, and no
    # `# fmt: skip` anywhere in algorithms/ (it packed lines under a cap once).
    for path in house_files(ROOT):
        text = path.read_text()
        algorithm, presets = split_presets(text)
        assert code_lines(algorithm) <= 300, f"{path.name}: {code_lines(algorithm)} lines of code"
        assert code_lines(presets) <= 80, f"{path.name}: {code_lines(presets)} lines of presets"
        assert preset_problems(presets) == [], path.name
        assert nesting_depth(ast.parse(text)) <= 2, path.name
    with algorithms_folder():
        for path in algorithm_files(ROOT):
            assert "fmt: skip" not in path.read_text(), path.name
