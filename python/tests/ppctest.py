"""Shared by the ppc package's tests: where things are, and ppc-opt.

ppc-opt is the oracle: the package must give what ppc-opt gives for the
same model and options. ctest sets PPC_BINARY_DIR and PPC_SOURCE_DIR (and
PYTHONPATH to the build tree's package).
"""

import json
import os
import subprocess
import tempfile
import unittest

BINARY_DIR = os.environ.get("PPC_BINARY_DIR", "")
SOURCE_DIR = os.environ.get(
    "PPC_SOURCE_DIR",
    os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(
        __file__)))))
PPC_OPT = os.path.join(BINARY_DIR, "bin", "ppc-opt")
EXAMPLES = os.path.join(SOURCE_DIR, "examples")


def example(name):
    return os.path.join(EXAMPLES, name)


def ppc_opt(*args, check=True):
    """Runs ppc-opt; returns the completed process (text)."""
    if not os.path.exists(PPC_OPT):
        raise unittest.SkipTest(f"no ppc-opt at {PPC_OPT!r}: set "
                                f"PPC_BINARY_DIR to the build directory")
    process = subprocess.run([PPC_OPT, *args], capture_output=True,
                             text=True)
    if check and process.returncode != 0:
        raise AssertionError(f"ppc-opt {' '.join(args)} failed:\n"
                             f"{process.stderr}")
    return process


def read_json(path):
    with open(path) as f:
        return json.load(f)


class TempDirTest(unittest.TestCase):
    """A test with a scratch directory, self.tmp."""

    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory(prefix="ppc-test-")
        self.tmp = self._tmp.name

    def tearDown(self):
        self._tmp.cleanup()

    def path(self, *names):
        return os.path.join(self.tmp, *names)
