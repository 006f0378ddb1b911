"""Build the notebooks from their sources in notebooks/src (percent format: `# %%` code, `# %% [markdown]` text),
execute them on the simulated backend with CI sizes, scrub volatile metadata and widget views, write
notebooks/*.ipynb (or into `--out DIR`; `--no-execute` writes the cells without outputs, which
tests/test_notebooks_build.py compares with the committed notebooks).

    .venv/bin/python tools/notebooks/build.py [--out DIR] [--no-execute] [NAME ...]
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import nbformat
from nbclient import NotebookClient
from nbenv import NOTEBOOK_ENV

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
KERNELSPEC = {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


def parse(source: str, name: str) -> nbformat.NotebookNode:
    """A notebook from percent-format text; cell ids are `<name>-<index>` so rebuilds give the same file."""
    nb = nbformat.v4.new_notebook(metadata={"kernelspec": KERNELSPEC, "language_info": {"name": "python"}})
    for index, chunk in enumerate(source.split("# %%")[1:]):
        header, _, body = chunk.partition("\n")
        if header.strip() == "[markdown]":
            text = "\n".join(line[2:] if line.startswith("# ") else line.lstrip("#") for line in body.splitlines())
            cell = nbformat.v4.new_markdown_cell(text.strip())
        else:
            cell = nbformat.v4.new_code_cell(body.strip())
        cell.id = f"{name.split('_')[0]}-{index:02d}"
        nb.cells.append(cell)
    return nb


def stderr_cells(nb: nbformat.NotebookNode) -> dict[str, str]:
    """Cell id -> what it wrote to stderr: a user would see a pink box there, so the build refuses it."""
    return {
        cell.id: "".join(o.text for o in cell.outputs if o.get("name") == "stderr")
        for cell in nb.cells
        if cell.cell_type == "code" and any(o.get("name") == "stderr" for o in cell.outputs)
    }


def scrub(nb: nbformat.NotebookNode) -> None:
    """Drop what changes between runs or only renders with a live kernel: widget views and state, execution
    metadata."""
    nb.metadata.pop("widgets", None)
    for cell in nb.cells:
        cell.metadata = {}
        if cell.cell_type == "code":
            cell.outputs = coalesced([o for o in cell.outputs if WIDGET_VIEW not in o.get("data", {})])


def coalesced(outputs: list) -> list:
    """Consecutive stream outputs of one stream merged into one, as nbval compares them."""
    merged = []
    for output in outputs:
        previous = merged[-1] if merged else None
        if previous and output.output_type == previous.output_type == "stream" and output.name == previous.name:
            previous.text += output.text
        else:
            merged.append(output)
    return merged


def names() -> list[str]:
    """Every notebook's name: one per source in notebooks/src."""
    return sorted(p.stem for p in (NOTEBOOKS / "src").glob("*.py"))


def build(name: str, out: Path = NOTEBOOKS, execute: bool = True) -> Path:
    """notebooks/src/<name>.py as `<out>/<name>.ipynb`, executed (in notebooks/, as Jupyter runs it) unless not."""
    nb = parse((NOTEBOOKS / "src" / f"{name}.py").read_text(), name)
    if execute:
        resources = {"metadata": {"path": str(NOTEBOOKS)}}
        NotebookClient(nb, timeout=300, kernel_name="python3", resources=resources).execute()
        noisy = stderr_cells(nb)
        if noisy:
            raise SystemExit(
                f"{name}: cells wrote to stderr (a warning box under make lab); silence known third-party "
                f"noise in devcopy_lib/lowering/noise.py or fix the cause:\n"
                + "\n".join(f"  {cell}: {text[:300]}" for cell, text in noisy.items())
            )
    scrub(nb)
    target = out / f"{name}.ipynb"
    nbformat.write(nb, target)
    return target


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="notebooks to build (default: every source in notebooks/src)")
    parser.add_argument("--out", type=Path, default=NOTEBOOKS, help="folder to write into (default: notebooks/)")
    parser.add_argument("--no-execute", action="store_true", help="write the cells without running them")
    args = parser.parse_args()
    os.environ.update(NOTEBOOK_ENV)
    for notebook in args.names or names():
        print("built", build(notebook, args.out, execute=not args.no_execute))
