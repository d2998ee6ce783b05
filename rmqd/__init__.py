"""rmqd: a RocketMQ-compatible name server and broker."""
import zipimport as _zipimport

__version__ = "0.1.0"

if isinstance(getattr(__spec__, "loader", None), _zipimport.zipimporter):
    # imported from a zip (spark-submit --py-files): compiled modules, rmqd's and orjson's, load from it too
    from rmqd.cython_ext._zipload import install as _install_zip_extensions
    _install_zip_extensions()
