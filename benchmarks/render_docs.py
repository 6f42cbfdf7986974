"""Copy the tables the benchmark scripts wrote into the docs that show them.

A doc marks each generated table with the file it comes from:

    <!-- table: benchmarks/results/speed.md -->

    (the table lines of that file; rewritten by this script)

    <!-- end table -->

and this script replaces what stands between the two markers in every docs/**/*.md with the
table lines of that file, a blank line on either side (several tables in one file keep a blank
line between them). Text around the markers is never touched. tests/test_docs.py checks that
every block is up to date and that every table under benchmarks/results/ is shown in some doc.

Two more kinds of block are taken from an algorithm file, so that docs/algorithms.md shows what
`--help` shows without a copy to keep in step:

    <!-- flags: algorithms/ppo.py -->     the Config's fields: flag, default, docstring
    <!-- presets: algorithms/ppo.py -->   the names `--preset` takes

    python benchmarks/render_docs.py           # rewrite the docs in place
    python benchmarks/render_docs.py --check   # exit 1, naming the docs out of step
"""

import argparse
import ast
import importlib
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BLOCK = re.compile(r"(<!-- table: (\S+) -->\n)(.*?)(<!-- end table -->)", re.DOTALL)
FILE_BLOCK = re.compile(r"(<!-- (flags|presets): (\S+) -->\n)(.*?)(<!-- end \2 -->)", re.DOTALL)


def tables(source: Path) -> str:
    """The table lines of a results file, one blank line between separate tables."""
    groups, current = [], []
    for line in source.read_text().splitlines():
        if line.startswith("|"):
            current.append(line)
        elif current:
            groups.append(current)
            current = []
    if current:
        groups.append(current)
    return "\n\n".join("\n".join(group) for group in groups)


def flags(source: Path) -> str:
    """The fields of an algorithm file's `Config` as a table of flags, read from its source (the
    attribute docstrings tyro shows in `--help`; defaults as written)."""
    text = source.read_text()
    (config,) = [n for n in ast.parse(text).body if getattr(n, "name", None) == "Config"]
    rows = ["| flag | default | what it sets |", "|---|---|---|"]
    for node, after in zip(config.body, config.body[1:] + [None], strict=True):
        if not isinstance(node, ast.AnnAssign):
            continue
        name = node.target.id.replace("_", "-")
        doc = after.value.value if isinstance(after, ast.Expr) else ""
        doc = " ".join(doc.split()).replace("|", "\\|")
        if isinstance(node.annotation, ast.Subscript) and ast.unparse(node.annotation.value) in (
            "Literal",
            "typing.Literal",
        ):
            values = node.annotation.slice
            choices = [e.value for e in getattr(values, "elts", [values])]
            doc += f" Choices: {', '.join(map(str, choices))}."
        flag = f"`--{name}`"
        if ast.unparse(node.annotation) == "bool":
            flag += f", `--no-{name}`"
        default = ast.get_source_segment(text, node.value).replace("|", "\\|")
        rows.append(f"| {flag} | `{default}` | {doc} |")
    return "\n".join(rows)


def presets(source: Path) -> str:
    """The names an algorithm file's `--preset` takes, in its order (from the installed
    `canter.algorithms` module of that name)."""
    module = importlib.import_module(f"canter.algorithms.{source.stem}")
    names = list(getattr(module, "PRESETS", {}))
    return ", ".join(f"`{name}`" for name in names) if names else "none"


def render(text: str, root: Path = ROOT) -> str:
    """`text` with every marked block replaced by its source's tables, flags or presets."""
    text = BLOCK.sub(lambda m: f"{m[1]}\n{tables(root / m[2])}\n\n{m[4]}", text)
    kinds = {"flags": flags, "presets": presets}
    return FILE_BLOCK.sub(lambda m: f"{m[1]}\n{kinds[m[2]](root / m[3])}\n\n{m[5]}", text)


def sources(text: str) -> list[str]:
    """The result files a doc's blocks are taken from, repository-relative."""
    return [m[2] for m in BLOCK.finditer(text)]


def docs(root: Path = ROOT) -> list[Path]:
    return sorted((root / "docs").rglob("*.md"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 if stale")
    args = parser.parse_args(argv)
    stale = []
    for doc in docs():
        text = doc.read_text()
        new = render(text)
        if new != text:
            stale.append(doc.relative_to(ROOT))
            if not args.check:
                doc.write_text(new)
    verb = "out of step" if args.check else "rewritten"
    for doc in stale:
        print(f"{doc}: {verb}")
    return 1 if args.check and stale else 0


if __name__ == "__main__":
    sys.exit(main())
