#!/usr/bin/env python3
"""Which vLLM and SGLang releases parse Kimi output alike: every release keyed by the hashes of its Kimi files.

    python scripts/server_builds.py            # scan PyPI, rewrite tests/data/servers/BUILDS.json
    python scripts/server_builds.py --check    # rescan the releases BUILDS.json lists from the cache and diff

For every release of each family on PyPI (from ``FLOOR`` on: the release before the first with a Kimi parser shows
none), only the Kimi files of one of its wheels are read, over HTTP range requests (scripts/servers/kimi_files.py:
the zip's directory, then those members; a few hundred kB a release, never the 0.3-1 GB wheel), and cached in
``~/.cache/kimi-recon-servers/kimi-files/FAMILY-VERSION/``. Releases whose Kimi parser files hash alike form one
*parser set*; BUILDS.json maps each release to its set, groups the releases of a set into ranges of consecutive
releases, and names the build that stands for the set in the goldens: the measured build of the set when there is
one (scripts/server_conformance.py ``BUILDS``), else the set's newest release, driven with its Kimi parser files
swapped into a measured build's tree (``SWAP_BUILDS``) when the layouts match.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import sys
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from packaging.version import InvalidVersion, Version

sys.path.insert(0, str(Path(__file__).resolve().parent / "servers"))

import kimi_files

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "tests" / "data" / "servers" / "BUILDS.json"
DEFAULT_CACHE = Path(os.environ.get("KIMI_RECON_SERVERS_CACHE", Path.home() / ".cache" / "kimi-recon-servers"))
COMMAND = "python scripts/server_builds.py"
#: releases scanned from these on (the first Kimi K2 parser came later in both; the scan shows where)
FLOOR: Mapping[str, str] = {"vllm": "0.9.0", "sglang": "0.4.6"}
#: the builds the harness measures with their whole wheels (scripts/server_conformance.py BUILDS)
MEASURED = ("vllm==0.15.1", "vllm==0.33.0", "sglang==0.5.23")


def release_dir(cache: Path, family: str, version: str) -> Path:
    return cache / "kimi-files" / f"{family}-{version}"


def fetch_release(cache: Path, family: str, version: str, wheel: Mapping[str, Any]) -> dict[str, Any]:
    """The release's Kimi files (read over range requests once, then from the cache) and what reading cost."""
    target = release_dir(cache, family, version)
    cost = {"requests": 0, "bytes": 0}
    if not (target / "KIMI_FILES.json").exists():
        local = cache / "wheels" / str(wheel["filename"])
        if local.exists():  # a measured build's whole wheel is cached already
            with zipfile.ZipFile(local) as zf:
                kimi_files.read_kimi_files(zf, family, target)
        else:
            remote = kimi_files.RangeFile(str(wheel["url"]), int(wheel["size"]))
            with zipfile.ZipFile(remote) as zf:
                kimi_files.read_kimi_files(zf, family, target)
            cost = {"requests": remote.requests, "bytes": remote.bytes_read}
        meta = json.loads((target / "KIMI_FILES.json").read_text(encoding="utf-8"))
        meta.update(wheel=wheel["filename"], wheel_sha256=wheel["digests"]["sha256"], url=wheel["url"], size=wheel["size"])
        tmp = target / "KIMI_FILES.json.tmp"
        tmp.write_text(json.dumps(meta, indent=1, sort_keys=True) + "\n", encoding="utf-8")
        tmp.replace(target / "KIMI_FILES.json")
    files = kimi_files.load_kimi_files(target, family)
    meta = json.loads((target / "KIMI_FILES.json").read_text(encoding="utf-8"))
    return {"files": files, "wheel": meta["wheel"], "wheel_sha256": meta["wheel_sha256"], **cost}


def _version(v: str) -> Version:
    return Version(v)


def scan(cache: Path, listing: Mapping[str, Mapping[str, list[dict[str, Any]]]]) -> dict[str, Any]:
    """BUILDS.json's content from ``{family: {version: PyPI file entries}}``."""
    out: dict[str, Any] = {"command": COMMAND, "check": COMMAND + " --check", "families": {}}
    for family, releases in listing.items():
        versions = []
        for v in releases:
            try:
                if _version(v) >= _version(FLOOR[family]):
                    versions.append(v)
            except InvalidVersion:
                continue
        versions.sort(key=_version)
        wheels = {v: kimi_files.pick_wheel(releases[v]) for v in versions}
        no_wheel = [v for v in versions if wheels[v] is None]
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            futures = {v: pool.submit(fetch_release, cache, family, v, w) for v, w in wheels.items() if w is not None}
            found = {v: f.result() for v, f in futures.items()}
        # Kimi support: the first release with a Kimi tool-call parser (SGLang's reasoning_parser.py had a "kimi"
        # detector, Kimi-VL's, before any K2 parser)
        kimi = [v for v in versions if v in found and any(kimi_files.is_kimi_file(p, family) for p in found[v]["files"].parsers)]
        first = kimi[0] if kimi else None
        out["families"][family] = _family_entry(family, versions, found, first, no_wheel, releases)
    return out


def _family_entry(
    family: str, versions: list[str], found: Mapping[str, Any], first: str | None, no_wheel: list[str], releases: Mapping[str, Any]
) -> dict[str, Any]:
    kimi = [v for v in versions if v in found and (first is not None and _version(v) >= _version(first))]
    sets: dict[str, dict[str, Any]] = {}
    entries: dict[str, Any] = {}
    for v in kimi:
        files: kimi_files.KimiFiles = found[v]["files"]
        key = files.parser_key
        s = sets.setdefault(key, {"files": dict(sorted(files.parsers.items())), "releases": []})
        s["releases"].append(v)
        yanked = any(f.get("yanked") for f in releases[v])
        entries[v] = {
            "parser_set": key,
            "assembly": files.assembly,
            "assembly_hash": files.assembly_hash,
            "wheel": found[v]["wheel"],
            "wheel_sha256": found[v]["wheel_sha256"],
            **({"yanked": True} if yanked else {}),
        }
    order = {v: i for i, v in enumerate(kimi)}
    for s in sets.values():
        rel = s["releases"]
        ranges: list[list[str]] = []
        for v in rel:
            if ranges and order[v] == order[ranges[-1][1]] + 1:
                ranges[-1][1] = v
            else:
                ranges.append([v, v])
        s["ranges"] = ranges
        measured = [b for b in MEASURED if b.split("==")[0] == family and b.split("==")[1] in rel]
        s["measured"] = measured
        s["stands_for_it"] = measured[-1] if measured else f"{family}=={rel[-1]}"
        s["assembly_hashes"] = sorted({entries[v]["assembly_hash"] for v in rel if entries[v]["assembly_hash"]})
    for v in kimi:
        entries[v]["stands_for_it"] = sets[entries[v]["parser_set"]]["stands_for_it"]
    # sets in the order of their first release
    ordered = [{"key": k, **v} for k, v in sorted(sets.items(), key=lambda kv: order[kv[1]["releases"][0]])]
    return {
        "scanned_from": versions[0] if versions else None,
        "releases_scanned": len(versions),
        "without_wheel": no_wheel,
        "first_with_kimi": first,
        "releases_with_kimi": len(kimi),
        "parser_sets": ordered,
        "releases": entries,
    }


def listing_from_pypi() -> dict[str, dict[str, list[dict[str, Any]]]]:
    return {family: kimi_files.pypi_releases(family) for family in FLOOR}


def listing_from_builds(builds: Mapping[str, Any], cache: Path) -> dict[str, dict[str, list[dict[str, Any]]]]:
    """The releases a BUILDS.json lists, each with its cached wheel entry (the PyPI listing as it was)."""
    out: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for family, entry in builds["families"].items():
        out[family] = {}
        pypi: dict[str, list[dict[str, Any]]] | None = None
        for v in entry["releases"]:
            meta_path = release_dir(cache, family, v) / "KIMI_FILES.json"
            if not meta_path.exists():  # a cold cache: the wheel BUILDS.json names, found in PyPI's listing
                pypi = pypi if pypi is not None else kimi_files.pypi_releases(family)
                named = [f for f in pypi.get(v, []) if f["filename"] == entry["releases"][v]["wheel"]]
                if not named:
                    raise SystemExit(f"{family} {v}: PyPI lists no {entry['releases'][v]['wheel']} any more")
                out[family][v] = named
                continue
            meta = json.loads(meta_path.read_text(encoding="utf-8"))
            wheel = {"packagetype": "bdist_wheel", "filename": meta["wheel"], "url": meta["url"], "size": meta["size"],
                     "digests": {"sha256": meta["wheel_sha256"]}, "yanked": bool(entry["releases"][v].get("yanked"))}  # fmt: skip
            out[family][v] = [wheel]
    return out


def write(data: Mapping[str, Any], path: Path) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    tmp.replace(path)


def summary(data: Mapping[str, Any]) -> str:
    lines = []
    for family, entry in data["families"].items():
        lines.append(
            f"{family}: {entry['releases_scanned']} releases scanned from {entry['scanned_from']}, Kimi parsers from "
            f"{entry['first_with_kimi']} ({entry['releases_with_kimi']} releases), {len(entry['parser_sets'])} distinct parser sets"
        )
        for s in entry["parser_sets"]:
            key = s["key"]
            ranges = ", ".join(a if a == b else f"{a}..{b}" for a, b in s["ranges"])
            lines.append(f"  {key}  {ranges}  -> {s['stands_for_it']}{' (measured)' if s['measured'] else ''}")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true", help="rehash the releases BUILDS.json lists (cache, else range reads) and diff")
    ap.add_argument("--cache", type=Path, default=DEFAULT_CACHE, help="where the Kimi files are cached (default %(default)s)")
    args = ap.parse_args()
    if args.check:
        old = json.loads(OUT.read_text(encoding="utf-8"))
        fresh = scan(args.cache, listing_from_builds(old, args.cache))
        for family in fresh["families"]:  # the listing BUILDS.json was made from, not today's PyPI
            fresh["families"][family]["releases_scanned"] = old["families"][family]["releases_scanned"]
            fresh["families"][family]["scanned_from"] = old["families"][family]["scanned_from"]
            fresh["families"][family]["without_wheel"] = old["families"][family]["without_wheel"]
        if fresh != old:
            print(f"BUILDS.json differs from a rescan: run `{COMMAND}` and review", file=sys.stderr)
            return 1
        print("BUILDS.json matches a rescan", file=sys.stderr)
        return 0
    data = scan(args.cache, listing_from_pypi())
    write(data, OUT)
    print(summary(data))
    return 0


if __name__ == "__main__":
    sys.exit(main())
