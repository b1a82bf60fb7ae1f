"""Exception types shared across fpirl."""


class FpirlInputError(ValueError):
    """Bad user input: wrong dims, NaN or negative density, inconsistent bounds, ...

    The CLI turns it into a one-line message and exit code 2.
    """


class NotFittedError(ValueError, AttributeError):
    """An estimator used before :meth:`fit` (as scikit-learn's: both a ValueError and an AttributeError,
    so ``hasattr(est, 'potential_on_grid')``-style probes and ``except ValueError`` both work)."""
