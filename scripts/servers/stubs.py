"""Import a server's own parser modules from an unpacked wheel with its engine imports stubbed.

The parsers under test live in packages (vllm, sglang) whose import graphs reach torch, CUDA kernels,
fastapi and the engine. None of that runs in the code we drive, so every module the harness venv cannot
import is replaced by a permissive stub: attribute access, calls, subscripts and subclassing all succeed
and do nothing. The server's own modules load from its wheel's real source, so the parsing and
message-assembly code that runs is theirs, byte for byte. torch is never installed nor imported.
"""

from __future__ import annotations

import abc
import importlib.abc
import importlib.machinery
import importlib.util
import os
import random
import sys
import types
import uuid
from collections.abc import Callable, Sequence
from typing import Any

_STUB_MODULE = "kimi_recon_stub"


def seeded_uuid4(seed: str) -> Callable[[], uuid.UUID]:
    """A stand-in for ``uuid.uuid4`` drawing from its own generator seeded by ``seed`` (a case id), so the
    ids a server issues come out the same on every run and --check can diff them."""
    rng = random.Random(seed)
    return lambda: uuid.UUID(int=rng.getrandbits(128), version=4)

#: Accelerator plugins the servers probe for (`find_spec("torch_npu")`) to pick a platform: they must stay
#: absent, or the server takes this machine for an NPU/TPU/XPU host and raises.
ABSENT = frozenset(
    {"torch_npu", "torch_xla", "torch_musa", "torch_mlu", "habana_frameworks", "intel_extension_for_pytorch",
     "tpu_inference", "libtpu", "mindspore", "vllm_ascend", "amdsmi", "torchada"}
)
#: The same probe on torch itself (`hasattr(torch, "npu")`).
ABSENT_TORCH_BACKENDS = frozenset({"npu", "musa", "mlu", "hpu"})


class _AnyMeta(abc.ABCMeta):
    """Metaclass of the stub value: every attribute is another stub class."""

    def __new__(mcs, name: str, bases: tuple[type, ...], namespace: dict[str, Any], **kwargs: Any) -> Any:
        # Class keywords (`class P(msgspec.Struct, omit_defaults=True)`) are for the real base.
        return super().__new__(mcs, name, bases, namespace)

    def __init__(cls, name: str, bases: tuple[type, ...], namespace: dict[str, Any], **kwargs: Any) -> None:
        super().__init__(name, bases, namespace)

    def __getattr__(cls, name: str) -> Any:
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return _new_any(f"{cls.__name__}.{name}")

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        if cls.__module__ != _STUB_MODULE:
            # A real class of the server that derives from a stub (`class Op(nn.Module)`) instantiates.
            return super().__call__(*args, **kwargs)
        # A decorator stub (`@torch.inference_mode()`, `@triton.jit`) hands the function back.
        if len(args) == 1 and not kwargs and callable(args[0]) and not isinstance(args[0], _AnyMeta):
            return args[0]
        return _new_any(cls.__name__ + "()")

    def __get_pydantic_core_schema__(cls, source: Any, handler: Any) -> Any:
        # A stub type in a server's pydantic model (an engine class as a field type) accepts anything.
        from pydantic_core import core_schema

        return core_schema.any_schema()

    def __getitem__(cls, item: Any) -> Any:
        return cls

    def register(cls, *args: Any, **kwargs: Any) -> Any:
        # `AutoConfig.register(name, Config)` on a stub; ABCMeta's own register takes one class.
        return args[-1] if args else None

    def __setitem__(cls, item: Any, value: Any) -> None:
        return None

    def __delitem__(cls, item: Any) -> None:
        return None

    def __or__(cls, other: Any) -> Any:
        return cls

    def __ror__(cls, other: Any) -> Any:
        return cls

    def __iter__(cls) -> Any:
        return iter(())

    def __len__(cls) -> int:
        return 0

    def __bool__(cls) -> bool:
        return False

    def __int__(cls) -> int:
        return 0

    def __index__(cls) -> int:
        return 0

    def __float__(cls) -> float:
        return 0.0

    def __contains__(cls, item: Any) -> bool:
        return False

    def __enter__(cls) -> Any:
        return cls

    def __exit__(cls, *exc: Any) -> None:
        return None

    def __lt__(cls, other: Any) -> bool:
        return False

    __le__ = __gt__ = __ge__ = __lt__

    def __add__(cls, other: Any) -> Any:
        return cls

    __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __truediv__ = __mod__ = __add__


def _new_any(name: str) -> Any:
    return _AnyMeta(name, (), {"__module__": _STUB_MODULE})


class StubModule(types.ModuleType):
    """A module whose every attribute is a stub; also a package, so submodules import too."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.__path__: list[str] = []
        self.__file__ = f"<stub {name}>"
        # Version gates (`parse(torch.__version__) >= ...`) read this; a recent release keeps them quiet.
        self.__version__ = "2.9.0"

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        if self.__name__ == "torch" and name in ABSENT_TORCH_BACKENDS:
            raise AttributeError(name)
        value = _new_any(f"{self.__name__}.{name}")
        setattr(self, name, value)
        return value


class _StubLoader(importlib.abc.Loader):
    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        return StubModule(spec.name)

    def exec_module(self, module: types.ModuleType) -> None:
        return None


class StubFinder(importlib.abc.MetaPathFinder):
    """Last on sys.meta_path: whatever no real finder can import becomes a stub.

    `forced` names (and their submodules) are stubbed even where a real file exists: the server's engine
    modules that would otherwise pull in half the server at import time.
    """

    def __init__(self, forced: Sequence[str] = ()) -> None:
        self.forced = tuple(forced)
        self.stubbed: set[str] = set()

    def _is_forced(self, fullname: str) -> bool:
        return any(fullname == f or fullname.startswith(f + ".") for f in self.forced)

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        top, _, _ = fullname.partition(".")
        if not self._is_forced(fullname):
            if "." in fullname:
                # A missing submodule of a real package is a real ImportError (`from regex import X`
                # probes `regex.X`); only submodules of stubs are stubs.
                parent = sys.modules.get(fullname.rpartition(".")[0])
                if not isinstance(parent, StubModule):
                    return None
            elif top in sys.stdlib_module_names or top in ABSENT:
                # Platform probes (`_winapi`, `msvcrt`) must keep failing as they do without us.
                return None
        self.stubbed.add(fullname)
        return importlib.machinery.ModuleSpec(fullname, _StubLoader(), is_package=True)


class _BarePackageLoader(importlib.abc.Loader):
    """A server package whose `__init__.py` is not run: its submodules load from their real files."""

    def __init__(self, directory: str) -> None:
        self.directory = directory

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        module = types.ModuleType(spec.name)
        module.__path__ = [self.directory]
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        return None


class ServerSourceFinder(importlib.abc.MetaPathFinder):
    """First on sys.meta_path: the server's own modules from the unpacked wheel.

    Packages run their real `__init__.py` except those named in `bare` (created empty, because their
    `__init__` imports the engine); plain modules run their real source; names in `forced` become stubs.
    """

    def __init__(self, source_root: str, top: str, stub_finder: StubFinder, bare: Sequence[str]) -> None:
        self.source_root = source_root
        self.top = top
        self.stub_finder = stub_finder
        self.bare = set(bare)

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if self.stub_finder._is_forced(fullname):
            return self.stub_finder.find_spec(fullname, path, target)
        if fullname.split(".")[0] != self.top:
            return None
        base = os.path.join(self.source_root, *fullname.split("."))
        if os.path.isdir(base):
            if fullname not in self.bare and os.path.exists(os.path.join(base, "__init__.py")):
                return importlib.util.spec_from_file_location(
                    fullname, os.path.join(base, "__init__.py"), submodule_search_locations=[base]
                )
            return importlib.machinery.ModuleSpec(fullname, _BarePackageLoader(base), is_package=True)
        if os.path.exists(base + ".py"):
            return importlib.util.spec_from_file_location(fullname, base + ".py")
        return self.stub_finder.find_spec(fullname, path, target)


def assert_no_real_torch() -> None:
    """The harness's promise: torch, if present at all, is a stub."""
    torch = sys.modules.get("torch")
    if torch is not None and not isinstance(torch, StubModule):
        raise RuntimeError("a real torch was imported; the harness must run without it")


def install(source_root: str, top: str, forced: Sequence[str] = (), bare: Sequence[str] = ()) -> StubFinder:
    """Serve `top` from the unpacked wheel and stub whatever else this venv cannot import."""
    finder = StubFinder(forced)
    sys.meta_path.insert(0, ServerSourceFinder(source_root, top, finder, bare))
    sys.meta_path.append(finder)
    return finder
