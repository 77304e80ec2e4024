"""How far each learn path on a device drifts from its autograd reference (on the CPU) after N updates, in
float64 and float32: tests/test_reference_learn.py's cases and arithmetic, the figures printed. (Not a test.)

    python benchmarks/reference_distances.py [--device cuda:0] [CASE ...]

Prints per case max over parameter tensors of ‖fast − reference‖₂ / ‖reference‖₂ after 100 updates in float64,
and after 10 and 100 in float32.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from test_reference_learn import CASES, _train_both  # noqa: E402  - the test's own cases and arithmetic

from pearl.adapters.torch import TorchAdapter  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda:0", help="a torch device id: cpu or cuda:N")
    parser.add_argument("cases", nargs="*", help=f"cases to run [default: all: {', '.join(sorted(CASES))}]")
    args = parser.parse_args()
    for case in args.cases or sorted(CASES):
        adapter = TorchAdapter(args.device)
        f64 = _train_both(case, adapter, 100, np.float64)
        f32_10, f32_100 = _train_both(case, adapter, 10), _train_both(case, adapter, 100)
        print(f"{case}: {args.device} float64 100 updates {f64:.2e}; float32 10 updates {f32_10:.2e}, "
              f"100 updates {f32_100:.2e}", flush=True)


if __name__ == "__main__":
    main()
