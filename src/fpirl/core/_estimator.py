"""What every fpirl estimator shares, scikit-learn style: keyword-only ``__init__`` parameters
stored as given, :meth:`~BaseEstimator.get_params` / :meth:`~BaseEstimator.set_params` (so
``type(est)(**est.get_params())`` is an unfitted copy and grid searches work), learned attributes
ending in ``_`` set only by a successful :meth:`fit`, and :class:`~fpirl.core._errors.NotFittedError`
before it."""

from __future__ import annotations

import inspect

from ._errors import FpirlInputError, NotFittedError


class BaseEstimator:
    """Parameters = the keyword-only arguments of ``__init__``, each stored under its own name."""

    @classmethod
    def _param_names(cls) -> list[str]:
        sig = inspect.signature(cls.__init__)
        return sorted(name for name, p in sig.parameters.items()
                      if name != "self" and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD))

    def get_params(self, deep: bool = True) -> dict:
        """The ``__init__`` parameters as a dict (``deep``: also ``<name>__<param>`` of parameters that
        are estimators themselves)."""
        out = {}
        for name in self._param_names():
            value = getattr(self, name)
            if deep and hasattr(value, "get_params") and not isinstance(value, type):
                out.update((f"{name}__{k}", v) for k, v in value.get_params().items())
            out[name] = value
        return out

    def set_params(self, **params) -> "BaseEstimator":
        """Set ``__init__`` parameters (``<name>__<param>`` for nested estimators); returns self.

        Raises
        ------
        FpirlInputError
            (a ValueError) for a name that is not a parameter.
        """
        valid = self._param_names()
        nested: dict[str, dict] = {}
        for key, value in params.items():
            name, sep, sub = key.partition("__")
            if name not in valid:
                raise FpirlInputError(f"{key!r} is not a parameter of {type(self).__name__} "
                                      f"(parameters: {', '.join(valid)})")
            if sep:
                nested.setdefault(name, {})[sub] = value
            else:
                setattr(self, name, value)
        for name, sub in nested.items():
            getattr(self, name).set_params(**sub)
        return self

    def _learned_attributes(self) -> list[str]:
        return [k for k in vars(self) if k.endswith("_") and not k.startswith("_")]

    def _check_fitted(self) -> None:
        if not self._learned_attributes():
            raise NotFittedError(f"this {type(self).__name__} is not fitted yet; call fit first")

    def __repr__(self) -> str:
        sig = inspect.signature(type(self).__init__)
        shown = []
        for name in self._param_names():
            value, default = getattr(self, name, None), sig.parameters[name].default
            try:
                same = bool(value == default) if not hasattr(value, "shape") else False
            except (TypeError, ValueError):
                same = False
            if not same:
                shown.append(f"{name}={value!r}")
        return f"{type(self).__name__}({', '.join(shown)})"
