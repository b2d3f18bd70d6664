"""Build the static documentation site: ``make docs`` (or ``python docs/build.py [OUT]``).

The API reference is generated from the docstrings with pdoc (``pip install -e ".[docs]"``);
the user guide (docs/guide.md) and the semantics table (docs/semantics.md) are rendered with
pdoc's Markdown renderer into the same site. Output: ``build/docs/index.html``.
"""

from __future__ import annotations

import html
import pathlib
import shutil
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
# pdoc documents a package with its submodules; the index links the pages a user reads first.
MODULES = ["jointgraph"]
FIRST_READ = ["jointgraph", "jointgraph.hooks", "jointgraph.logs", "jointgraph.report", "jointgraph.units",
              "jointgraph.cli"]
PAGES = [("guide", "User guide"), ("semantics", "Semantics: what is honoured, what is refused")]

PAGE = """<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>{title} · jointgraph</title>
<style>body {{ font-family: -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; max-width: 980px;
margin: 2em auto; padding: 0 1em; color: #222; line-height: 1.5; }}
table {{ border-collapse: collapse; font-size: .9em; }} th, td {{ border: 1px solid #ddd; padding: 3px 8px;
vertical-align: top; }} pre {{ background: #f6f6f6; padding: .8em; overflow-x: auto; }}
code {{ background: #f3f3f3; padding: 0 .2em; }} nav a {{ margin-right: 1em; }}</style></head>
<body><nav><a href="index.html">home</a><a href="guide.html">user guide</a><a href="semantics.html">semantics</a>
<a href="jointgraph.html">API reference</a></nav>
{body}
</body></html>
"""


def build(out: pathlib.Path) -> pathlib.Path:
    import pdoc
    import pdoc.render
    from pdoc.render_helpers import markdown2

    sys.path.insert(0, str(ROOT))
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    pdoc.render.configure(docformat="restructuredtext", footer_text="jointgraph",
                          search=True, show_source=True)
    pdoc.pdoc(*MODULES, output_directory=out)
    for name, title in PAGES:
        text = (ROOT / "docs" / f"{name}.md").read_text(encoding="utf-8")
        body = markdown2.markdown(text, extras=["tables", "fenced-code-blocks", "header-ids", "code-friendly"])
        (out / f"{name}.html").write_text(PAGE.format(title=html.escape(title), body=body), encoding="utf-8")
    links = "".join(f"<li><a href='{n}.html'>{html.escape(t)}</a></li>" for n, t in PAGES)
    api = "".join(f"<li><a href='{m.replace('.', '/')}.html'><code>{m}</code></a></li>" for m in FIRST_READ)
    index = (f"<h1>jointgraph</h1><p>Compile PyTorch training steps ahead of time and plan their activation "
             f"memory.</p><h2>Guides</h2><ul>{links}</ul><h2>API reference</h2><ul>{api}</ul>")
    (out / "index.html").write_text(PAGE.format(title="jointgraph", body=index), encoding="utf-8")
    for extra in ("timeline.png",):
        if (ROOT / "docs" / extra).exists():
            shutil.copy(ROOT / "docs" / extra, out / extra)
    return out / "index.html"


if __name__ == "__main__":
    print(build(pathlib.Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "build" / "docs"))
