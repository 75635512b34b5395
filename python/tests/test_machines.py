"""ppc.machines(), ppc.search_algorithms() and ppc.search_options() list
what ppc-opt lists: --list-machines, the unknown-algorithm error and
--help."""

import re
import unittest

import ppc
from ppctest import example, ppc_opt


class ListsTest(unittest.TestCase):
    def test_machines_are_ppc_opts_presets(self):
        listed = ppc_opt("--list-machines").stdout.splitlines()[1:]
        expected = {}
        for line in listed:
            # "  name   description": the name column is padded, but a long
            # name may run into the description with one space.
            name, description = line.strip().split(" ", 1)
            expected[name] = description.strip()
        self.assertEqual(ppc.machines(), expected)
        self.assertIn("dgx-h100xN", ppc.machines())

    def test_search_algorithms_are_what_ppc_search_accepts(self):
        error = ppc_opt(example("mlp.onnx"), "--batch-size=4",
                        "--ppc-auto-parallel=machine=cpux2 search=nope",
                        "-o", "/dev/null", check=False).stderr
        names = re.search(r"expected (.*)", error).group(1)
        expected = re.split(r", | or ", names.strip())
        self.assertEqual(list(ppc.search_algorithms()), expected)
        for name, description in ppc.search_algorithms().items():
            self.assertTrue(description, name)

    def test_search_options_are_ppc_auto_parallels(self):
        help_text = ppc_opt("--help").stdout
        block = help_text.split("--ppc-auto-parallel ", 1)[1]
        block = block.split("\n      --", 1)[0]
        expected = re.findall(r"^        --([a-z0-9-]+)", block, re.M)
        self.assertEqual(sorted(ppc.search_options()), sorted(expected))
        self.assertIn("memory-limit", ppc.search_options())


if __name__ == "__main__":
    unittest.main()
