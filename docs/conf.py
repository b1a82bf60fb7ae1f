"""Sphinx configuration of the fpirl documentation (build: ``sphinx-build -W -b html docs docs/_build/html``)."""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "src")))

import fpirl  # noqa: E402

os.environ.setdefault("TQDM_DISABLE", "1")  # no progress bars in the executed tutorials (the kernels inherit it)

project = "fpirl"
author = "the fpirl developers"
copyright = "the fpirl developers, MIT licence"
release = version = fpirl.__version__

extensions = [
    "myst_nb",  # the markdown pages (MyST) and the executed tutorials (MyST notebooks)
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.napoleon",  # numpydoc-style docstrings
    "sphinx.ext.mathjax",
]

source_suffix = {".rst": "restructuredtext", ".md": "myst-nb"}
exclude_patterns = ["_build", "jupyter_execute", "**.ipynb_checkpoints", "tutorials/data"]
root_doc = "index"

# --- markdown -------------------------------------------------------------------------------
myst_enable_extensions = ["dollarmath", "amsmath", "colon_fence"]
myst_heading_anchors = 3  # the pages link to each other's sections (formats.md#result-dataset-...)

# --- executed tutorials ----------------------------------------------------------------------
nb_execution_mode = "force"  # every build runs them: a tutorial that stops working fails the build
nb_execution_raise_on_error = True
nb_execution_timeout = 300
nb_execution_show_tb = True
nb_merge_streams = True

# --- API reference ---------------------------------------------------------------------------
templates_path = ["_templates"]
autosummary_generate = True
autosummary_imported_members = False
# objects in fpirl.__all__ are indexed under their public name only (no duplicate targets)
autosummary_context = {"fpirl_all": sorted(fpirl.__all__)}
autodoc_member_order = "bysource"
autodoc_typehints = "none"  # the numpydoc sections state the types
napoleon_google_docstring = False
napoleon_numpy_docstring = True
napoleon_use_rtype = False

html_theme = "furo"
html_title = f"fpirl {release}"
