"""ppc.train runs the plan parallelize wrote under mpirun, as
`mpirun -np K ppc-run PLAN` would: the losses it logs, the trained weights
written into a copy of the ONNX model, real data from arrays."""

import os
import shutil
import unittest

import ppc
from ppctest import TempDirTest, example

SEARCH = {"machine": "cpux2", "search": "mcmc", "budget": 50, "threads": 1,
          "optimizer": "adam"}


@unittest.skipUnless(shutil.which("mpirun"), "no mpirun")
class TrainTest(TempDirTest):
    def test_loss_falls_on_one_batch_and_weights_come_back(self):
        found = ppc.parallelize(example("mlp.onnx"), batch_size=8,
                                out_dir=self.path("found"), **SEARCH)
        trained = ppc.train(found, steps=20, ppc_run_args=["--batches", "1"])
        self.assertEqual(len(trained.losses), 20)
        self.assertLess(trained.losses[-1], 0.5 * trained.losses[0])
        self.assertTrue(os.path.exists(trained.weights_path))
        with open(example("mlp.onnx"), "rb") as f:
            original = f.read()
        with open(trained.weights_path, "rb") as f:
            self.assertNotEqual(f.read(), original)
        # The trained values, by initializer name, against the model's own.
        before = ppc.Training([], example("mlp.onnx"), "").weights()
        after = trained.weights()
        self.assertEqual(sorted(before), sorted(after))
        for name in before:
            self.assertEqual(before[name].shape, after[name].shape, name)
            self.assertFalse((before[name] == after[name]).all(), name)

    def test_data_from_arrays(self):
        import numpy

        found = ppc.parallelize(example("mlp.onnx"), batch_size=8,
                                out_dir=self.path("found"), **SEARCH)
        rng = numpy.random.default_rng(3)
        data = {"x": rng.standard_normal((32, 784)).astype(numpy.float32),
                "labels": rng.integers(0, 10, 32)}
        trained = ppc.train(found, data=data, steps=8,
                            out_dir=self.path("run"))
        self.assertEqual(len(trained.losses), 8)
        self.assertTrue(os.path.exists(self.path("run/data/x.npy")))

    def test_errors_name_the_problem(self):
        found = ppc.parallelize(example("mlp.onnx"), batch_size=8,
                                out_dir=self.path("found"), **SEARCH)
        with self.assertRaises(ValueError):
            ppc.train(found, steps=0)
        with self.assertRaises(ValueError):
            ppc.train("plan.pb")
        with self.assertRaises(RuntimeError) as raised:
            ppc.train(found, data=self.path("nowhere"), steps=1)
        self.assertIn("ppc-run failed", str(raised.exception))
        self.assertIn("nowhere: not a directory", str(raised.exception))

    def test_a_torch_module_gets_its_trained_weights(self):
        try:
            import torch
        except ImportError:
            self.skipTest("no torch")
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(),
                                    torch.nn.Linear(32, 4))
        before = {name: p.detach().clone()
                  for name, p in model.named_parameters()}
        found = ppc.parallelize(model, torch.randn(8, 16),
                                out_dir=self.path("found"), **SEARCH)
        trained = ppc.train(found, steps=10, module=model,
                            ppc_run_args=["--batches", "1"])
        self.assertLess(trained.losses[-1], trained.losses[0])
        # Every parameter now holds ppc-run's trained value.
        weights = trained.weights()
        for name, parameter in model.named_parameters():
            self.assertFalse(torch.equal(parameter, before[name]), name)
            self.assertTrue(torch.equal(parameter.detach(),
                                        torch.from_numpy(weights[name])),
                            name)


if __name__ == "__main__":
    unittest.main()
