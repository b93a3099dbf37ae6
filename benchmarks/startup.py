"""Start-up cost of the command line and of ``import kimi_recon``, as a ratio to a bare interpreter.

    python benchmarks/startup.py          # also run by benchmarks/run_all.py

Three commands, each in fresh processes, interleaved round by round and the best of N taken (a noisy
machine slows all three alike): ``python -c pass`` (the baseline), ``python -c "import kimi_recon"`` and
``python -m kimi_recon.cli --help``. Target: ``--help`` within 3x the bare start; the package and the
CLI import tiktoken, jinja2 and the process pool only when a command or a name needs them.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

TARGET_RATIO = 3.0
ROOT = Path(__file__).resolve().parent.parent
COMMANDS: dict[str, list[str]] = {
    "python -c pass": ["-c", "pass"],
    "import kimi_recon": ["-c", "import kimi_recon"],
    "kimi-recon --help": ["-m", "kimi_recon.cli", "--help"],
}


def _run_once(args: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, *args], check=True, stdout=subprocess.DEVNULL, env=env, cwd=str(ROOT))
    return time.perf_counter() - start


def measure(rounds: int) -> dict[str, Any]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    best = {name: float("inf") for name in COMMANDS}
    for _ in range(rounds):
        for name, args in COMMANDS.items():
            best[name] = min(best[name], _run_once(args, env))
    bare = best["python -c pass"]
    return {
        "rounds": rounds,
        "best_s": best,
        "import_ratio": best["import kimi_recon"] / bare,
        "help_ratio": best["kimi-recon --help"] / bare,
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=7)
    result = measure(p.parse_args().rounds)
    for name, seconds in result["best_s"].items():
        print(f"{name:20} {seconds * 1000:7.1f} ms")
    print(f"import kimi_recon / bare: {result['import_ratio']:.2f}x")
    print(f"kimi-recon --help / bare: {result['help_ratio']:.2f}x (target <= {TARGET_RATIO}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
