"""Build the Cython hot paths under rmqd/cython_ext at install time."""
from pathlib import Path

from Cython.Build import cythonize
from setuptools import Extension, setup

HERE = Path(__file__).parent
EXT_DIR = HERE / "rmqd" / "cython_ext"

extensions = [
    Extension(
        f"rmqd.cython_ext.{pyx.stem}",
        [str(pyx.relative_to(HERE))],
        extra_compile_args=["-O2"],
    )
    for pyx in sorted(EXT_DIR.glob("*.pyx"))
]

setup(
    ext_modules=cythonize(
        extensions,
        language_level=3,
        compiler_directives={"boundscheck": False, "wraparound": False, "cdivision": True},
    ),
)
