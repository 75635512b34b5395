"""ppc.simulate predicts what ppc-opt's --ppc-simulate and
--ppc-export-strategy predict, and what parallelize predicted for its own
strategy."""

import os
import unittest

import ppc
from ppctest import TempDirTest, example, ppc_opt, read_json


class SimulateTest(TempDirTest):
    def test_data_parallel_is_ppc_opts(self):
        model = example("cnn.onnx")
        sim = ppc.simulate(model, None, machine="dgx-h100", batch_size=64,
                           optimizer="adam", out_dir=self.path("py"))
        report, strategy = self.path("report.txt"), self.path("s.json")
        ppc_opt(model, "--batch-size=64", "--ppc-add-loss",
                "--ppc-convert-dtype", "--ppc-attach-machine=machine=dgx-h100",
                f"--ppc-simulate=optimizer=adam output={report}",
                f"--ppc-export-strategy=optimizer=adam file={strategy}",
                "-o", os.devnull)
        expected = read_json(strategy)
        self.assertEqual(sim.ops, expected["ops"])
        self.assertEqual(sim.predicted_time_s,
                         expected["prediction"]["iteration_ms"] / 1e3)
        self.assertEqual(sim.memory_per_device,
                         expected["prediction"]["peak_memory_bytes"])
        with open(report) as f:
            self.assertEqual(sim.report, f.read())
        # Data parallel over the 8 GPUs: every op splits its batch 8 ways.
        for op in sim.ops:
            self.assertEqual(op["degrees"][0], 8, op["name"])
            self.assertIn("predicted_ms", op)

    def test_a_found_strategy_simulates_as_predicted(self):
        model = example("mlp.onnx")
        found = ppc.parallelize(model, machine="dgx-h100", budget=300,
                                threads=1, batch_size=64,
                                out_dir=self.path("found"))
        for strategy in (found, found.strategy, found.strategy_path):
            with self.subTest(type(strategy).__name__):
                sim = ppc.simulate(model, strategy, machine="dgx-h100",
                                   batch_size=64, out_dir=self.path("sim"))
                self.assertAlmostEqual(sim.predicted_time_s,
                                       found.predicted_time_s, delta=1e-9)
                self.assertEqual([op["degrees"] for op in sim.ops],
                                 [op["degrees"] for op in found.strategy])
                self.assertEqual(sim.memory_per_device,
                                 found.memory_per_device)

    def test_a_result_brings_its_machine_batch_and_options(self):
        # Found for 16 devices at batch 32 with Adam: simulating the result
        # alone needs none of them again (the default machine has 8).
        model = example("mlp.onnx")
        found = ppc.parallelize(model, machine="dgx-h100x2", budget=300,
                                threads=1, batch_size=32, optimizer="adam",
                                out_dir=self.path("found"))
        self.assertEqual(found.machine, "dgx-h100x2")
        self.assertEqual(found.batch_size, 32)
        sim = ppc.simulate(model, found, out_dir=self.path("sim"))
        self.assertAlmostEqual(sim.predicted_time_s, found.predicted_time_s,
                               delta=1e-9)
        self.assertEqual(sim.memory_per_device, found.memory_per_device)
        self.assertIn("optimizer: adam", sim.report)
        self.assertIn("on 16 x", sim.report)


if __name__ == "__main__":
    unittest.main()
