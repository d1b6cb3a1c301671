"""Builds the Cython extension of the prototype (``pip install benchmarks/prototypes/parse_native``)."""

from Cython.Build import cythonize
from setuptools import setup

setup(
    ext_modules=cythonize(
        "src/debate_parse_native/_usual.pyx",
        compiler_directives={"language_level": "3", "boundscheck": False, "wraparound": False},
    )
)
