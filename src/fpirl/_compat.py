"""Old import paths: the flat modules of fpirl before the subpackages.

``import fpirl.hermite`` (and ``from fpirl.identify import PotentialEstimator``, ...) keep
working: a finder on ``sys.meta_path`` answers each old dotted name with the module at its new
place, imported on first use (so ``import fpirl`` stays light). The module object is the same,
so monkeypatching through either name patches both.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys

#: old module path -> new module path
MOVED = {
    "fpirl._bands": "fpirl.uncertainty._bands",
    "fpirl._bootstrap": "fpirl.uncertainty._bootstrap",
    "fpirl._errors": "fpirl.core._errors",
    "fpirl._files": "fpirl.io._files",
    "fpirl._fitted": "fpirl.mdp._fitted",
    "fpirl._krylov": "fpirl.weakform._krylov",
    "fpirl._linalg": "fpirl.core._linalg",
    "fpirl._nodal": "fpirl.core.validation",
    "fpirl._progress": "fpirl.core._progress",
    "fpirl._reference": "fpirl.weakform._reference",
    "fpirl._resolution": "fpirl.uncertainty._resolution",
    "fpirl._separable": "fpirl.weakform._separable",
    "fpirl._snapshot_noise": "fpirl.uncertainty._snapshot_noise",
    "fpirl._table_readers": "fpirl.tracks._table_readers",
    "fpirl._tensor": "fpirl.core._tensor",
    "fpirl._transitions": "fpirl.tracks.steps",
    "fpirl._zarr": "fpirl.io._zarr",
    "fpirl.adequacy": "fpirl.evaluation.adequacy",
    "fpirl.assembly": "fpirl.weakform.assembly",
    "fpirl.baselines": "fpirl.evaluation.baselines",
    "fpirl.binning": "fpirl.tracks.binning",
    "fpirl.density": "fpirl.core.density",
    "fpirl.grid": "fpirl.core.grid",
    "fpirl.heldout": "fpirl.evaluation.heldout",
    "fpirl.hermite": "fpirl.core.hermite",
    "fpirl.identify": "fpirl.estimators.identify",
    "fpirl.matfree": "fpirl.weakform.matfree",
    "fpirl.matfree_flux": "fpirl.weakform.matfree_flux",
    "fpirl.metrics": "fpirl.evaluation.metrics",
    "fpirl.plotting_slices": "fpirl.plotting.slices",
    "fpirl.quadrature": "fpirl.core.quadrature",
    "fpirl.simulate": "fpirl.forward.markov",
    "fpirl.soft_q": "fpirl.mdp.soft_q",
    "fpirl.tracks_io": "fpirl.tracks.reading",
    "fpirl.transition": "fpirl.mdp.transition",
}


class _Alias(importlib.abc.Loader):
    def __init__(self, target: str):
        self.target = target

    def create_module(self, spec):
        module = importlib.import_module(self.target)
        self._spec = module.__spec__
        return module

    def exec_module(self, module):  # already executed under its new name
        # the import system has just set the alias spec on the shared module; keep the real one, or
        # relative imports inside it warn (ImportWarning: __package__ != __spec__.parent)
        module.__spec__ = self._spec


class _MovedFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path=None, target=None):
        new = MOVED.get(fullname)
        if new is None:
            return None
        return importlib.machinery.ModuleSpec(fullname, _Alias(new))


def install() -> None:
    """Put the finder on ``sys.meta_path`` (once)."""
    if not any(isinstance(f, _MovedFinder) for f in sys.meta_path):
        sys.meta_path.append(_MovedFinder())
