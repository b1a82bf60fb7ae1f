"""Exception types shared across fpirl."""

import re


class FpirlInputError(ValueError):
    """Bad user input: wrong dims, NaN or negative density, inconsistent bounds, ...

    The CLI turns it into a one-line message and exit code 2.
    """


class NotFittedError(ValueError, AttributeError):
    """An estimator used before :meth:`fit` (as scikit-learn's: both a ValueError and an AttributeError,
    so ``hasattr(est, 'potential_on_grid')``-style probes and ``except ValueError`` both work)."""


class FpirlRuntimeError(RuntimeError):
    """A failure that is not the user's input and not a bug: disk full, a lost Dask cluster.

    The CLI prints its message as one line and exits with code 1.
    """


def reason(exc: BaseException, limit: int = 200) -> str:
    """The first sentence of an exception's message on one line (its type if it has none).

    Sentences end at ``'. '`` followed by a capital letter, so numbers such as ``298. MiB`` stay whole.
    """
    msg = " ".join(str(exc).split())
    msg = re.split(r"(?<=[^\d\s])\. (?=[A-Z])", msg)[0]
    return msg[:limit] or type(exc).__name__
