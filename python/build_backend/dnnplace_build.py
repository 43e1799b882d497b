"""PEP 517 backend of the dnnplace Python package: maturin's, with the build tools set.

HiGHS (the MILP solver inside the library) is compiled from source by the `highs-sys`
crate, which runs cmake and generates bindings with libclang (bindgen). Both are build
requirements from PyPI (`pyproject.toml`); this module points the Rust build at them
before handing over to maturin, unless the caller set them: `CMAKE` to the `cmake`
wheel's binary when no `cmake` is on PATH, and `LIBCLANG_PATH` to the `libclang`
wheel's `clang/native` folder when the machine has no libclang the loader knows of.
"""

import os
import re
import shutil
import subprocess

import maturin as _maturin


def _has_system_libclang():
    try:
        out = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True, check=False).stdout
    except OSError:
        return False
    return re.search(r"libclang(-[0-9.]+)?\.so", out) is not None


def _set_tools():
    if "CMAKE" not in os.environ and shutil.which("cmake") is None:
        try:
            import cmake

            os.environ["CMAKE"] = os.path.join(cmake.CMAKE_BIN_DIR, "cmake")
        except ImportError:
            pass
    if "LIBCLANG_PATH" not in os.environ and not _has_system_libclang():
        try:
            import clang

            native = os.path.join(os.path.dirname(clang.__file__), "native")
            if os.path.isdir(native):
                os.environ["LIBCLANG_PATH"] = native
        except ImportError:
            pass


def _wrap(name):
    inner = getattr(_maturin, name)

    def hook(*args, **kwargs):
        _set_tools()
        return inner(*args, **kwargs)

    hook.__name__ = name
    return hook


build_wheel = _wrap("build_wheel")
build_sdist = _wrap("build_sdist")
build_editable = _wrap("build_editable")
get_requires_for_build_wheel = _maturin.get_requires_for_build_wheel
get_requires_for_build_sdist = _maturin.get_requires_for_build_sdist
get_requires_for_build_editable = _maturin.get_requires_for_build_editable
prepare_metadata_for_build_wheel = _maturin.prepare_metadata_for_build_wheel
prepare_metadata_for_build_editable = _maturin.prepare_metadata_for_build_editable
