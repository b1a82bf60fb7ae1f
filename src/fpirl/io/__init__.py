"""File formats: density and result datasets (netCDF), atomic writes, Zarr stores.

The public names of the former module ``fpirl.io`` are re-exported here, so
``from fpirl.io import read_result`` keeps working.
"""

from .netcdf import (NETCDF_SUFFIXES, TABLE_SUFFIXES, FittedModel, FittedPotential, atomic_path, atomic_write,
                     check_output_path, data_kind, density_dataset, density_from_dataset, grid_coords,
                     grid_from_dataset, model_from_result, read_attrs, read_density, read_result,
                     result_dataset, write_density, write_result)

__all__ = ['NETCDF_SUFFIXES', 'TABLE_SUFFIXES', 'FittedModel', 'FittedPotential', 'atomic_path', 'atomic_write',
           'check_output_path', 'data_kind', 'density_dataset', 'density_from_dataset', 'grid_coords',
           'grid_from_dataset', 'model_from_result', 'read_attrs', 'read_density', 'read_result',
           'result_dataset', 'write_density', 'write_result']
