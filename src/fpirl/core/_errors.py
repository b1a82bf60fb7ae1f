"""Exception types shared across fpirl."""


class FpirlInputError(ValueError):
    """Bad user input: wrong dims, NaN or negative density, inconsistent bounds, ...

    The CLI turns it into a one-line message and exit code 2.
    """
