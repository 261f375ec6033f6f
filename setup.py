"""Builds the compiled OTLP walker (collector/_otlp_wire.pyx); everything else is in pyproject.toml.

The collector refuses to run without it (see collector/otlp_decode.py), so a failed build shows up
as a failed install or a failed `make test`, never as a silently slow collector.
"""

from Cython.Build import cythonize
from setuptools import Extension, setup

setup(
    ext_modules=cythonize(
        [Extension("turnlens.collector._otlp_wire", ["collector/_otlp_wire.pyx"])],
        build_dir="build",  # the generated C stays out of the source tree
        compiler_directives={"language_level": "3"},
    )
)
