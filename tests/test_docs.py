"""The documentation: every public name has a docstring, the entry points list the options, and
``docs/build.py`` (what ``make docs`` runs) builds the static site (skipped without pdoc)."""

from __future__ import annotations

import dataclasses
import importlib.util
import inspect
import pathlib

import pytest

import jointgraph
from jointgraph.options import CompileOptions

ROOT = pathlib.Path(__file__).resolve().parent.parent


def test_every_public_name_is_documented():
    for name in jointgraph.__all__:
        obj = getattr(jointgraph, name)
        if name == "__version__":
            continue
        assert inspect.getdoc(obj), f"jointgraph.{name} has no docstring"


@pytest.mark.parametrize("entry", [jointgraph.aot_function, jointgraph.aot_module, jointgraph.backend])
def test_entry_points_list_every_option(entry):
    doc = inspect.getdoc(entry)
    for field in dataclasses.fields(CompileOptions):
        assert f"``{field.name}``" in doc, (entry.__name__, field.name)


def test_py_typed_is_shipped():
    assert (ROOT / "jointgraph" / "py.typed").exists()
    assert 'jointgraph = ["py.typed"]' in (ROOT / "pyproject.toml").read_text()


@pytest.mark.skipif(importlib.util.find_spec("pdoc") is None, reason="pdoc not installed (pip install -e .[docs])")
def test_docs_build(tmp_path):
    spec = importlib.util.spec_from_file_location("docs_build", ROOT / "docs" / "build.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    index = module.build(tmp_path / "site")
    assert index.exists()
    api = (tmp_path / "site" / "jointgraph.html").read_text(encoding="utf-8")
    for name in ("aot_function", "aot_module", "backend", "plan", "plans", "pareto", "Plan", "UnsupportedError"):
        assert f'id="{name}"' in api, name
    guide = (tmp_path / "site" / "guide.html").read_text(encoding="utf-8")
    assert "Choosing a partitioner and a budget" in guide and "<table>" in guide
    assert (tmp_path / "site" / "semantics.html").exists()
    assert (tmp_path / "site" / "jointgraph" / "hooks.html").exists()
