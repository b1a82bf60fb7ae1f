"""Built-in example problems (synthetic data with a known ground truth)."""

from .demo import DemoProblem, demo_problem, run_demo

__all__ = ["DemoProblem", "demo_problem", "run_demo"]
