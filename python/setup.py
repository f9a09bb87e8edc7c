"""Builds the tensorscope wheel by driving the project's CMake build: only what the
package needs (the target tensorscope_wheel: the extension tensorscope._native,
tensorscoped and the tensorscope command; no tests, benches, fuzzers or examples), then
puts the extension in the package and both executables in tensorscope/bin/ (all three
stripped), with a _build_info.py that points there.

The wheel is for the platform it was built on: the executables link the system's
shared libraries (python/README.md, "Requirements"), which must be installed where the
wheel is used. The extension uses the stable ABI (CPython >= 3.9).

It says what it does: a line per stage, then CMake's own output (its configuration, and
make's "[ 37%] Building ..." lines, counting the wheel's steps from 0 to 100% once). pip
shows a build's output only with -v (`pip install -v ./python`), as the README's command
does; without it, pip shows a spinner for the whole build (about 20 minutes on 2 cores,
most of it compiling the daemon).

Environment:
  TENSORSCOPE_CMAKE_BUILD_DIR  an already configured build tree of this project to build
                               in (e.g. the developer's build/; a relative path may be
                               relative to the project root): nothing is configured again
                               and only out-of-date targets are rebuilt
  TENSORSCOPE_BUILD_JOBS       parallel build jobs (default: the number of CPUs)
"""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
TARGET = "tensorscope_wheel"  # python/CMakeLists.txt: tensorscope_python, tensorscoped, tensorscope_cli


def say(what):
    """A stage of the build, on stderr (pip shows it with -v)."""
    print(f"tensorscope: {what}", file=sys.stderr, flush=True)


def project_version():
    text = (ROOT / "CMakeLists.txt").read_text()
    match = re.search(r"project\(\s*tensorscope\s+VERSION\s+([0-9][0-9.]*)", text)
    if not match:
        raise RuntimeError(f"no project(tensorscope VERSION ...) in {ROOT / 'CMakeLists.txt'}")
    return match.group(1)


class FreshBuildPy(build_py):
    """build_py that starts from an empty package directory, so a module deleted from the
    sources is not carried into the wheel from an earlier build."""

    def run(self):
        shutil.rmtree(Path(self.build_lib) / "tensorscope", ignore_errors=True)
        super().run()


class CMakeBuild(build_ext):
    """build_ext for the one extension: the CMake targets, then the files into the package."""

    def build_extension(self, ext):
        given = os.environ.get("TENSORSCOPE_CMAKE_BUILD_DIR")
        build_dir = Path(self.build_temp).resolve() / "cmake"
        if given:  # relative: to the working directory, else to the project root
            build_dir = next((d.resolve() for d in (Path(given), ROOT / given) if (d / "CMakeCache.txt").exists()),
                             Path(given).resolve())
        if not (build_dir / "CMakeCache.txt").exists():
            if given:
                raise RuntimeError(f"TENSORSCOPE_CMAKE_BUILD_DIR={given} is not a configured build tree")
            build_dir.mkdir(parents=True, exist_ok=True)
            say(f"configuring the CMake build in {build_dir} (Release; tests, benches and examples off)")
            subprocess.check_call([
                "cmake", "-S", str(ROOT), "-B", str(build_dir), "-DCMAKE_BUILD_TYPE=Release",
                f"-DPython_EXECUTABLE={sys.executable}", "-DTENSORSCOPE_BUILD_TESTS=OFF",
                "-DTENSORSCOPE_BUILD_BENCH=OFF", "-DTENSORSCOPE_BUILD_EXAMPLES=OFF",
            ])
        jobs = os.environ.get("TENSORSCOPE_BUILD_JOBS") or str(os.cpu_count() or 2)
        say(f"building {TARGET} (the extension, tensorscoped, tensorscope) with {jobs} jobs "
            "(about 20 minutes on 2 cores; CMake counts the steps)")
        subprocess.check_call(["cmake", "--build", str(build_dir), "--target", TARGET, "-j", jobs])
        say("built; putting the extension and the executables into the package")

        built_package = build_dir / "python" / "tensorscope"
        target = Path(self.get_ext_fullpath(ext.name))
        target.parent.mkdir(parents=True, exist_ok=True)
        bin_dir = target.parent / "bin"
        bin_dir.mkdir(exist_ok=True)
        strip = shutil.which("strip")
        for source, out in ((built_package / "_native.abi3.so", target),
                            (build_dir / "bin" / "tensorscoped", bin_dir / "tensorscoped"),
                            (build_dir / "bin" / "tensorscope", bin_dir / "tensorscope")):
            shutil.copyfile(source, out)
            if strip:  # debug information is most of their size
                subprocess.check_call([strip, "--strip-unneeded", str(out)])
            out.chmod(0o755)
        (target.parent / "_build_info.py").write_text(
            "# Written when the wheel was built: the executables that came with the package.\n"
            "import os as _os\n\n"
            "_BIN = _os.path.join(_os.path.dirname(_os.path.abspath(__file__)), \"bin\")\n"
            "DAEMON = _os.path.join(_BIN, \"tensorscoped\")\n"
            "CLI = _os.path.join(_BIN, \"tensorscope\")\n")

    def get_ext_filename(self, fullname):
        return os.path.join(*fullname.split(".")) + ".abi3.so"


setup(
    version=project_version(),
    ext_modules=[Extension("tensorscope._native", sources=[], py_limited_api=True)],
    cmdclass={"build_py": FreshBuildPy, "build_ext": CMakeBuild},
    options={"bdist_wheel": {"py_limited_api": "cp39"}},
)
