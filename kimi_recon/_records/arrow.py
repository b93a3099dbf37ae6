"""Records read from an Arrow table (a Hugging Face ``datasets`` batch or row, a Ray Data batch): what Arrow
did to their objects undone where that is exact, refused where it cannot be.

Arrow stores a column of objects with one struct type, made from every row: each object gets every key
any other object at that place had (null where it had none), its keys in the type's order rather than
its own, and each number the type of the widest (an int becomes a float when another row had a float
there). Nothing in the row shows which nulls, key orders and floats are the original's, so:

- ``messages``: a null is removed when the prompt renders to the same text with and without it (both
  are rendered when the prompt is, see :class:`ArrowMessages`); when the texts differ (``reasoning_content``
  null renders ``<think>None</think>`` in K2.5's template) the record is refused. A null a record the
  renderer accepts cannot hold (the null form fails to render) is taken for a filler.
- the response (``response``/``turn``/``message``): nulls are removed; reading a turn treats a null as
  a missing key (tests/test_arrow_batches.py checks the round trip through ``datasets``).
- tool-call arguments given as objects, in the messages or the response: the call's JSON is rendered
  as it is written, so a null, a float with no fraction or an object of two or more keys in it (its
  order) may not be the original's; such arguments are refused.
- ``tools``: :func:`kimi_recon.record_options.arrow_tools` (nulls where JSON Schema allows none removed).
- ``usage``: nulls removed (a null figure is one not reported); ``template_kwargs`` and ``tool_choice``
  objects holding a null are refused (a template may tell a null from a missing key).

Columns of JSON text are exact and are read as JSON; every refusal says to store the column that way.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..errors import InvalidInputError, InvalidInputTypeError

__all__ = ["ARROW_ADVICE", "ArrowMessages", "arrow_response", "arrow_value", "check_batch", "plain"]

#: The advice every refusal gives.
ARROW_ADVICE = "store this column as JSON text (a string column) so it survives the round trip"

#: Message keys whose value is never null: a null there is Arrow's.
_MESSAGE_NEVER_NULL = frozenset({"role"})


class ArrowMessages(list[Any]):
    """``messages`` read from an Arrow column, nulls removed (the list itself).

    ``with_nulls`` is the list as Arrow gave it and ``nulls`` the places of the removed nulls: the prompt
    renderer (:func:`kimi_recon._records.prompt._encode_prompt`) renders both and refuses the record when they
    differ. ``refusal`` is raised instead of rendering (tool-call arguments that cannot be read back).
    """

    with_nulls: list[Any]
    nulls: tuple[str, ...]
    refusal: InvalidInputError | None

    @classmethod
    def read(cls, messages: list[Any], field: str = "messages") -> ArrowMessages:
        nulls: list[str] = []
        refusal: InvalidInputError | None = None
        out = cls()
        for i, message in enumerate(messages):
            if not isinstance(message, Mapping):
                out.append(message)
                continue
            clean: dict[Any, Any] = {}
            for key, value in message.items():
                where = f"{field}[{i}].{key}"
                if value is None:
                    if key not in _MESSAGE_NEVER_NULL:
                        nulls.append(where)
                    continue
                try:
                    clean[key] = _tool_calls(value, where) if key == "tool_calls" else value
                except InvalidInputError as err:
                    refusal = refusal or err
                    clean[key] = value
            out.append(clean)
        out.with_nulls = [{k: v for k, v in m.items() if not (v is None and k in _MESSAGE_NEVER_NULL)} if isinstance(m, Mapping) else m for m in messages]
        out.nulls = tuple(nulls)
        out.refusal = refusal
        return out

    def ambiguity(self) -> InvalidInputError:
        """The refusal when the prompt renders differently with the nulls."""
        shown = ", ".join(self.nulls[:3]) + (" …" if len(self.nulls) > 3 else "")
        return InvalidInputError(
            f"went through Arrow, which fills every key another row had with null, and the prompt renders differently "
            f"with the nulls ({shown}) than without them, so what the original held cannot be told; {ARROW_ADVICE}",
            field="messages",
        )


def arrow_response(value: Any, field: str) -> Any:
    """A response read from an Arrow column: every null removed, tool-call arguments checked (see the module doc)."""
    return _without_nulls(value, field, 0)


def arrow_value(column: str, value: Any) -> Any:
    """``value`` of a batch column that held objects (not JSON text), read as Arrow gave it; other columns unchanged."""
    if column == "messages":
        return ArrowMessages.read(value) if isinstance(value, list) else value
    if column in ("response", "turn", "message"):
        return arrow_response(value, column)
    if column == "usage" and isinstance(value, Mapping):
        return {k: v for k, v in value.items() if v is not None}
    if column in ("template_kwargs", "tool_choice") and isinstance(value, Mapping) and _has_null(value):
        raise InvalidInputError(
            "is an object from an Arrow column and holds a null, which may be Arrow's (it fills every key another "
            f"row had) or the original's; {ARROW_ADVICE}",
            field=column,
        )
    return value


def _without_nulls(value: Any, where: str, depth: int) -> Any:
    if depth > 100:  # a response is a few levels deep; deeper is left for the turn reader to refuse
        return value
    if isinstance(value, Mapping):
        out: dict[Any, Any] = {}
        for key, item in value.items():
            if item is None:
                continue
            if key == "tool_calls":
                out[key] = _tool_calls(item, f"{where}.{key}")
            else:
                out[key] = _without_nulls(item, f"{where}.{key}", depth + 1)
        return out
    if isinstance(value, list):
        return [_without_nulls(item, f"{where}[{i}]", depth + 1) for i, item in enumerate(value)]
    return value


def _tool_calls(calls: Any, where: str) -> Any:
    """Tool calls without Arrow's nulls; arguments given as an object are refused where they may have changed."""
    if not isinstance(calls, list):
        return calls
    out: list[Any] = []
    for i, call in enumerate(calls):
        if not isinstance(call, Mapping):
            out.append(call)
            continue
        clean = {k: v for k, v in call.items() if v is not None}
        function = clean.get("function")
        if isinstance(function, Mapping):
            function = {k: v for k, v in function.items() if v is not None}
            arguments = function.get("arguments")
            if not isinstance(arguments, (str, bytes)) and arguments is not None:
                problem = _argument_problem(arguments)
                if problem is not None:
                    raise InvalidInputError(
                        f"is an object read from an Arrow column, which {problem}, so the JSON the model wrote cannot "
                        f"be told; {ARROW_ADVICE} (the arguments as the model's JSON string)",
                        field=f"{where}[{i}].function.arguments",
                    )
            clean["function"] = function
        out.append(clean)
    return out


def _argument_problem(value: Any) -> str | None:
    """Why arguments read from Arrow may not be the original's, or None when they cannot have changed."""
    if _has_null(value):
        return "fills every key another row had with null"
    if _any(value, lambda v: isinstance(v, float) and v.is_integer()):
        return "makes an integer a float when another row had a float there"
    if _any(value, lambda v: isinstance(v, Mapping) and len(v) > 1):
        return "orders every object's keys as the first row did"
    return None


def _any(value: Any, test: Any, depth: int = 0) -> bool:
    """``test`` holds for ``value`` or anything inside it (past 100 levels: assumed to)."""
    if depth > 100 or test(value):
        return True
    items = value.values() if isinstance(value, Mapping) else value if isinstance(value, list) else ()
    return any(_any(v, test, depth + 1) for v in items)


def _has_null(value: Any, depth: int = 0) -> bool:
    if depth > 100:
        return True
    if isinstance(value, Mapping):
        return any(v is None or _has_null(v, depth + 1) for v in value.values())
    if isinstance(value, list):
        return any(_has_null(v, depth + 1) for v in value)
    return False


def plain(value: Any) -> Any:
    """``value`` with numpy arrays and scalars (how Ray hands over columns) made Python objects."""
    try:
        return _plain(value)
    except RecursionError:
        raise InvalidInputError("is nested too deeply to read", field="record") from None


def _plain(value: Any) -> Any:
    """``value`` with numpy arrays and scalars (how Ray hands over columns) made Python objects."""
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, (str, bytes, int, float, bool)) or value is None:
        return value
    tolist = getattr(value, "tolist", None)  # numpy ndarray or scalar; no numpy import needed
    return _plain(tolist()) if callable(tolist) else value


def check_batch(batch: object) -> tuple[list[str], int]:
    """The columns of a batch and its row count; raises :class:`InvalidInputError` unless ``batch`` maps
    column names to sequences of one length."""
    if not isinstance(batch, Mapping):
        raise InvalidInputTypeError(f"must map column names to equal-length sequences, got {type(batch).__name__}", field="batch")
    columns = list(batch)
    lengths: dict[str, int] = {}
    for column in columns:
        values = batch[column]
        if isinstance(values, (str, bytes, Mapping)) or not hasattr(values, "__len__") or not hasattr(values, "__getitem__"):
            raise InvalidInputTypeError(f"must be a sequence of values (a column), got {type(values).__name__}", field=str(column))
        lengths[str(column)] = len(values)
    if len(set(lengths.values())) > 1:
        shown = ", ".join(f"{c}: {n}" for c, n in list(lengths.items())[:4])
        raise InvalidInputError(f"columns differ in length ({shown}); every column needs one value per row", field="batch")
    return columns, next(iter(lengths.values()), 0)
