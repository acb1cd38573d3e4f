"""Installs the kolo package and records where `pkg-config kolo` finds
libkolo and its headers (kolo/_paths.py), so that the installed package
loads the kolo it was installed against (KOLO_LIB overrides it)."""
import os
import subprocess

from setuptools import setup
from setuptools.command.build_py import build_py


def pkg_config(var):
    try:
        out = subprocess.run(["pkg-config", "--variable=" + var, "kolo"], capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        return None
    return out.stdout.strip() or None


class BuildWithPaths(build_py):
    def run(self):
        super().run()
        libdir, incdir = pkg_config("libdir"), pkg_config("includedir")
        if not libdir:
            print("kolo: pkg-config finds no kolo (PKG_CONFIG_PATH): the package will look at import time")
            return
        target = os.path.join(self.build_lib, "kolo", "_paths.py")
        with open(target, "w", encoding="utf-8") as f:
            f.write("# written by setup.py from pkg-config kolo\nLIBDIR = %r\nINCLUDEDIR = %r\n" % (libdir, incdir))


setup(cmdclass={"build_py": BuildWithPaths})
