"""docs/ stays in step with what it shows: every generated table equals the results file it is
rendered from (benchmarks/render_docs.py), every table the benchmark scripts wrote is shown in
some doc, and every relative link in README.md and docs/ leads somewhere."""

import re
from pathlib import Path

from benchmarks import render_docs


def test_docs_tables_are_the_benchmark_outputs(repo_root):
    shown = set()
    for doc in render_docs.docs(repo_root):
        text = doc.read_text()
        stale = render_docs.render(text, repo_root) != text
        assert not stale, f"{doc.name} is out of step: run python benchmarks/render_docs.py"
        shown.update(render_docs.sources(text))
    results = (repo_root / "benchmarks" / "results").rglob("*.md")
    written = {p.relative_to(repo_root).as_posix() for p in results if render_docs.tables(p)}
    assert not written - shown, f"results no doc shows: {sorted(written - shown)}"
    assert shown <= written, f"docs show results that do not exist: {sorted(shown - written)}"


def test_render_replaces_only_the_marked_block(tmp_path):
    results = tmp_path / "benchmarks" / "results"
    results.mkdir(parents=True)
    (results / "a.md").write_text("| x |\n|---|\n| 1 |\n\nMachine: cpu.\n\n| y |\n|---|\n")
    doc = (
        "Before.\n\n<!-- table: benchmarks/results/a.md -->\n| old |\n<!-- end table -->\nAfter.\n"
    )
    new = render_docs.render(doc, tmp_path)
    table = "| x |\n|---|\n| 1 |\n\n| y |\n|---|"
    assert new == doc.replace("| old |\n", f"\n{table}\n\n")
    assert render_docs.render(new, tmp_path) == new
    assert render_docs.sources(new) == ["benchmarks/results/a.md"]


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def prose(path: Path) -> str:
    """A Markdown file without its fenced code blocks."""
    return re.sub(r"^```.*?^```", "", path.read_text(), flags=re.DOTALL | re.MULTILINE)


def test_relative_links_resolve(repo_root):
    pages = [repo_root / "README.md", *render_docs.docs(repo_root)]
    broken = []
    for page in pages:
        for target in re.findall(r"\]\(([^)\s]+)\)", prose(page)):
            if re.match(r"[a-z]+:", target):
                continue
            path, _, anchor = target.partition("#")
            goal = (page.parent / path).resolve() if path else page
            if not goal.exists():
                broken.append(f"{page.name}: {target} (no such file)")
            elif anchor and goal.suffix == ".md":
                headings = re.findall(r"^#+ (.+)$", prose(goal), re.MULTILINE)
                if anchor not in {slug(h) for h in headings}:
                    broken.append(f"{page.name}: {target} (no such heading)")
    assert not broken, "\n".join(broken)


def test_every_maintained_algorithm_has_a_section_with_its_flags_and_presets(repo_root):
    """docs/algorithms.md: a section per maintained algorithm file, whose generated flag table
    has one row per Config field (what `--help` lists) and whose preset list is its PRESETS."""
    import dataclasses
    import importlib

    from canter.algorithms import HOUSE

    # The blocks' contents are checked against their files by the first test of this module.
    page = (repo_root / "docs" / "algorithms.md").read_text()
    for name in HOUSE:
        assert f"\n## {name}\n" in page, name
        for kind in ("flags", "presets"):
            assert f"<!-- {kind}: algorithms/{name}.py -->" in page, (name, kind)
        table = render_docs.flags(repo_root / "algorithms" / f"{name}.py")
        config = importlib.import_module(f"canter.algorithms.{name}").Config
        flags = [line.split("`")[1] for line in table.splitlines()[2:]]
        assert flags == [f"--{f.name.replace('_', '-')}" for f in dataclasses.fields(config)]


def test_the_pages_embed_every_figure_drawn_from_the_runs_it_shows(repo_root):
    """benchmarks/returns/figures.py's figures: each PNG holds the digest of the data it plots
    now and each table beside it the rows (`figures.stale` reads both without drawing), and the
    pages embed exactly the figures it makes."""
    from benchmarks.returns import figures

    results = repo_root / "benchmarks" / "results"
    wrong = figures.stale(results)
    assert not wrong, f"{wrong}: run python benchmarks/returns/figures.py"
    made = {p.relative_to(repo_root) for p in (results / "figures").glob("*.png")}
    embedded = set()
    for page in [repo_root / "README.md", *render_docs.docs(repo_root)]:
        for target in re.findall(r"!\[[^]]*\]\(([^)\s]+)\)", prose(page)):
            path = (page.parent / target).resolve().relative_to(repo_root)
            if path.parent == Path("benchmarks", "results", "figures"):
                embedded.add(path)
    assert embedded == made, (sorted(made - embedded), sorted(embedded - made))


def test_a_figure_drawn_from_other_runs_is_stale(tmp_path):
    """The partner of the check above: a figure drawn from a run is in step with it, then stale
    once a seed's return changes, and a figure no longer made is named too."""
    import json

    from benchmarks.returns import figures, returns

    seed = tmp_path / "returns" / "runs" / "ppo__CartPole-v1" / "seed_0"
    seed.mkdir(parents=True)
    (seed.parent / "config.json").write_text(json.dumps({"env": "CartPole-v1", "num_eval_envs": 2}))
    metrics = "env_steps,eval/episodic_return,train/episodic_return\n100,10.0,9.0\n200,20.0,19.0\n"
    (seed / "metrics.csv").write_text(metrics)
    record = dict(algo="ppo", env="CartPole-v1", num_seeds=1, env_steps=200, overrides={})
    record |= dict(mean=20.0, std=0.0, final_train_return_mean=19.0, run_s=5.0)
    record |= dict(train_statistic=returns.TRAIN_STATISTIC, machine="2 CPU cores (x86_64)")
    (tmp_path / "returns" / "ppo__CartPole-v1.json").write_text(json.dumps(record))
    assert "classic.png: missing" in figures.stale(tmp_path)
    assert figures.main([], results=tmp_path) == 0
    assert figures.stale(tmp_path) == []
    row = (tmp_path / "figures" / "ppo.md").read_text().splitlines()[-1]
    assert row.startswith("| CartPole-v1 | defaults | 200 | 1 | greedy, 2 episodes | 20.0 +- 0.0 |")
    (seed / "metrics.csv").write_text(metrics.replace("20.0", "21.0"))
    (tmp_path / "figures" / "old.png").write_bytes(b"")
    stale = ["classic.png: drawn from other data", "ppo.png: drawn from other data"]
    assert figures.stale(tmp_path) == [*stale, "old.png: no longer made"]
