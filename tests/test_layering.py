"""The import graph follows DESIGN.md's layering: data flows one way.

Every ``import`` in ``jointgraph/`` is read with ``ast`` (module level and inside functions):
no stage imports the API layer, the IR imports no stage, the planner does not reach into
the passes, the report or the benchmarks, and the report does not depend on the benchmark
runner. A function-level (lazy) import that crosses a rule must be listed in LAZY_ALLOWED
with its reason.
"""

from __future__ import annotations

import ast
import pathlib

import pytest

PACKAGE = pathlib.Path(__file__).resolve().parent.parent / "jointgraph"

API_LAYER = {"jointgraph.api", "jointgraph.pareto", "jointgraph.planning", "jointgraph.compiled",
             "jointgraph.module", "jointgraph.dynamo", "jointgraph.cli", "jointgraph.__main__", "jointgraph"}
STAGES = ("capture", "planner", "passes", "hooks", "runtime", "report")
# (importer prefix, forbidden prefixes)
RULES = [
    *[(f"jointgraph.{stage}", tuple(sorted(API_LAYER))) for stage in STAGES],
    ("jointgraph.ir", tuple(f"jointgraph.{s}" for s in (*STAGES, "bench", "split")) + tuple(sorted(API_LAYER))),
    ("jointgraph.planner", ("jointgraph.passes", "jointgraph.report", "jointgraph.bench", "jointgraph.split")),
    ("jointgraph.report", ("jointgraph.bench",)),
]
# Lazy imports that cross a rule on purpose: (importer, imported) -> why.
LAZY_ALLOWED = {
    ("jointgraph.ir.graph", "jointgraph.report.html"): "Plan.to_html is a thin call into the report (docs/API.md)",
    ("jointgraph.ir.graph", "jointgraph.report.explain"): "Plan.explain is a thin call into the report",
}


def _module_name(path: pathlib.Path, package: pathlib.Path) -> str:
    parts = list(path.relative_to(package.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: pathlib.Path, package: pathlib.Path) -> list[tuple[str, bool]]:
    """(imported module, at module level) for every import in the file, relative ones resolved."""
    module = _module_name(path, package)
    parent = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    tree = ast.parse(path.read_text(), str(path))
    top_level = {id(node) for node in tree.body}
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(alias.name, id(node) in top_level) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            target = node.module or ""
            if node.level:
                base = parent.split(".")
                target = ".".join(base[: len(base) - (node.level - 1)] + ([node.module] if node.module else []))
            # ``from . import api`` imports the module api; ``from .x import name`` imports x.
            out += [(f"{target}.{a.name}" if _is_module(f"{target}.{a.name}", package) else target,
                     id(node) in top_level) for a in node.names]
    return out


def _is_module(name: str, package: pathlib.Path) -> bool:
    rel = pathlib.Path(*name.split(".")[1:]) if "." in name else None
    return rel is not None and ((package / rel).with_suffix(".py").exists() or (package / rel / "__init__.py").exists())


def _matches(name: str, prefix: str) -> bool:
    """``name`` is ``prefix`` or inside it (the package ``jointgraph`` itself matches only exactly)."""
    return name == prefix or (prefix != "jointgraph" and name.startswith(prefix + "."))


def _violations(package: pathlib.Path = PACKAGE) -> list[str]:
    found = []
    for path in sorted(package.rglob("*.py")):
        importer = _module_name(path, package)
        for imported, top in _imports(path, package):
            for owner, forbidden in RULES:
                if not _matches(importer, owner) or _matches(imported, owner):
                    continue
                for bad in forbidden:
                    if _matches(imported, bad) and (top or (importer, imported) not in LAZY_ALLOWED):
                        found.append(f"{importer} imports {imported}{'' if top else ' (lazily)'}: "
                                     f"{owner} must not import {bad}")
    return found


def test_layering_rules_hold():
    assert _violations() == []


def test_the_checker_sees_a_violation(tmp_path):
    """The check can fail: a planner importing the API lazily and an IR importing the report are reported."""
    fake = tmp_path / "jointgraph"
    for sub in ("planner", "ir", "report"):
        (fake / sub).mkdir(parents=True)
        (fake / sub / "__init__.py").write_text("")
    (fake / "__init__.py").write_text("")
    (fake / "api.py").write_text("")
    (fake / "report" / "html.py").write_text("")
    (fake / "planner" / "bad.py").write_text("def f():\n    from ..api import plan\n")
    (fake / "ir" / "__init__.py").write_text("from ..report import html\n")
    found = _violations(fake)
    assert any(v.startswith("jointgraph.planner.bad imports jointgraph.api (lazily)") for v in found), found
    assert any(v.startswith("jointgraph.ir imports jointgraph.report.html:") for v in found), found


@pytest.mark.parametrize("module", ["jointgraph.planner.budget", "jointgraph.ir.graph_utils"])
def test_split_modules_stay_small(module):
    """The house rule of DESIGN.md: a module past ~400 lines is split by concept."""
    path = PACKAGE.joinpath(*module.split(".")[1:]).with_suffix(".py")
    assert len(path.read_text().splitlines()) <= 400
