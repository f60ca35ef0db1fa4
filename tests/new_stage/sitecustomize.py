"""Imported at the start of every Python process with this folder on PYTHONPATH (the ladder
driver, the Ray instance and the notebook kernels tests/test_ladder_ray.py starts): the
`resample` stage and `star_resample` condition are in the table there."""

from resample_stage import register

register()
