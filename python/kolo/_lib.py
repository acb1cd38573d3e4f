"""libkolo through cffi (ABI mode), and kolo's errors as exceptions.

Where libkolo is: KOLO_LIB (the library file; its headers in KOLO_INCLUDE,
else ../include beside its folder), else what `pkg-config kolo` said when
this package was installed (kolo/_paths.py), else `pkg-config kolo` now.
"""
import os
import subprocess

import cffi

from kolo._header import declarations


class KoloError(RuntimeError):
    """A kolo call failed; the message is kolo's sentence.  `code` is the
    koloResult_t (koloInvalidUsage = 5, koloRemoteError = 6, koloTimeout = 9)."""

    def __init__(self, code, sentence):
        super().__init__(sentence)
        self.code = code


def _pkg_config(var):
    try:
        out = subprocess.run(["pkg-config", "--variable=" + var, "kolo"], capture_output=True,
                             text=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        return None
    return out.stdout.strip() or None


def _installed_paths():
    try:
        from kolo import _paths  # written by setup.py from pkg-config
        return _paths.LIBDIR, _paths.INCLUDEDIR
    except ImportError:
        return None, None


def _locate():
    """(library file, include folder), or a KoloError saying where it looked."""
    lib = os.environ.get("KOLO_LIB")
    if lib:
        inc = os.environ.get("KOLO_INCLUDE") or os.path.join(os.path.dirname(os.path.dirname(lib)), "include")
        return lib, inc
    libdir, incdir = _installed_paths()
    if not (libdir and os.path.isdir(libdir)):
        libdir, incdir = _pkg_config("libdir"), _pkg_config("includedir")
    if not libdir:
        raise KoloError(4, "kolo: libkolo not found: set KOLO_LIB to libkolo.so, or PKG_CONFIG_PATH "
                           "to the folder of an installed kolo.pc")
    return os.path.join(libdir, "libkolo.so.1"), incdir


def _load():
    lib, inc = _locate()
    sources = []
    for name in ("kolo.h", "kolo_fusion.h"):
        path = os.path.join(inc, name)
        try:
            with open(path, encoding="utf-8") as f:
                sources.append(f.read())
        except OSError as e:
            raise KoloError(4, "kolo: cannot read %s (kolo's headers, beside %s): %s" % (path, lib, e)) from e
    text, macros = declarations(sources)
    ffi = cffi.FFI()
    ffi.cdef(text)
    try:
        return ffi, ffi.dlopen(lib), macros
    except OSError as e:
        raise KoloError(4, "kolo: cannot load %s: %s" % (lib, e)) from e


ffi, lib, macros = _load()


def last_error(comm=None):
    return ffi.string(lib.koloGetLastError(comm if comm is not None else ffi.NULL)).decode(errors="replace")


def check(res, comm=None, what=None):
    """Raises KoloError with kolo's sentence for comm unless res is success
    (or koloInProgress, which non-blocking communicators return)."""
    if res in (lib.koloSuccess, lib.koloInProgress):
        return res
    sentence = last_error(comm) or ffi.string(lib.koloGetErrorString(res)).decode()
    raise KoloError(res, "%s: %s" % (what, sentence) if what else sentence)


def check_fusion(res, fusion, what=None):
    """check() for koloFusion* calls: the fusion's own sentence."""
    if res == lib.koloSuccess:
        return res
    sentence = ffi.string(lib.koloFusionGetLastError(fusion)).decode(errors="replace")
    raise KoloError(res, "%s: %s" % (what, sentence) if what else sentence)
