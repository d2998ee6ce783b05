"""Build rmqd's generated code at install time: the Cython hot paths under rmqd/cython_ext and the gRPC modules
under rmqd/grpc/pb (from rmqd/grpc/proto, by scripts/gen_grpc.py).  Neither is in git."""
import importlib.util
from pathlib import Path

from Cython.Build import cythonize
from setuptools import Command, Extension, setup
from setuptools.command.build import build
from setuptools.command.build_ext import build_ext

HERE = Path(__file__).parent
EXT_DIR = HERE / "rmqd" / "cython_ext"


def _gen_grpc():
    spec = importlib.util.spec_from_file_location("gen_grpc", HERE / "scripts" / "gen_grpc.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class BuildGrpc(Command):
    """Generate rmqd/grpc/pb from the .proto files (before build_py copies and build_ext compiles)."""

    description = "generate rmqd/grpc/pb from rmqd/grpc/proto"
    user_options = []
    editable_mode = False       # set by editable installs; the modules are written in the source tree either way

    def initialize_options(self):
        pass

    def finalize_options(self):
        pass

    def run(self):
        changed = _gen_grpc().write()
        self.announce(f"rmqd/grpc/pb: generated {', '.join(changed) or 'nothing (up to date)'}", level=2)


class BuildExtWithGrpc(build_ext):
    """build_ext that generates the gRPC modules first, so `setup.py build_ext --inplace` builds everything."""

    def run(self):
        self.run_command("build_grpc")
        super().run()


# first of build's steps: editable installs, wheels and `setup.py build` all run it before build_py / build_ext
build.sub_commands.insert(0, ("build_grpc", None))

extensions = [
    Extension(
        f"rmqd.cython_ext.{pyx.stem}",
        [str(pyx.relative_to(HERE))],
        extra_compile_args=["-O2"],
    )
    for pyx in sorted(EXT_DIR.glob("*.pyx"))
]

setup(
    cmdclass={"build_grpc": BuildGrpc, "build_ext": BuildExtWithGrpc},
    ext_modules=cythonize(
        extensions,
        language_level=3,
        compiler_directives={"boundscheck": False, "wraparound": False, "cdivision": True},
    ),
)
