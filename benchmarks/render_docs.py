"""Copy the tables the benchmark scripts wrote into the docs that show them.

A doc marks each generated table with the file it comes from:

    <!-- table: benchmarks/results/speed.md -->

    (the table lines of that file; rewritten by this script)

    <!-- end table -->

and this script replaces what stands between the two markers in every docs/**/*.md with the
table lines of that file, a blank line on either side (several tables in one file keep a blank
line between them). Text around the markers is never touched. tests/test_docs.py checks that
every block is up to date and that every table under benchmarks/results/ is shown in some doc.

    python benchmarks/render_docs.py           # rewrite the docs in place
    python benchmarks/render_docs.py --check   # exit 1, naming the docs out of step
"""

import argparse
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BLOCK = re.compile(r"(<!-- table: (\S+) -->\n)(.*?)(<!-- end table -->)", re.DOTALL)


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


def render(text: str, root: Path = ROOT) -> str:
    """`text` with every marked block replaced by its source's tables."""
    return BLOCK.sub(lambda m: f"{m[1]}\n{tables(root / m[2])}\n\n{m[4]}", text)


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
