"""The plain path of this tree against an older tree's, in one process: ``reconstruct_output_ids`` of a stored
message (dict) and of a parsed ``AssistantTurn``, K2.5 and K3, each as a ratio of one raw tiktoken encode of the
rendered text, with no server and no usage (the path most users take).

    python benchmarks/old_vs_new.py                  # against the tree before the server checks (ae855f9^)
    python benchmarks/old_vs_new.py --old REV --turns 2000 --rounds 5 --runs 3

The old tree is ``git archive REV kimi_recon`` unpacked under another package name (the package imports
itself relatively), so both run on the same interpreter, the same corpus and the same tokenizer data, their
blocks timed back to back in every round (:func:`benchmarks.timing.paired_blocks`, process CPU time). Each run
prints medians with quartiles; ``--runs`` repeats the whole measurement and prints each figure's median and range
over the runs. Goals (issue 37): new >= 0.80x / 0.97x raw (K2.5 dict / parsed) and >= 0.42x / 0.52x (K3), and new at
the old tree's speed. A third side, the new parsed turn with ``server="none"`` (no parser loss to consider), measures
in the same blocks what weighing an unknown server's losses costs a turn with no server and no usage.
"""

from __future__ import annotations

import argparse
import importlib
import io
import statistics
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

if __package__ in (None, ""):  # run as a script: make ``benchmarks`` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import corpus
from benchmarks.timing import paired_blocks

REPO = Path(__file__).resolve().parent.parent
#: the tree before the server knowledge (ae855f9): issue 37 measured the plain path against it
DEFAULT_OLD = "ae855f9^"
OLD_NAME = "kimi_recon_old_tree"
GOALS = {("kimi-k2.5", "dict"): 0.80, ("kimi-k2.5", "parsed"): 0.97, ("kimi-k3", "dict"): 0.42, ("kimi-k3", "parsed"): 0.52}


def load_old_tree(rev: str, where: Path) -> ModuleType:
    """``kimi_recon`` as it was at ``rev``, imported as :data:`OLD_NAME` from ``where``."""
    data = subprocess.run(["git", "-C", str(REPO), "archive", rev, "kimi_recon"], check=True, capture_output=True).stdout
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        tar.extractall(where, filter="data")
    (where / "kimi_recon").rename(where / OLD_NAME)
    sys.path.insert(0, str(where))
    return importlib.import_module(OLD_NAME)


def _sides(pkg: str, profile: str, msgs: Sequence[Any]) -> tuple[dict[str, Callable[[int, int], object]], list[str], Any]:
    reconstruct = importlib.import_module(f"{pkg}.reconstruct").reconstruct_output_ids
    as_turn = importlib.import_module(f"{pkg}.responses").as_turn
    render = importlib.import_module(f"{pkg}.render").render_turn_with_flags
    tok = importlib.import_module(pkg).load_tokenizer(profile=profile)
    prof = importlib.import_module(f"{pkg}.profiles").get_profile(profile)
    turns = [as_turn(m) for m in msgs]
    texts = [render(t, prof).text for t in turns]
    ids = [reconstruct(m, tok, prof).ids for m in msgs]
    return (
        {
            "dict": lambda lo, hi: [reconstruct(m, tok, prof) for m in msgs[lo:hi]],
            "parsed": lambda lo, hi: [reconstruct(t, tok, prof) for t in turns[lo:hi]],
            "no server": lambda lo, hi: [reconstruct(t, tok, prof, server="none") for t in turns[lo:hi]],
        },
        texts,
        (tok.encoding, ids),
    )


def _raw(enc: Any, texts: Sequence[str]) -> Callable[[int, int], object]:
    return lambda lo, hi: [enc.encode(t, allowed_special="all") for t in texts[lo:hi]]


def measure(old_pkg: str, turns: int, rounds: int, seed: int) -> dict[tuple[str, str, str], float]:
    """``{(profile, shape, tree): ratio to raw}`` for one run; also checks both trees give the same ids."""
    out: dict[tuple[str, str, str], float] = {}
    for profile in ("kimi-k2.5", "kimi-k3"):
        msgs = [r["response"] for r in corpus.sized_corpus(turns, "ordinary")]
        new, texts, (enc, new_ids) = _sides("kimi_recon", profile, msgs)
        old, _, (_, old_ids) = _sides(old_pkg, profile, msgs)
        if new_ids != old_ids:
            raise SystemExit(f"{profile}: the two trees rebuild different ids")
        sides: dict[str, Callable[[int, int], object]] = {"raw": _raw(enc, texts)}
        for shape in ("dict", "parsed"):
            sides[f"new {shape}"] = new[shape]
            sides[f"old {shape}"] = old[shape]
        sides["new no server"] = new["no server"]
        figures = paired_blocks(sides, "raw", turns, max(1, turns // 20), rounds, seed)
        for shape in ("dict", "parsed"):
            for tree in ("old", "new"):
                out[(profile, shape, tree)] = figures[f"{tree} {shape}"].ratio
        out[(profile, "parsed", "new no server")] = figures["new no server"].ratio
        # the unknown server's checks: a turn's time with them over its time without, µs, in the same blocks
        out[(profile, "parsed", "checks us")] = figures["new parsed"].us_per_item - figures["new no server"].us_per_item
    return out


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--old", default=DEFAULT_OLD, help=f"the older tree's git revision (default {DEFAULT_OLD})")
    ap.add_argument("--turns", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--quick", action="store_true", help="200 turns, 2 rounds, 1 run (CI: keeps the script working)")
    args = ap.parse_args(argv)
    if args.quick:
        args.turns, args.rounds, args.runs = 200, 2, 1
    with tempfile.TemporaryDirectory() as tmp:
        load_old_tree(args.old, Path(tmp))
        runs = [measure(OLD_NAME, args.turns, args.rounds, args.seed + i) for i in range(args.runs)]
    print(f"plain path, ratio to one raw encode (median over paired blocks; over {args.runs} run(s): median [min - max]); old = {args.old}")
    for (profile, shape), goal in GOALS.items():
        cells = []
        for tree in ("old", "new"):
            vals = [r[(profile, shape, tree)] for r in runs]
            cells.append(f"{tree} {statistics.median(vals):.3f}x [{min(vals):.3f} - {max(vals):.3f}]")
        new_med = statistics.median(r[(profile, shape, "new")] for r in runs)
        verdict = "meets" if new_med >= goal else "misses"
        print(f"  {profile:10s} {shape:6s}  {'   '.join(cells)}   goal {goal:.2f}x: {verdict}")
    for profile in ("kimi-k2.5", "kimi-k3"):
        bare = [r[(profile, "parsed", "new no server")] for r in runs]
        cost = [r[(profile, "parsed", "checks us")] for r in runs]
        print(
            f"  {profile:10s} parsed, server='none' (no loss weighed): {statistics.median(bare):.3f}x [{min(bare):.3f} - {max(bare):.3f}];"
            f" an unknown server's checks cost {statistics.median(cost):+.2f} us a turn [{min(cost):+.2f} - {max(cost):+.2f}]"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
