#!/usr/bin/env python3
"""Push raw Kimi outputs through real vLLM and SGLang builds and write what they return as golden files.

    python scripts/server_conformance.py            # regenerate tests/data/servers/
    python scripts/server_conformance.py --check    # regenerate into a temp dir and diff with the committed files

Fetches the server wheels from PyPI (``pip download --no-deps``: no torch, no engine) into a cache outside
the repository, unpacks their Python sources, makes a venv there with the pure-Python packages their
parsers import, and runs each build's own non-streaming chat-completion code with its engine imports
stubbed (scripts/servers/). Nothing of theirs is copied into this repository: the drivers import it.
Needs network access to PyPI on the first run (about 0.9 GB of wheels); later runs reuse the cache.
"""

from __future__ import annotations

import argparse
import difflib
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
HERE = REPO / "scripts" / "servers"
OUT = REPO / "tests" / "data" / "servers"
DEFAULT_CACHE = Path(os.environ.get("KIMI_RECON_SERVERS_CACHE", Path.home() / ".cache" / "kimi-recon-servers"))

#: build -> (pip requirement, driver, unpacked top package)
BUILDS: dict[str, tuple[str, str, str]] = {
    "vllm==0.15.1": ("vllm==0.15.1", "drive_vllm.py", "vllm"),
    "vllm==0.33.0": ("vllm==0.33.0", "drive_vllm.py", "vllm"),
    "sglang==0.5.23": ("sglang==0.5.23", "drive_sglang.py", "sglang"),
}
#: builds whose streaming path is driven too (the parser's own per-delta entry point, ``parse_delta``),
#: written to tests/data/servers/stream/
STREAM_BUILDS = ("vllm==0.33.0",)
#: builds also run with vLLM's own slow incremental detokenizer at its default (spaces between added
#: tokens), written to tests/data/servers/spaced/; generated outputs only (the official turns would add
#: 2 MB and nothing new)
SPACED_BUILDS = ("vllm==0.15.1", "vllm==0.33.0")
#: Builds of tests/data/servers/BUILDS.json's parser sets that no measured build stands for: the set's newest release,
#: driven with its Kimi parser files (only those, read over range requests by scripts/server_builds.py) swapped into
#: the unpacked tree of the measured build of its layout, whose chat assembly stays. Written to
#: tests/data/servers/swapped/ as the rows that differ from that measured build's (the others are the same).
BUILDS_JSON = OUT / "BUILDS.json"
sys.path.insert(0, str(HERE))
import kimi_files  # noqa: E402

#: what the parsers import that a server venv would have (pure Python here; torch never)
HARNESS_DEPS = ["pydantic", "regex", "partial-json-parser", "openai", "msgspec", "packaging", "numpy", "tiktoken", "jinja2", "tqdm"]
COMMAND = "python scripts/server_conformance.py"


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def run(cmd: list[str], **kw: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, check=True, text=True, **kw)


def fetch_wheel(cache: Path, build: str) -> Path:
    requirement = BUILDS[build][0]
    name, version = requirement.split("==")
    wheels = cache / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    found = sorted(wheels.glob(f"{name}-{version}-*.whl"))
    if not found:
        run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "-q", requirement, "-d", str(wheels)])
        found = sorted(wheels.glob(f"{name}-{version}-*.whl"))
    if not found:
        raise SystemExit(f"pip download {requirement} left no wheel in {wheels}")
    return found[0]


def unpack(cache: Path, build: str, wheel: Path) -> Path:
    target = cache / "src" / build.replace("==", "-")
    marker = target / ".unpacked"
    if marker.exists() and marker.read_text() == wheel.name:
        return target
    with zipfile.ZipFile(wheel) as z:
        for member in z.namelist():
            if member.endswith((".py", ".json", ".jinja")):
                z.extract(member, target)
    marker.write_text(wheel.name)
    return target


def venv_python(cache: Path) -> Path:
    venv = cache / "venv"
    python = venv / "bin" / "python"
    if not python.exists():
        run([sys.executable, "-m", "venv", str(venv)])
        run([str(python), "-m", "pip", "install", "-q", "--upgrade", "pip"])
        run([str(python), "-m", "pip", "install", "-q", *HARNESS_DEPS])
    # this checkout's kimi-recon (the tokenizer the parsers are given, the case builder); no deps pulled
    run([str(python), "-m", "pip", "install", "-q", "--no-deps", "-e", str(REPO)])
    return python


def swap_base(family: str, files: list[str]) -> tuple[str | None, str]:
    """The measured build whose tree takes a release's Kimi parser files, or None and why not."""
    names = set(files)
    if family == "vllm":
        if "vllm/parser/kimi_k2.py" in names:
            return "vllm==0.33.0", "vllm/parser/ layout (ParserManager), as 0.33.0"
        if "vllm/tool_parsers/kimi_k2_tool_parser.py" in names:
            return "vllm==0.15.1", "vllm/tool_parsers/ layout, as 0.15.1"
        return None, ("tool parser under vllm/entrypoints/openai/tool_parsers/ with its protocol module there: "
                      "needs the whole wheel and a driver for the old serving_chat.py")  # fmt: skip
    if "sglang/srt/function_call/kimik2_detector.py" in names:
        return "sglang==0.5.23", "sglang/srt/function_call/ layout, as 0.5.23"
    return None, "no Kimi K2 detector"


#: a release's file path -> where the measured tree imports that module from (SGLang moved reasoning_parser.py)
MOVED = {"sglang/srt/reasoning_parser.py": "sglang/srt/parser/reasoning_parser.py"}


#: bump when swapped_tree's rules change (a cached swapped tree of other rules is rebuilt)
SWAP_RULES = 4


def _kimi_meta(cache: Path, build: str) -> dict[str, Any]:
    family, version = build.split("==")
    path = cache / "kimi-files" / f"{family}-{version}" / "KIMI_FILES.json"
    if not path.exists():
        raise SystemExit(f"{path} missing: run `python scripts/server_builds.py --check` first (it reads the Kimi files over range requests)")
    return dict(json.loads(path.read_text(encoding="utf-8")))


def swapped_tree(cache: Path, build: str, base: str, mode: str) -> Path:
    """The base build's unpacked tree (hard links) with ``build``'s Kimi parser files in place of the base's.

    ``mode`` ``"all"``: every Kimi file of the release (the Kimi parsers and the bases and engines they import);
    ``"kimi"``: the Kimi-named parser files only, the base's shared modules kept, and in a module other makers'
    parsers share (SGLang's reasoning_parser.py) the release's Kimi classes grafted over the base's (for a release
    whose shared modules no longer fit the base's other parsers)."""
    family, version = build.split("==")
    base_src = unpack(cache, base, fetch_wheel(cache, base))
    own = _kimi_meta(cache, build)
    target = cache / "src" / f"{build.replace('==', '-')}-on-{base.replace('==', '-')}-{mode}"
    marker = target / ".swapped"
    stamp = json.dumps({"base": base, "parsers": own["parsers"], "wheel_sha256": own["wheel_sha256"], "mode": mode, "rules": SWAP_RULES}, sort_keys=True)
    if marker.exists() and marker.read_text() == stamp:
        return target
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(base_src, target, copy_function=os.link)
    src = cache / "kimi-files" / f"{family}-{version}"
    swapped = [p for p in own["parsers"] if mode == "all" or kimi_files.is_kimi_file(p, family)]
    for path in _kimi_meta(cache, base)["parsers"]:  # the base's own Kimi files go: a file the release lacks is absent
        if mode == "all" or (kimi_files.is_kimi_file(path, family) and _has_k3(own["parsers"]) >= _has_k3([path])):
            # (in "kimi" mode a K3 file of the base stays when the release has none: the base's other modules import
            # it; the release's rows then leave K3 out, see drive_swapped)
            (target / MOVED.get(path, path)).unlink(missing_ok=True)
    for path in swapped:
        dest = target / MOVED.get(path, path)
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.unlink(missing_ok=True)  # (a hard link to the base's file: never write through it)
        dest.write_bytes((src / path).read_bytes())
    if mode == "kimi":
        for path in own["parsers"]:
            if path in kimi_files.SHARED_REASONING[family]:
                dest = target / MOVED.get(path, path)
                text = dest.read_text(encoding="utf-8") + _graft((src / path).read_text(encoding="utf-8"), build)
                dest.unlink()
                dest.write_text(text, encoding="utf-8")
    marker.write_text(stamp)
    return target


_IMPORT_ERROR = re.compile(r"cannot import name '\w+' from '([\w.]+)'|No module named '([\w.]+)'|module '([\w.]+)' has no attribute")
#: at most this many modules of a release are fetched to let its Kimi files import in a base tree
MAX_REPAIRS = 8


def repair_imports(cache: Path, build: str, tree: Path, run_driver: Any) -> list[str]:
    """Let ``build``'s swapped-in files import: while the driver fails on an import of a module the release's wheel
    has (a name its Kimi files take from a newer ``vllm/envs.py`` or ``tool_parsers/utils.py``), that module of the
    release is read over range requests (cached beside its Kimi files) and swapped in too. The modules swapped in."""
    family, version = build.split("==")
    extras_file = tree / ".extras"
    extras: list[str] = json.loads(extras_file.read_text()) if extras_file.exists() else []
    wheel: zipfile.ZipFile | None = None
    for _ in range(MAX_REPAIRS):
        proc = run_driver(tree)
        # (a server that registers its parsers lazily logs the import error and answers every row with an error)
        answered = proc.returncode == 0 and all('"error"' not in line for line in proc.stdout.decode("utf-8", "replace").splitlines() if line.startswith("{"))
        if answered:
            break
        matches = list(_IMPORT_ERROR.finditer(proc.stderr.decode("utf-8", "replace")))
        found = matches[-1] if matches else None  # the last one: what failed last
        if not found:
            break
        module = found.group(1) or found.group(2) or found.group(3)
        deps = cache / "kimi-files" / f"{family}-{version}" / "deps"
        path = next((p for p in (module.replace(".", "/") + ".py", module.replace(".", "/") + "/__init__.py") if (deps / p).exists()), None)
        if path is None:
            if wheel is None:
                meta = _kimi_meta(cache, build)
                wheel = zipfile.ZipFile(kimi_files.RangeFile(meta["url"], meta["size"]))
            names = set(wheel.namelist())
            path = next((p for p in (module.replace(".", "/") + ".py", module.replace(".", "/") + "/__init__.py") if p in names), None)
            if path is None or path in extras:
                break
            (deps / path).parent.mkdir(parents=True, exist_ok=True)
            (deps / path).write_bytes(wheel.read(path))
        if path in extras:
            break
        dest = tree / path
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.unlink(missing_ok=True)  # (a hard link to the base's file: never write through it)
        dest.write_bytes((deps / path).read_bytes())
        extras.append(path)
        extras_file.write_text(json.dumps(extras))
    return extras


def _has_k3(paths: list[str]) -> bool:
    return any("k3" in p.rsplit("/", 1)[-1] for p in paths)


def _graft(release_source: str, build: str) -> str:
    """The release's Kimi classes appended to the base's shared module, and its dispatch table pointed at them."""
    import ast

    tree = ast.parse(release_source)
    classes = [n for n in tree.body if isinstance(n, ast.ClassDef) and kimi_files.SHARED_KEEP.search(n.name)]
    names = [n.name for n in classes]
    lines = release_source.splitlines()
    body = "\n\n".join("\n".join(lines[n.lineno - 1 - len(n.decorator_list) : n.end_lineno]) for n in classes)
    return (
        f"\n\n# --- grafted by kimi-recon's conformance harness: {build}'s Kimi classes ---\n{body}\n\n"
        f"for _key, _cls in list(getattr(ReasoningParser, 'DetectorMap', {{}}).items()):\n"
        f"    if getattr(_cls, '__name__', None) in {names!r}:\n"
        f"        ReasoningParser.DetectorMap[_key] = globals()[_cls.__name__]\n"
    )


def swap_builds(cache: Path) -> list[tuple[str, str | None, str]]:
    """``(build, base or None, why)`` for every parser set of BUILDS.json that no measured build stands for."""
    data = json.loads(BUILDS_JSON.read_text(encoding="utf-8"))
    out = []
    for family, entry in data["families"].items():
        for s in entry["parser_sets"]:
            if s["measured"]:
                continue
            base, why = swap_base(family, list(s["files"]))
            out.append((s["stands_for_it"], base, why))
    return out


def freeze(python: Path) -> list[str]:
    out = run([str(python), "-m", "pip", "freeze", "--exclude-editable"], capture_output=True).stdout
    return sorted(line for line in out.splitlines() if line and not line.startswith("-e"))


def golden_row(build: str, case: dict[str, Any], result: dict[str, Any]) -> dict[str, Any]:
    return {
        "case_id": case["case_id"],
        "server": build,
        "profile": case["profile"],
        "thinking": case["thinking"],
        "source": case["source"],
        "loss": case["loss"],
        "shape": case["shape"],
        "request": {"tools": case["tools"], "tool_choice": "auto" if case["tools"] else None, "chat_template_kwargs": {"thinking": case["thinking"]}},
        "prompt_tokens": len(case["prompt_ids"]),
        "history_tool_calls": sum(len(m.get("tool_calls") or []) for m in case["messages"] or [] if m.get("role") == "assistant"),
        "output_ids": case["output_ids"],
        "raw_text": case["raw_text"],
        "finished": case["finished"],
        "response": result.get("response"),
        "error": result.get("error"),
    }


def _write_rows(path: Path, build: str, cases: dict[str, dict[str, Any]], stdout: bytes, *, random: bool = False) -> list[dict[str, Any]]:
    """The rows of the fixed cases (``random`` False) or of the seeded random ones (tests/data/servers/random/)."""
    results = [json.loads(line) for line in stdout.decode("utf-8").splitlines() if line.startswith("{")]
    rows = [golden_row(build, cases[r["case_id"]], r) for r in results if (cases[r["case_id"]]["source"] == "random") == random]
    path.parent.mkdir(parents=True, exist_ok=True)
    text = "".join(json.dumps(row, ensure_ascii=False, sort_keys=True, separators=(",", ":")) + "\n" for row in rows)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)
    return rows


def drive_swapped(
    cache: Path, python: Path, out: Path, build: str, base: str, why: str, cases_path: Path, cases: dict[str, dict[str, Any]], env: dict[str, str]
) -> dict[str, Any]:
    """Drive ``build``'s Kimi parsers in ``base``'s tree; write the rows whose response or error differs from the base's."""
    driver = HERE / BUILDS[base][1]
    name = base.replace("==", "-") + ".jsonl"
    lines = (out / name).read_text(encoding="utf-8").splitlines() + (out / "random" / name).read_text(encoding="utf-8").splitlines()
    base_rows = {r["case_id"]: r for r in map(json.loads, lines)}
    failure = ""
    best: tuple[int, str, list[dict[str, Any]]] | None = None
    head = b"".join(cases_path.read_bytes().splitlines(keepends=True)[:2])

    def probe(tree: Path) -> subprocess.CompletedProcess[bytes]:
        return subprocess.run([str(python), str(driver), str(tree), build.split("==")[1]], input=head, capture_output=True, env=env, check=False)

    extras: dict[str, list[str]] = {}
    for mode in ("all", "kimi"):  # the mode that answers more rows without raising (every Kimi file first on a tie)
        source = swapped_tree(cache, build, base, mode)
        extras[mode] = repair_imports(cache, build, source, probe)
        with cases_path.open("rb") as stdin:
            proc = subprocess.run([str(python), str(driver), str(source), build.split("==")[1]], stdin=stdin, capture_output=True, env=env, check=False)
        results = [json.loads(line) for line in proc.stdout.decode("utf-8").splitlines() if line.startswith("{")]
        answered = sum(1 for r in results if "error" not in r) if proc.returncode == 0 else 0
        if answered and (best is None or answered > best[0]):
            best = (answered, mode, results)
        if not answered:
            tail = proc.stderr.decode("utf-8", "replace").strip().splitlines()[-1:] or [f"every one of {len(results)} rows raised"]
            failure += f"{mode}: {tail[0].replace(str(cache), '<cache>')[:300]}; "
    if best is None:
        return {"base": base, "why": why, "driven": False, "failure": failure.strip()}
    _, mode, results = best
    # Profiles the swap cannot drive: K3 when the release has no K3 parser (the server had no kimi_k3 then), and a
    # profile whose every row raises here but not in the base (the release's parser does not fit the base's manager).
    not_driven: dict[str, str] = {}
    if not _has_k3(_kimi_meta(cache, build)["parsers"]):
        not_driven["kimi-k3"] = "no K3 parser in this release"
    for profile in sorted({cases[r["case_id"]]["profile"] for r in results}):
        mine = [r for r in results if cases[r["case_id"]]["profile"] == profile]
        # (more than a third of a profile's rows raising where the base answers is the swap, not the server: a newer
        # parser's objects the base's protocol models refuse)
        raised = [r for r in mine if "error" in r and not base_rows[r["case_id"]]["error"]]
        if profile not in not_driven and raised and 3 * len(raised) > len(mine):
            not_driven[profile] = f"{raised[0]['error']['type']}: {raised[0]['error']['message'][:200]}"
    results = [r for r in results if cases[r["case_id"]]["profile"] not in not_driven]
    if not results:
        return {"base": base, "why": why, "driven": False, "failure": "; ".join(f"{k}: {v}" for k, v in not_driven.items())}
    rows = [golden_row(build, cases[r["case_id"]], r) for r in results]
    differ = [r for r in rows if r["case_id"] not in base_rows or (r["response"], r["error"]) != (base_rows[r["case_id"]]["response"], base_rows[r["case_id"]]["error"])]
    name = f"swapped/{build.replace('==', '-')}.jsonl"
    (out / "swapped").mkdir(exist_ok=True)
    text = "".join(json.dumps(row, ensure_ascii=False, sort_keys=True, separators=(",", ":")) + "\n" for row in differ)
    tmp = out / (name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(out / name)
    kinds: dict[str, int] = {}
    for row in differ:  # what behaves otherwise than in the base: the fixed cases' kinds, "random", "official"
        kind = row["source"] if row["source"] in ("random", "official") else row["loss"]
        kinds[f"{kind}/{row['profile']}"] = kinds.get(f"{kind}/{row['profile']}", 0) + 1
    return {"base": base, "why": why, "file": name, "rows": len(rows), "rows_differing": len(differ), "differs_on": dict(sorted(kinds.items())),
            "errors": sum(1 for r in rows if r["error"] is not None), "chat_assembly": f"{base}'s", "driven": True,
            "other_modules_swapped": extras[mode],
            "profiles_not_driven": not_driven,
            "swapped": "every Kimi file" if mode == "all" else "the Kimi-named files (the base's shared modules kept; Kimi classes grafted)"}  # fmt: skip


def generate(cache: Path, out: Path, builds: list[str], *, swap: bool = True) -> dict[str, Any]:
    python = venv_python(cache)
    cases_path = cache / "cases.jsonl"
    with cases_path.open("w", encoding="utf-8") as f:
        run([str(python), "-c", "import json,sys; sys.path.insert(0, sys.argv[1]); import cases\n"
             "for c in cases.all_cases(): print(json.dumps(c, ensure_ascii=False, sort_keys=True))", str(HERE)], stdout=f)  # fmt: skip
    cases = {c["case_id"]: c for c in map(json.loads, cases_path.read_text(encoding="utf-8").splitlines())}
    out.mkdir(parents=True, exist_ok=True)
    manifest: dict[str, Any] = {"command": COMMAND, "check": COMMAND + " --check", "builds": {}, "files": {}}
    if (out / "MANIFEST.json").exists():  # a run of some builds keeps the others' entries
        old = json.loads((out / "MANIFEST.json").read_text(encoding="utf-8"))
        for key in ("builds", "stream_builds", "spaced_builds", "swapped_builds"):
            manifest[key] = old.get(key, {})
    env = dict(os.environ, PYTHONHASHSEED="0", VLLM_LOGGING_LEVEL="ERROR", SGLANG_LOGGING_LEVEL="ERROR")
    for build in builds:
        wheel = fetch_wheel(cache, build)
        source = unpack(cache, build, wheel)
        driver = HERE / BUILDS[build][1]
        with cases_path.open("rb") as stdin:
            proc = subprocess.run([str(python), str(driver), str(source), build.split("==")[1]], stdin=stdin,
                                  capture_output=True, env=env, check=True)  # fmt: skip
        name = build.replace("==", "-") + ".jsonl"
        rows = _write_rows(out / name, build, cases, proc.stdout)
        random_rows = _write_rows(out / "random" / name, build, cases, proc.stdout, random=True)
        manifest["builds"][build] = {"wheel": wheel.name, "wheel_sha256": sha256(wheel), "rows": len(rows), "file": name,
                                     "random_rows": len(random_rows), "random_file": f"random/{name}"}  # fmt: skip
        if build in STREAM_BUILDS:
            fixed = "".join(json.dumps(c, ensure_ascii=False, sort_keys=True) + "\n" for c in cases.values() if c["source"] != "random")
            proc = subprocess.run([str(python), str(driver), str(source), build.split("==")[1], "--stream"], input=fixed.encode("utf-8"),
                                  capture_output=True, env=env, check=True)  # fmt: skip
            (out / "stream").mkdir(exist_ok=True)
            rows = _write_rows(out / "stream" / name, build, cases, proc.stdout)
            manifest.setdefault("stream_builds", {})[build] = {"rows": len(rows), "file": f"stream/{name}"}
        if build in SPACED_BUILDS:
            generated = "".join(json.dumps(c, ensure_ascii=False, sort_keys=True) + "\n" for c in cases.values() if c["source"] not in ("official", "random"))
            proc = subprocess.run([str(python), str(driver), str(source), build.split("==")[1], "--spaced"], input=generated.encode("utf-8"),
                                  capture_output=True, env=env, check=True)  # fmt: skip
            (out / "spaced").mkdir(exist_ok=True)
            rows = _write_rows(out / "spaced" / name, build, cases, proc.stdout)
            manifest.setdefault("spaced_builds", {})[build] = {"rows": len(rows), "file": f"spaced/{name}"}
    if swap:
        manifest["swapped_builds"] = {k: v for k, v in manifest.get("swapped_builds", {}).items() if v.get("base") not in builds}
        for build, base, why in swap_builds(cache):
            if base is None:
                manifest["swapped_builds"][build] = {"base": None, "why": why}
                continue
            if base not in builds:
                continue
            manifest["swapped_builds"][build] = drive_swapped(cache, python, out, build, base, why, cases_path, cases, env)
            if not manifest["swapped_builds"][build]["driven"]:
                (out / "swapped" / f"{build.replace('==', '-')}.jsonl").unlink(missing_ok=True)
    for path in sorted(out.rglob("*.jsonl")):
        manifest["files"][path.relative_to(out).as_posix()] = sha256(path)
    manifest["harness_venv"] = freeze(python)
    (out / "MANIFEST.json").write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return manifest


def check(cache: Path, builds: list[str]) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        fresh = Path(tmp)
        generate(cache, fresh, builds)
        status = 0
        names = {p.relative_to(fresh).as_posix() for p in fresh.rglob("*.jsonl")}
        if set(builds) == set(BUILDS):  # a full run also catches a committed file no build writes any more
            names |= {p.relative_to(OUT).as_posix() for p in OUT.rglob("*.jsonl")}
        for name in sorted(names):
            old = (OUT / name).read_text(encoding="utf-8").splitlines() if (OUT / name).exists() else []
            new = (fresh / name).read_text(encoding="utf-8").splitlines() if (fresh / name).exists() else []
            if old != new:
                status = 1
                diff = list(difflib.unified_diff(old, new, f"committed/{name}", f"regenerated/{name}", lineterm="", n=0))
                print(f"{name}: {len(diff)} diff lines", file=sys.stderr)
                print("\n".join(d[:400] for d in diff[:20]), file=sys.stderr)
        print("goldens match a fresh run" if status == 0 else f"goldens differ: run `{COMMAND}` and review", file=sys.stderr)
        return status


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true", help="regenerate into a temp dir and diff with tests/data/servers/")
    ap.add_argument("--cache", type=Path, default=DEFAULT_CACHE, help="wheels, unpacked sources and the harness venv (default %(default)s)")
    ap.add_argument("--build", action="append", choices=sorted(BUILDS), help="only this build (repeatable)")
    args = ap.parse_args()
    builds = args.build or list(BUILDS)
    if args.check:
        return check(args.cache, builds)
    manifest = generate(args.cache, OUT, builds)
    for build, info in manifest["builds"].items():
        print(f"{build}: {info['rows']} rows -> tests/data/servers/{info['file']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
