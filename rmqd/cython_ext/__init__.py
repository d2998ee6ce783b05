"""The Cython hot paths (compiled at install). Imported from a zip (the wheel given to ``spark-submit
--py-files`` as a .zip), the compiled modules are served from the archive by :mod:`rmqd.cython_ext._zipload`."""
import zipimport as _zipimport

if isinstance(getattr(__spec__, "loader", None), _zipimport.zipimporter):
    from rmqd.cython_ext._zipload import install as _install
    _install(__file__)
