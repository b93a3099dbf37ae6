"""Drive one SGLang build's own non-streaming chat-completion code over raw Kimi outputs.

Run in the harness venv (no torch): ``python drive_sglang.py SOURCE_ROOT VERSION < cases.jsonl > out.jsonl``.
``OpenAIServingChat`` is built by its real ``__init__`` for ``--tool-call-parser kimi_k2 --reasoning-parser
kimi_k2`` (``kimi_k3`` for K3) around a tokenizer manager that holds only the tokenizer and the model
config; ``_build_chat_response`` (the non-streaming response assembly) then gets the engine's result for
each case: the true output ids, the text SGLang's detokenizer makes of them, and ``completion_tokens`` as
the scheduler counts it (``len(output_ids)``, the matched stop token included).
"""

from __future__ import annotations

import json
import sys
import types
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import stubs

SOURCE_ROOT, VERSION = sys.argv[1], sys.argv[2]
FORCED = [
    "torch", "sglang.kernels", "sglang.srt.configs", "sglang.srt.layers", "sglang.srt.models",
    "sglang.srt.model_executor", "sglang.srt.model_loader", "sglang.srt.distributed", "sglang.srt.mem_cache",
    "sglang.srt.multimodal", "sglang.srt.speculative", "sglang.srt.compilation", "sglang.srt.disaggregation",
    # prompt-side template probes (they need transformers); the response path never reads them
    "sglang.srt.parser.jinja_template_utils",
]  # fmt: skip
stubs.install(SOURCE_ROOT, "sglang", forced=FORCED, bare=["sglang"])

# (E402 below: these modules import the server, which must find the stubs installed above)
import sglang.srt.entrypoints.openai.serving_chat as serving_chat  # noqa: E402
from cases import request_body  # noqa: E402
from detok import server_text  # noqa: E402
from sglang.srt.entrypoints.openai.protocol import ChatCompletionRequest  # noqa: E402
from tokenizer_shim import KimiHFTokenizerShim  # noqa: E402

import kimi_recon  # noqa: E402


class _Options(types.SimpleNamespace):
    """A server-args bag: the options the harness sets, every other one off (None)."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return None


# The process-wide config bags a launched server publishes; here every serving option is at its default.
_SERVING = _Options(default_chat_template_kwargs=None, enable_cache_report=False, return_output_ids=False, return_input_ids=False)
serving_chat.get_serving = lambda: _SERVING
serving_chat.get_model = lambda: _Options(revision=None)
if hasattr(serving_chat, "get_observability"):
    serving_chat.get_observability = lambda: _Options()

PARSER_NAMES = {
    "kimi-k2.5": ("kimi_k2", "kimi_k2"),
    "kimi-k2-thinking": ("kimi_k2", "kimi_k2"),
    "kimi-k2-instruct": ("kimi_k2", None),
    "kimi-k3": ("kimi_k3", "kimi_k3"),
}
ARCH = {"kimi-k2.5": "KimiK25ForConditionalGeneration", "kimi-k2-thinking": "DeepseekV3ForCausalLM",
        "kimi-k2-instruct": "DeepseekV3ForCausalLM", "kimi-k3": "KimiK3ForConditionalGeneration"}  # fmt: skip
MODEL_TYPE = {"kimi-k2.5": "kimi_k25", "kimi-k2-thinking": "kimi_k2", "kimi-k2-instruct": "kimi_k2", "kimi-k3": "kimi_k3"}

_TOKENIZERS: dict[str, KimiHFTokenizerShim] = {}
_SERVERS: dict[str, Any] = {}


def _tokenizer(profile: str) -> KimiHFTokenizerShim:
    key = "kimi-k3" if profile == "kimi-k3" else "kimi-k2.5"
    if key not in _TOKENIZERS:
        tok = KimiHFTokenizerShim(key)
        # The server probes its model's chat template at start-up; K3 ships none (a Python renderer).
        template = Path(kimi_recon.__file__).parent / "data" / "k2.5" / "chat_template.jinja"
        tok.chat_template = template.read_text(encoding="utf-8") if key == "kimi-k2.5" else None  # type: ignore[attr-defined]
        _TOKENIZERS[key] = tok
    return _TOKENIZERS[key]


def _server(profile: str) -> Any:
    if profile in _SERVERS:
        return _SERVERS[profile]
    tool_name, reasoning_name = PARSER_NAMES[profile]
    options = {"tool_call_parser": tool_name, "reasoning_parser": reasoning_name}
    hf_config = types.SimpleNamespace(architectures=[ARCH[profile]], model_type=MODEL_TYPE[profile])
    manager = _Options(
        tokenizer=_tokenizer(profile),
        config_value=options.get,
        model_config=_Options(hf_config=hf_config, get_default_sampling_params=lambda: {}),
        model_path="moonshotai/kimi",
        server_args=None,
    )
    template = _Options(chat_template_name=None, python_chat_template=None, force_reasoning=False, reasoning_config=None)
    srv = serving_chat.OpenAIServingChat(manager, template)
    _SERVERS[profile] = srv
    return srv


def _request(case: dict[str, Any]) -> Any:
    return ChatCompletionRequest(**request_body(case))


def respond(case: dict[str, Any]) -> dict[str, Any]:
    profile = case["profile"]
    srv = _server(profile)
    tok = _tokenizer(profile)
    request = _request(case)
    # _process_messages decides skip_special_tokens before generation: these are its two rules that apply.
    srv._patch_reasoning_skip_special_tokens(request)
    if srv._effective_tools(request) and request.tool_choice != "none":
        request.skip_special_tokens = False
    text = server_text(tok, case["output_ids"], case["finished"], skip_special_tokens=bool(request.skip_special_tokens))
    finish = {"type": "stop", "matched": 163586} if case["finished"] else {"type": "length", "length": len(case["output_ids"])}
    ret = {
        "text": text,
        "output_ids": list(case["output_ids"]),
        "meta_info": {
            "id": "chatcmpl-harness",
            "finish_reason": finish,
            "prompt_tokens": len(case["prompt_ids"]),
            "completion_tokens": len(case["output_ids"]),
            "cached_tokens": 0,
            "weight_version": "default",
        },
    }
    response = srv._build_chat_response(request, [ret], 0)
    if not hasattr(response, "choices"):
        return {"error": {"type": "error_response", "message": bytes(response.body).decode()[:500]}}
    out = response.model_dump(exclude_none=True)
    out.pop("created", None)
    return {"response": out, "server_text": text}


def main() -> None:
    stubs.assert_no_real_torch()
    for line in sys.stdin:
        case = json.loads(line)
        # uuid-based ids (none on the Kimi path, but any other id) come out the same on every run.
        uuid.uuid4 = stubs.seeded_uuid4(case["case_id"])
        try:
            result = respond(case)
        except Exception as exc:  # noqa: BLE001 - the server raising on an output is a result too (a 500)
            result = {"error": {"type": type(exc).__name__, "message": str(exc)[:500]}}
        print(json.dumps({"case_id": case["case_id"], **result}, ensure_ascii=False, sort_keys=True))


if __name__ == "__main__":
    main()
