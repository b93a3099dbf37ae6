"""The Kimi files of a vLLM or SGLang release, read out of its PyPI wheel without downloading the wheel.

A wheel is a zip: its end-of-central-directory record, its central directory and each member's local header and
data sit at known offsets, so :class:`RangeFile` (a seekable file object that reads by HTTP range requests) lets
``zipfile.ZipFile`` open a remote wheel and read a few members for a few hundred kB instead of 0.3-1 GB.

*Kimi files* are what turns Kimi's raw text into a chat-completion message: the Kimi tool-call and reasoning
parsers (K2 and K3), the parser modules they import from their own packages (not the registries), and the chat
serving module that assembles the message. Each is keyed by the hash of its code (the AST: comments and
formatting changes do not split a release range); in a file many parsers share (SGLang's reasoning_parser.py)
only the Kimi classes and their bases in that file count.
"""

from __future__ import annotations

import ast
import hashlib
import io
import json
import re
import time
import urllib.error
import urllib.parse
import urllib.request
import zipfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

USER_AGENT = "kimi-recon server_builds (range reads of wheel members)"

#: family -> regexes of the Kimi parser files (matched against wheel member names)
PARSER_FILES: Mapping[str, tuple[str, ...]] = {
    "vllm": (
        r"vllm/(entrypoints/openai/)?tool_parsers/kimi\w*\.py",
        r"vllm/reasoning/kimi\w*\.py",
        r"vllm/parser/kimi\w*\.py",
    ),
    "sglang": (
        r"sglang/srt/function_call/kimi\w*\.py",
    ),
}
#: family -> the chat serving modules that assemble the message (the first that exists is the one)
ASSEMBLY_FILES: Mapping[str, tuple[str, ...]] = {
    "vllm": ("vllm/entrypoints/openai/chat_completion/serving.py", "vllm/entrypoints/openai/serving_chat.py"),
    "sglang": ("sglang/srt/entrypoints/openai/serving_chat.py", "sglang/srt/openai_api/adapter.py"),
}
#: family -> module prefixes whose modules a Kimi file imports are Kimi files too (parser code)
FOLLOW_IMPORTS: Mapping[str, tuple[str, ...]] = {
    "vllm": ("vllm.parser.", "vllm.reasoning.", "vllm.tool_parsers.", "vllm.entrypoints.openai.tool_parsers."),
    "sglang": ("sglang.srt.function_call.", "sglang.srt.parser.reasoning_parser", "sglang.srt.reasoning_parser"),
}
#: modules never followed: registries and managers that change with every parser added to the server
NOT_FOLLOWED = re.compile(r"(^|\.)(__init__|parser_manager|function_call_parser|abstract_tool_parser_manager|core_types|utils)$")
#: family -> files every Kimi reasoning parser of the release lives in, among other makers' parsers: only their
#: Kimi classes count (and the classes those derive from in the file)
SHARED_REASONING: Mapping[str, tuple[str, ...]] = {
    "vllm": (),
    "sglang": ("sglang/srt/parser/reasoning_parser.py", "sglang/srt/reasoning_parser.py"),
}
SHARED_KEEP = re.compile(r"kimi", re.IGNORECASE)
#: what a module other than a Kimi file may import and still be followed in a parser folder: the bases and engines
#: parsers share, not another maker's parser (a registry module imports every one of them)
INFRA = re.compile(r"(abs|abstract|base|basic|identity|streaming|incremental|events|parser_engine|token_id_scanner|adapters|structural_tag|tool_strict_level)\w*")


class RangeFile(io.RawIOBase):
    """A read-only, seekable file over HTTP range requests, read in blocks (each block fetched once)."""

    BLOCK = 1 << 16

    def __init__(self, url: str, size: int | None = None) -> None:
        self.url = url
        self.pos = 0
        self.blocks: dict[int, bytes] = {}
        self.requests = 0
        self.bytes_read = 0
        self.size = size if size is not None else self._head_size()

    def _head_size(self) -> int:
        req = urllib.request.Request(self.url, method="HEAD", headers={"User-Agent": USER_AGENT})
        with _open(req) as resp:
            return int(resp.headers["Content-Length"])

    def _fetch(self, start: int, end: int) -> bytes:
        req = urllib.request.Request(self.url, headers={"Range": f"bytes={start}-{end - 1}", "User-Agent": USER_AGENT})
        with _open(req) as resp:
            if resp.status != 206:
                raise OSError(f"{self.url}: range request answered {resp.status}, not 206")
            data: bytes = resp.read()
        self.requests += 1
        self.bytes_read += len(data)
        if len(data) != end - start:
            raise OSError(f"{self.url}: asked {end - start} bytes at {start}, got {len(data)}")
        return data

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self.pos, io.SEEK_END: self.size}[whence]
        self.pos = max(0, base + offset)
        return self.pos

    def read(self, n: int | None = -1) -> bytes:
        if n is None or n < 0:
            n = self.size - self.pos
        n = max(0, min(n, self.size - self.pos))
        if n == 0:
            return b""
        first, last = self.pos // self.BLOCK, (self.pos + n - 1) // self.BLOCK
        missing = [b for b in range(first, last + 1) if b not in self.blocks]
        if missing:  # one request for the whole missing run (a central directory is read in one piece)
            start, end = missing[0] * self.BLOCK, min(self.size, (missing[-1] + 1) * self.BLOCK)
            data = self._fetch(start, end)
            for b in range(missing[0], missing[-1] + 1):
                self.blocks[b] = data[(b - missing[0]) * self.BLOCK : (b - missing[0] + 1) * self.BLOCK]
        joined = b"".join(self.blocks[b] for b in range(first, last + 1))
        offset = self.pos - first * self.BLOCK
        out = joined[offset : offset + n]
        self.pos += len(out)
        return out

    def readinto(self, buffer: Any) -> int:
        data = self.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)


def _open(req: urllib.request.Request) -> Any:
    for attempt in range(4):
        try:
            return urllib.request.urlopen(req, timeout=60)
        except (urllib.error.URLError, TimeoutError, ConnectionError):
            if attempt == 3:
                raise
            time.sleep(2**attempt)
    raise AssertionError("unreachable")


def pypi_releases(family: str) -> dict[str, list[dict[str, Any]]]:
    """``{version: [file entries]}`` from PyPI's JSON API."""
    url = f"https://pypi.org/pypi/{family}/json"
    req = urllib.request.Request(url, headers={"User-Agent": USER_AGENT})
    with _open(req) as resp:
        data = json.loads(resp.read())
    releases: dict[str, list[dict[str, Any]]] = data["releases"]
    for files in releases.values():  # (a mirror may answer with file URLs relative to the JSON's)
        for f in files:
            f["url"] = urllib.parse.urljoin(url, f["url"])
    return releases


def pick_wheel(files: Iterable[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """One wheel of a release (the Python sources are the same in each): x86_64 Linux or pure Python first."""
    wheels = [f for f in files if f.get("packagetype") == "bdist_wheel"]

    def rank(f: Mapping[str, Any]) -> tuple[int, str]:
        name = str(f["filename"])
        return (0 if "x86_64" in name or name.endswith("-none-any.whl") else 1, name)

    return min(wheels, key=rank) if wheels else None


def member_names(names: Iterable[str], family: str) -> tuple[list[str], str | None]:
    """The Kimi parser files among a wheel's member names, and its chat assembly file (or None)."""
    names = list(names)
    patterns = [re.compile(p) for p in PARSER_FILES[family]]
    parsers = sorted(n for n in names if any(p.fullmatch(n) for p in patterns))
    present = set(names)
    assembly = next((a for a in ASSEMBLY_FILES[family] if a in present), None)
    return parsers, assembly


def imported_modules(source: str, module: str) -> list[str]:
    """The absolute names of the modules ``source`` (module ``module``) imports, relative imports resolved."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    package = module.rsplit(".", 1)[0]
    out: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                parts = parts[: len(parts) - (node.level - 1)]
                base = ".".join([*parts, base] if base else parts)
            out.append(base)
            out += [f"{base}.{a.name}" for a in node.names]  # (from pkg import module)
    return out


def module_path(module: str) -> str:
    return module.replace(".", "/") + ".py"


def follow(module: str, family: str) -> bool:
    return any(module.startswith(p) or module == p for p in FOLLOW_IMPORTS[family]) and not NOT_FOLLOWED.search(module)


def code_hash(path: str, source: bytes, family: str, *, whole: bool = False) -> str:
    """sha256 (first 16 hex) of the code's AST, without docstrings; only the Kimi classes of a shared file."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return "raw:" + hashlib.sha256(source).hexdigest()[:16]
    if not whole and not is_kimi_file(path, family) and any(_binds_kimi(n) for n in tree.body):
        tree.body = _kimi_statements(tree)
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and body:
            first = body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
                node.body = body[1:] or [ast.Pass()]
    return hashlib.sha256(ast.dump(tree).encode("utf-8")).hexdigest()[:16]


def is_kimi_file(path: str, family: str) -> bool:
    return any(re.fullmatch(p, path) for p in PARSER_FILES[family])


def _bound_names(node: ast.stmt) -> list[str]:
    if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
        return [node.name]
    targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
    return [n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)]


def _binds_kimi(node: ast.stmt) -> bool:
    return any(SHARED_KEEP.search(name) for name in _bound_names(node))


def _kimi_statements(tree: ast.Module) -> list[ast.stmt]:
    """In a module other makers' parsers share: the top-level classes that name Kimi (not a registry's mapping of
    every parser), the classes they derive from there, and the other top-level statements that name Kimi."""
    classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
    keep = {name for name in classes if SHARED_KEEP.search(name)}
    todo = list(keep)
    while todo:
        for base in classes[todo.pop()].bases:
            if isinstance(base, ast.Name) and base.id in classes and base.id not in keep:
                keep.add(base.id)
                todo.append(base.id)
    out: list[ast.stmt] = []
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            if node.name in keep:
                out.append(node)
        elif _binds_kimi(node):
            out.append(node)
    return out


@dataclass(frozen=True)
class KimiFiles:
    """A release's Kimi files: ``{path: code hash}`` of the parsers, the assembly file and its hash."""

    parsers: Mapping[str, str]
    assembly: str | None
    assembly_hash: str | None

    @property
    def parser_key(self) -> str:
        """One hash of every Kimi parser file (path and code): releases with the same key parse Kimi text alike."""
        blob = json.dumps(sorted(self.parsers.items())).encode("utf-8")
        return hashlib.sha256(blob).hexdigest()[:16]


def read_kimi_files(zf: zipfile.ZipFile, family: str, out: Path) -> None:
    """Write the Kimi files of an open wheel under ``out`` (its member paths), then ``KIMI_FILES.json`` last."""
    names = zf.namelist()
    present = set(names)
    parsers, assembly = member_names(names, family)
    shared = [p for p in SHARED_REASONING[family] if p in present]
    todo = [*parsers, *shared]
    kimi_dirs = {p.rsplit("/", 1)[0] for p in todo}
    seen: set[str] = set()
    sources: dict[str, bytes] = {}
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        data = zf.read(path)
        sources[path] = data
        module = path.removesuffix(".py").replace("/", ".")
        for imported in imported_modules(data.decode("utf-8", "replace"), module):
            candidate = module_path(imported)
            if follow(imported, family) and candidate in present and candidate not in seen:
                # another maker's parser beside the Kimi ones is followed only from a Kimi file (K2's reasoning
                # parser derived from DeepSeek R1's), never from a shared module that imports them all
                sibling = candidate.rsplit("/", 1)[0] in kimi_dirs and not INFRA.fullmatch(candidate.rsplit("/", 1)[1][:-3])
                if is_kimi_file(path, family) or not sibling:
                    todo.append(candidate)
    if assembly is not None:
        sources[assembly] = zf.read(assembly)
    for path, data in sources.items():
        target = out / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    meta = {"parsers": sorted(set(sources) - {assembly}), "assembly": assembly}
    tmp = out / "KIMI_FILES.json.tmp"
    tmp.write_text(json.dumps(meta, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    tmp.replace(out / "KIMI_FILES.json")


def load_kimi_files(directory: Path, family: str) -> KimiFiles:
    """The hashes of the Kimi files cached in ``directory`` by :func:`read_kimi_files`."""
    meta = json.loads((directory / "KIMI_FILES.json").read_text(encoding="utf-8"))
    parsers = {p: code_hash(p, (directory / p).read_bytes(), family) for p in meta["parsers"]}
    assembly = meta["assembly"]
    assembly_hash = code_hash(assembly, (directory / assembly).read_bytes(), family, whole=True) if assembly else None
    return KimiFiles(parsers, assembly, assembly_hash)
