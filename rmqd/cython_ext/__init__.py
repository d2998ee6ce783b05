"""The Cython hot paths (compiled at install). Imported from a zip (``spark-submit --py-files``), the compiled
modules are served from the archive by :mod:`rmqd.cython_ext._zipload`."""
from rmqd.cython_ext._zipload import install_if_zipped as _install_if_zipped

_install_if_zipped(__spec__)
