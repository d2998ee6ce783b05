"""rmqd: a RocketMQ-compatible name server and broker."""
import zipimport as _zipimport

__version__ = "0.1.0"

if isinstance(getattr(__spec__, "loader", None), _zipimport.zipimporter):
    # imported from a zip (spark-submit --py-files): compiled modules, rmqd's and orjson's, load from it too
    from rmqd.cython_ext._zipload import install as _install_zip_extensions
    _install_zip_extensions()

def _install_build_hint() -> None:
    """When a compiled module (``rmqd.cython_ext.<name>``) is missing beside its ``.pyx`` -- rmqd imported
    from a source tree whose extensions were never built, e.g. Python started in the repository root after a
    plain ``pip install .`` -- fail with what to run instead of a bare ``ModuleNotFoundError``.

    The finder goes last on ``sys.meta_path``: the import system asks it only after every other finder
    found nothing, so a normal import never reaches it. It raises ImportError, not ModuleNotFoundError:
    ``from rmqd.cython_ext import x`` would turn the latter into a bare "cannot import name"."""
    import os
    import sys

    package_dir = os.path.dirname(os.path.abspath(__file__))

    class NotBuilt:
        rmqd_build_hint = True

        def find_spec(self, fullname: str, path: object = None, target: object = None) -> None:
            prefix, _, name = fullname.rpartition(".")
            if prefix != "rmqd.cython_ext":
                return None
            ext_dir = os.path.join(package_dir, "cython_ext")
            if not os.path.isfile(os.path.join(ext_dir, name + ".pyx")):
                return None
            root = os.path.dirname(package_dir)
            raise ImportError(
                f"rmqd's compiled module {fullname} is not built: {package_dir} is a source tree whose Cython "
                f"extensions were never compiled. Run `pip install -e .` in {root} (it builds them in place; "
                f"after editing a .pyx: `python setup.py build_ext --inplace`), or start Python outside the "
                f"source tree to use an installed rmqd.", name=fullname)

    if not any(getattr(f, "rmqd_build_hint", False) for f in sys.meta_path):
        sys.meta_path.append(NotBuilt())


_install_build_hint()
