"""Figures of results: fields on 1-D to 4-D grids (nested grids as in the paper), corner plots of
2-D slices from 5-D on, KL and convergence plots. Plotting holds no numerics.

The public names of the former modules ``fpirl.plotting`` and ``fpirl.plotting.slices`` are
re-exported here.
"""

from .fields import (nested_grid_image, nested_grid_layout, plot_convergence, plot_fields, plot_kl,
                     plot_potential_comparison, plot_result, robust_range, save_figure, symmetric_range)
from .slices import plot_slices, reference_node, slice_through

__all__ = ['nested_grid_image', 'nested_grid_layout', 'plot_convergence', 'plot_fields', 'plot_kl',
           'plot_potential_comparison', 'plot_result', 'plot_slices', 'reference_node', 'robust_range',
           'save_figure', 'slice_through', 'symmetric_range']
