"""Drive one vLLM build's own non-streaming chat-completion code over raw Kimi outputs.

Run in the harness venv (no torch): ``python drive_vllm.py SOURCE_ROOT VERSION < cases.jsonl > out.jsonl``.
For every case the server's chat handler (``OpenAIServingChat.chat_completion_full_generator``) gets
an engine result holding the case's true output ids and the text vLLM's detokenizer makes of them; the
parser classes are the ones the server picks for ``--tool-call-parser kimi_k2 --reasoning-parser kimi_k2``
(``kimi_k3`` for K3), and ``adjust_request`` runs as the server runs it before generation.
"""

from __future__ import annotations

import asyncio
import json
import sys
import types
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import stubs

SOURCE_ROOT, VERSION = sys.argv[1], sys.argv[2]
STREAM = "--stream" in sys.argv[3:]
#: vLLM's own slow incremental detokenizer with ``spaces_between_special_tokens`` on (its default): the
#: text a deployment of Kimi's slow (tiktoken) tokenizer gives the parsers unless the request turns it off
SPACED = "--spaced" in sys.argv[3:]
stubs.install(SOURCE_ROOT, "vllm", forced=["torch", "vllm.utils.torch_version", "vllm.utils.torch_utils", "vllm.env_override", "vllm.compilation"])

# (E402 below: these modules import the server, which must find the stubs installed above)
from cases import request_body  # noqa: E402
from detok import server_text  # noqa: E402
from tokenizer_shim import KimiHFTokenizerShim  # noqa: E402

NEW_LAYOUT = Path(SOURCE_ROOT, "vllm/parser/parser_manager.py").exists()

from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest  # noqa: E402
from vllm.entrypoints.openai.chat_completion.serving import OpenAIServingChat  # noqa: E402

if NEW_LAYOUT:
    from vllm.entrypoints.generate.base.protocol import RequestResponseMetadata
    from vllm.parser.parser_manager import ParserManager
else:
    from vllm.entrypoints.openai.engine.protocol import RequestResponseMetadata
    from vllm.reasoning import ReasoningParserManager
    from vllm.tool_parsers import ToolParserManager


class _Record(types.SimpleNamespace):
    """An engine result: the fields the handler reads are set; any other reads as absent (None)."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return None


class _Serving(OpenAIServingChat):  # type: ignore[misc]
    """The server's chat handler without its engine: an unset option reads as off (None)."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return None


PARSER_NAMES = {
    # profile -> (tool parser, reasoning parser) as Moonshot's deployment guides name them
    "kimi-k2.5": ("kimi_k2", "kimi_k2"),
    "kimi-k2-thinking": ("kimi_k2", "kimi_k2"),
    "kimi-k2-instruct": ("kimi_k2", None),
    "kimi-k3": ("kimi_k3", "kimi_k3"),
}
MODEL_TYPE = {"kimi-k2.5": "kimi_k25", "kimi-k2-thinking": "kimi_k2", "kimi-k2-instruct": "kimi_k2", "kimi-k3": "kimi_k3"}

_TOKENIZERS: dict[str, KimiHFTokenizerShim] = {}


def _tokenizer(profile: str) -> KimiHFTokenizerShim:
    key = "kimi-k3" if profile == "kimi-k3" else "kimi-k2.5"
    if key not in _TOKENIZERS:
        _TOKENIZERS[key] = KimiHFTokenizerShim(key)
    return _TOKENIZERS[key]


def _model_config(profile: str) -> Any:
    return types.SimpleNamespace(
        model="moonshotai/kimi",
        hf_config=types.SimpleNamespace(model_type=MODEL_TYPE[profile]),
        get_diff_sampling_param=lambda: {},
    )


def supports(profile: str) -> bool:
    tool_name, _ = PARSER_NAMES[profile]
    if NEW_LAYOUT:
        return True
    from vllm.tool_parsers import ToolParserManager as TPM

    try:
        TPM.get_tool_parser(tool_name)
    except KeyError:
        return False
    return True


def _serving(profile: str, tok: KimiHFTokenizerShim) -> _Serving:
    tool_name, reasoning_name = PARSER_NAMES[profile]
    srv = object.__new__(_Serving)
    srv.model_config = _model_config(profile)
    srv.enable_auto_tools = True
    srv.response_role = "assistant"
    srv.default_chat_template_kwargs = {}
    srv.enable_prompt_tokens_details = False
    srv.enable_log_outputs = False
    srv.enable_per_request_metrics = False
    srv.request_logger = None
    srv.system_fingerprint = None
    srv.use_harmony = False
    if NEW_LAYOUT:
        srv._include_reasoning_tokens_details = bool(reasoning_name)
        srv.parser_cls = ParserManager.get_parser(
            tool_parser_name=tool_name,
            reasoning_parser_name=reasoning_name,
            enable_auto_tools=True,
            tool_strict_level=None,
            model_name="moonshotai/kimi",
            is_harmony=False,
            tokenizer=tok,
        )
    else:
        srv.tool_parser = ToolParserManager.get_tool_parser(tool_name)
        srv.reasoning_parser = ReasoningParserManager.get_reasoning_parser(reasoning_name) if reasoning_name else None
        srv.tool_call_id_type = "kimi_k2" if MODEL_TYPE[profile] == "kimi_k2" else "random"
    return srv


def _request(case: dict[str, Any]) -> Any:
    return ChatCompletionRequest(**request_body(case))


def vllm_detokenize(tok: KimiHFTokenizerShim, case: dict[str, Any], *, skip_special_tokens: bool, spaces_between_special_tokens: bool) -> str:
    """The output text by vLLM's ``SlowIncrementalDetokenizer``, one token at a time as the engine feeds it."""
    from vllm.v1.engine.detokenizer import SlowIncrementalDetokenizer

    params = _Record(skip_special_tokens=skip_special_tokens, spaces_between_special_tokens=spaces_between_special_tokens,
                     stop=[], min_tokens=0, include_stop_str_in_output=False)  # fmt: skip
    request = _Record(sampling_params=params, prompt_token_ids=list(case["prompt_ids"]), prompt_embeds=None, request_id="harness")
    detok = SlowIncrementalDetokenizer(tok, request)
    ids = list(case["output_ids"])
    for n, token_id in enumerate(ids):
        detok.update([token_id], stop_terminated=case["finished"] and n == len(ids) - 1)
    return str(detok.get_next_output_text(finished=True, delta=False))


def respond(case: dict[str, Any]) -> dict[str, Any]:
    profile = case["profile"]
    tok = _tokenizer(profile)
    srv = _serving(profile, tok)
    request = _request(case)
    ctk = {"thinking": case["thinking"]}
    parser = None
    if NEW_LAYOUT:
        parser = srv._make_parser(request, tok, ctk)
        parser.set_prompt_token_ids(case["prompt_ids"])
        request = parser.adjust_request(request=request)
    elif request.tools and request.tool_choice != "none":
        request = srv.tool_parser(tok).adjust_request(request=request)
    skip = bool(request.skip_special_tokens)
    if SPACED:
        spaces = bool(getattr(request, "spaces_between_special_tokens", True))
        text = vllm_detokenize(tok, case, skip_special_tokens=skip, spaces_between_special_tokens=spaces)
    else:
        text = server_text(tok, case["output_ids"], case["finished"], skip_special_tokens=skip)
    output = _Record(
        index=0,
        text=text,
        token_ids=list(case["output_ids"]),
        logprobs=None,
        finish_reason="stop" if case["finished"] else "length",
        stop_reason=None,
        routed_experts=None,
        weight_versions=None,
        cumulative_logprob=None,
    )
    final = _Record(
        outputs=[output],
        prompt_token_ids=list(case["prompt_ids"]),
        encoder_prompt_token_ids=None,
        num_cached_tokens=0,
        num_cache_creation_tokens=0,
        prompt_logprobs=None,
        kv_transfer_params=None,
        ec_transfer_params=None,
        metrics=None,
        prompt=None,
    )

    async def results() -> Any:
        yield final

    metadata = RequestResponseMetadata(request_id="chatcmpl-harness")
    conversation = list(request.messages)
    args: dict[str, Any] = {}
    if NEW_LAYOUT:
        args["parser"] = parser
    response = asyncio.run(
        srv.chat_completion_full_generator(request, results(), "chatcmpl-harness", "moonshotai/kimi", conversation, tok, metadata, **args)
    )
    if not hasattr(response, "choices"):
        return {"error": response.model_dump(exclude_none=True)}
    out = response.model_dump(exclude_none=True)
    out.pop("created", None)
    return {"response": out, "server_text": text}


def _text_deltas(tok: KimiHFTokenizerShim, ids: list[int], finished: bool, skip: bool) -> list[str]:
    """Per generated token, the text the detokenizer adds: bytes held back until they form whole
    characters, the stop token's text skipped (its id is still delivered)."""
    deltas, pending = [], b""
    for n, token_id in enumerate(ids):
        if (finished and n == len(ids) - 1) or (skip and tok.is_flagged_special(token_id)):
            deltas.append("")
            continue
        pending += tok.kimi.decode_bytes([token_id])
        text = pending.decode("utf-8", errors="ignore")
        try:
            pending.decode("utf-8")
            pending = b""
        except UnicodeDecodeError as err:
            text, pending = pending[: err.start].decode("utf-8"), pending[err.start :]
        deltas.append(text)
    return deltas


def respond_stream(case: dict[str, Any]) -> dict[str, Any]:
    """The streaming path: the server's parser fed one token at a time (``parse_delta``) and the deltas
    accumulated as an OpenAI client does (content and reasoning joined, tool calls merged by index)."""
    from vllm.entrypoints.serve.utils.tool_calls_utils import resolve_finish_reason

    profile = case["profile"]
    tok = _tokenizer(profile)
    srv = _serving(profile, tok)
    request = _request(case)
    parser = srv._make_parser(request, tok, {"thinking": case["thinking"]})
    parser.set_prompt_token_ids(case["prompt_ids"])
    request = parser.adjust_request(request=request)
    ids = list(case["output_ids"])
    message: dict[str, Any] = {"role": "assistant"}
    calls: dict[int, dict[str, Any]] = {}
    for n, (token_id, text) in enumerate(zip(ids, _text_deltas(tok, ids, case["finished"], bool(request.skip_special_tokens)), strict=True)):
        delta = parser.parse_delta(text, [token_id], request, case["prompt_ids"] if n == 0 else None, finished=n == len(ids) - 1)
        if delta is None:
            continue
        for name in ("content", "reasoning"):
            piece = getattr(delta, name, None)
            if piece:
                message[name] = message.get(name, "") + piece
        for tc in delta.tool_calls or []:
            call = calls.setdefault(tc.index, {"type": "function", "function": {"name": None, "arguments": ""}})
            if tc.id:
                call["id"] = tc.id
            if tc.function is not None:
                if tc.function.name:
                    call["function"]["name"] = tc.function.name
                if tc.function.arguments:
                    call["function"]["arguments"] += tc.function.arguments
    if calls:
        message["tool_calls"] = [calls[i] for i in sorted(calls)]
    finish = resolve_finish_reason("stop" if case["finished"] else "length", request, bool(calls))
    usage = {"prompt_tokens": len(case["prompt_ids"]), "completion_tokens": len(ids), "total_tokens": len(case["prompt_ids"]) + len(ids)}
    response = {"id": "chatcmpl-harness", "object": "chat.completion", "model": "moonshotai/kimi",
                "choices": [{"index": 0, "message": message, "finish_reason": finish}], "usage": usage}  # fmt: skip
    return {"response": response}


def main() -> None:
    stubs.assert_no_real_torch()
    for line in sys.stdin:
        case = json.loads(line)
        if not supports(case["profile"]):
            continue
        # Server-issued ids (`chatcmpl-tool-<uuid>`) come out the same on every run, so --check can diff.
        uuid.uuid4 = stubs.seeded_uuid4(case["case_id"])
        try:
            result = respond_stream(case) if STREAM else respond(case)
        except Exception as exc:  # noqa: BLE001 - the server raising on an output is a result too (a 500)
            result = {"error": {"type": type(exc).__name__, "message": str(exc)[:500]}}
        print(json.dumps({"case_id": case["case_id"], **result}, ensure_ascii=False, sort_keys=True))


if __name__ == "__main__":
    main()
