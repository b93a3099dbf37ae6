"""The acceptance rules of the trainers' own loaders for pre-tokenized rows, restated as checks.

Read at sgl-project/SpecForge ``a6b6b0230009d15ec2a97a57384e6f53f0f96946`` (2026-08-08) and
vllm-project/speculators ``c05b95b303f7d4f21e8d7624e0ffa1c2d9b4d73b`` (2026-08-20): :data:`SPECFORGE_COMMIT`,
:data:`SPECULATORS_COMMIT`. When a trainer changes its loader, this file is the one place to update.

SpecForge, online mode (``data.prompts_path``), read in ``specforge/data/prompt_builder.py``
(``prepare_prompt_tasks``, ``_materialize_prompt_tasks``, ``_prompt_from_record``, ``_normalize_integer_sequence``,
``_iter_records``) and the strategies' ``minimum_loss_tokens`` / ``loss_mask_filter``:

1. ``prompts_path`` is opened as one file, JSON Lines or a JSON array (``_iter_records``): a folder, such as
   one written by ``datasets.Dataset.save_to_disk``, is not read;
2. the FIRST record decides: it is pre-tokenized when it has ``input_ids``, and then it must also have
   ``loss_mask`` (one without the other is an error); otherwise the whole file is parsed as conversations;
3. every row must hold both fields; ``input_ids`` a one-dimensional sequence of integers (booleans
   refused), ``loss_mask`` one of 0/1 integers, of the same length, not empty;
4. rows are cut to ``data.max_length`` without a word, then a row with fewer than ``min_loss_tokens`` ones
   in ``loss_mask`` is skipped without a word: 1 for ``eagle3``/``peagle`` (``one_loss_token``), 2 for
   the DFlash family ``dflash``/``domino``/``dspark`` (``dflash_min_loss_tokens``), which also skips a row
   with no two adjacent ones (``has_consecutive_supervised_tokens``, ``specforge/data/loss_mask.py``).
   For us a skipped or cut row is a lost record, so both are failures here.

Its run config (``specforge/config/schema.py``, ``load_config``) is restated in :func:`specforge_config`.

vLLM speculators (``scripts/prepare_data.py --data FILE.jsonl``), read in
``src/speculators/data_generation/preprocessing.py`` (``load_raw_dataset``,
``build_speculator_training_dataset``, ``_passthrough_pretokenized``, ``_append_row``):

1. a ``.jsonl`` file is loaded with ``datasets.load_dataset("json", data_files=..., split="train")``;
2. the rows pass through pre-tokenized when ``{"input_ids", "loss_mask"}`` are columns;
3. each row's two lists must have equal lengths (``len()`` of a null is a TypeError); rows are clipped to
   ``--seq-length`` (kept, with a logged warning), and rows whose mask has no 1 in the window are dropped
   (also only a logged warning); other columns are removed. Here both are failures, as above.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from itertools import pairwise
from numbers import Integral
from pathlib import Path
from typing import Any

from extras import require


class Rejected(AssertionError):
    """The trainer's loader would refuse the file, or silently lose a row of it."""


def _int_sequence(value: Any, field: str, where: str, *, binary: bool) -> list[int]:
    if not isinstance(value, Sequence) or isinstance(value, (str, bytes)):
        raise Rejected(f"{where}: {field} must be a sequence, got {type(value).__name__}")
    out = []
    for i, item in enumerate(value):
        if isinstance(item, Sequence) and not isinstance(item, (str, bytes)):
            raise Rejected(f"{where}: {field} must be one-dimensional")
        if not isinstance(item, Integral) or (field == "input_ids" and isinstance(item, bool)):
            raise Rejected(f"{where}: {field}[{i}] must be an integer, got {type(item).__name__}")
        if binary and int(item) not in (0, 1):
            raise Rejected(f"{where}: {field}[{i}] must be 0 or 1, got {item}")
        out.append(int(item))
    return out


#: The SpecForge commit the rules of this file were read at.
SPECFORGE_COMMIT = "a6b6b0230009d15ec2a97a57384e6f53f0f96946"
#: The vLLM speculators commit the rules of this file were read at.
SPECULATORS_COMMIT = "c05b95b303f7d4f21e8d7624e0ffa1c2d9b4d73b"

#: SpecForge's ``data.max_length`` default (``DataConfig``).
SPECFORGE_MAX_LENGTH = 2048
#: speculators' ``prepare_data.py --seq-length`` default.
SPECULATORS_SEQ_LENGTH = 8192
#: The strategies that need two trained tokens, two of them adjacent (the DFlash family).
DFLASH_FAMILY = frozenset({"dflash", "domino", "dspark"})
#: The strategies that need one trained token.
ONE_TOKEN_STRATEGIES = frozenset({"eagle3", "peagle"})


def _specforge_records(path: Path) -> list[Any]:
    if path.is_dir():
        raise Rejected(f"{path} is a folder: SpecForge opens prompts_path as one JSONL (or JSON array) file")
    text = path.read_text(encoding="utf-8")
    if text.lstrip().startswith("["):
        records = json.loads(text)
        if not isinstance(records, list):
            raise Rejected(f"{path.name}: JSON data must be an array of objects")
        return records
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def has_adjacent_ones(mask: Sequence[int]) -> bool:
    """Whether two neighbouring positions of ``mask`` are both 1 (the DFlash family's row filter)."""
    return any(a and b for a, b in pairwise(mask))


def specforge_prompts(
    path: Path, strategy: str = "eagle3", max_length: int = SPECFORGE_MAX_LENGTH
) -> list[dict[str, list[int]]]:
    """The prompts SpecForge online mode would take from ``path`` for ``strategy``, none lost; raises
    :class:`Rejected` when it would refuse the file, or cut or skip a row of it without a word."""
    if strategy not in DFLASH_FAMILY | ONE_TOKEN_STRATEGIES:
        raise ValueError(f"unknown SpecForge strategy {strategy!r}")
    min_loss_tokens = 2 if strategy in DFLASH_FAMILY else 1
    records = _specforge_records(path)
    if not records:
        return []
    first = records[0]
    if ("input_ids" in first) != ("loss_mask" in first):
        raise Rejected("the first record has only one of input_ids and loss_mask")
    if "input_ids" not in first:
        raise Rejected("the first record has no input_ids: SpecForge would read the whole file as conversations")
    prompts = []
    for n, record in enumerate(records, 1):
        where = f"{path.name}:{n}"
        if "input_ids" not in record or "loss_mask" not in record:
            raise Rejected(f"{where} must contain both input_ids and loss_mask")
        ids = _int_sequence(record["input_ids"], "input_ids", where, binary=False)
        mask = _int_sequence(record["loss_mask"], "loss_mask", where, binary=True)
        if len(ids) != len(mask):
            raise Rejected(f"{where} has mismatched input_ids/loss_mask lengths")
        if not ids:
            raise Rejected(f"{where} contains an empty token sequence")
        if len(ids) > max_length:
            raise Rejected(f"{where} has {len(ids)} tokens, more than max_length {max_length}: it would be cut silently")
        if sum(mask) < min_loss_tokens:
            raise Rejected(f"{where} has fewer than {min_loss_tokens} trained tokens: it would be skipped silently")
        if strategy in DFLASH_FAMILY and not has_adjacent_ones(mask):
            raise Rejected(f"{where} has no two adjacent trained tokens: {strategy} would skip it silently")
        prompts.append({"input_ids": ids, "loss_mask": mask})
    return prompts


# -- SpecForge's run config (specforge/config/schema.py: Config and its sections, load_config) -------------

#: The keys each section accepts (every section forbids others: ``extra="forbid"``). A subset of the real
#: fields, the ones a run on these rows needs: stricter than SpecForge, never looser.
_SPECFORGE_KEYS: dict[str, frozenset[str]] = {
    "": frozenset({"model", "data", "training", "tracking", "profiling", "runtime", "deployment", "run_id", "output_dir"}),
    "model": frozenset({
        "target_model_path", "draft_model_config", "draft_checkpoint_path", "target_backend", "trust_remote_code",
        "embedding_key", "lm_head_key", "vocab_mapping_path", "torch_dtype", "cache_dir", "mask_token_id",
        "sglang_context_length", "sglang_mem_fraction_static",
    }),
    "data": frozenset({
        "train_data_path", "prompts_path", "hidden_states_path", "eval_data_path", "eval_hidden_states_path",
        "max_length", "chat_template", "cache_dir", "cache_key", "max_prompts", "build_dataset_num_proc",
        "dataloader_num_workers",
    }),
    "training": frozenset({
        "strategy", "num_epochs", "max_steps", "batch_size", "accumulation_steps", "learning_rate", "max_grad_norm",
        "ttt_length", "attention_backend", "tp_size", "sp_ulysses_size", "sp_ring_size", "save_interval",
        "eval_interval", "log_interval", "dist_timeout", "seed", "role", "resume_from",
    }),
    "deployment": frozenset({"mode", "trainer", "disaggregated"}),
    "deployment.trainer": frozenset({"nnodes", "nproc_per_node", "node_rank", "master_addr", "master_port"}),
    "deployment.disaggregated": frozenset({
        "control_dir", "consumer_state_dir", "inbox_server_url", "backend", "store_id", "server_urls",
        "mooncake_metadata_server", "mooncake_master_server_addr", "mooncake_local_hostname", "mooncake_protocol",
        "client_buffer_size", "idle_timeout_s", "peer_wait_timeout_s",
    }),
}


def _section(raw: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    node: Any = raw
    for key in name.split(".") if name else ():
        node = node.get(key) or {}
    if not isinstance(node, Mapping):
        raise Rejected(f"{name or 'the config'} must be a mapping")
    unknown = set(node) - _SPECFORGE_KEYS[name]
    if unknown:
        raise Rejected(f"{name or 'the config'}: unknown keys {sorted(unknown)} (extra fields are forbidden)")
    return node


def specforge_config(raw: Any) -> None:
    """Raise :class:`Rejected` where ``load_config`` would refuse the run config ``raw`` (parsed YAML).

    Restates, for the sections above: ``model.target_model_path`` and ``data`` required; exactly one of
    ``train_data_path``, ``prompts_path``, ``hidden_states_path``; ``max_length`` > 0; online training
    (no ``hidden_states_path``) needs ``deployment.mode: disaggregated`` with a ``deployment.disaggregated``
    section whose ``backend`` is ``mooncake`` and ``control_dir`` is set, on ``target_backend: sglang``;
    ``training.role`` defaults to ``auto`` there and may not be ``all``; more than one trainer node needs
    ``master_addr`` and a ``consumer_state_dir``; the online consumer keeps ``tp_size``/SP sizes at 1."""
    if not isinstance(raw, Mapping):
        raise Rejected("the config must be a mapping")
    for name in _SPECFORGE_KEYS:
        _section(raw, name)
    model, data = raw.get("model"), raw.get("data")
    if not isinstance(model, Mapping) or not model.get("target_model_path"):
        raise Rejected("model.target_model_path is required")
    if not isinstance(data, Mapping):
        raise Rejected("data is required")
    if sum(bool(data.get(k)) for k in ("train_data_path", "prompts_path", "hidden_states_path")) != 1:
        raise Rejected("set exactly one of data.train_data_path, data.prompts_path, data.hidden_states_path")
    max_length = data.get("max_length", SPECFORGE_MAX_LENGTH)
    if not isinstance(max_length, int) or isinstance(max_length, bool) or max_length <= 0:
        raise Rejected(f"data.max_length must be a positive integer, got {max_length!r}")
    deployment = raw.get("deployment") or {}
    mode = deployment.get("mode", "local_colocated")
    if mode not in ("local_colocated", "disaggregated"):
        raise Rejected(f"deployment.mode must be local_colocated or disaggregated, got {mode!r}")
    disaggregated = deployment.get("disaggregated")
    if (mode == "disaggregated") != (disaggregated is not None):
        raise Rejected("deployment.disaggregated is required with, and only with, deployment.mode=disaggregated")
    training = raw.get("training") or {}
    role = training.get("role", "auto" if mode == "disaggregated" else "all")
    if (role == "all") == (mode == "disaggregated"):
        raise Rejected(f"training.role={role} does not fit deployment.mode={mode}")
    trainer = deployment.get("trainer") or {}
    if trainer.get("nnodes", 1) > 1 and not trainer.get("master_addr"):
        raise Rejected("deployment.trainer.master_addr is required when nnodes > 1")
    if data.get("hidden_states_path"):
        return  # offline: not what these rows are for, and not restated further
    if mode != "disaggregated":
        raise Rejected("online training requires deployment.mode=disaggregated")
    if model.get("target_backend", "sglang") != "sglang":
        raise Rejected("online training requires model.target_backend=sglang")
    assert disaggregated is not None
    if not disaggregated.get("control_dir"):
        raise Rejected("deployment.disaggregated.control_dir is required")
    if disaggregated.get("backend") != "mooncake":
        raise Rejected("online disaggregated training requires deployment.disaggregated.backend=mooncake")
    if trainer.get("nnodes", 1) > 1 and not disaggregated.get("consumer_state_dir"):
        raise Rejected("multi-node online consumers require deployment.disaggregated.consumer_state_dir")
    if any(training.get(k, 1) != 1 for k in ("tp_size", "sp_ulysses_size", "sp_ring_size")):
        raise Rejected("the online consumer keeps training.tp_size and the SP sizes at 1")
    if data.get("eval_data_path"):
        raise Rejected("data.eval_data_path is unsupported")
    strategy = training.get("strategy", "eagle3")
    if strategy not in DFLASH_FAMILY | ONE_TOKEN_STRATEGIES:
        raise Rejected(f"training.strategy {strategy!r} is not one this file knows")


def speculators_rows(path: Path, seq_length: int = SPECULATORS_SEQ_LENGTH) -> list[dict[str, list[int]]]:
    """The rows ``prepare_data.py --data path --seq-length N`` would pass through whole; raises
    :class:`Rejected` when it would fail, or clip or drop a row."""
    datasets = require("datasets")

    try:
        ds = datasets.load_dataset("json", data_files=str(path), split="train")
    except Exception as err:  # the loader itself failing is a rejection, whatever its type
        raise Rejected(f"datasets' JSON loader failed: {type(err).__name__}: {err}") from err
    if not {"input_ids", "loss_mask"} <= set(ds.column_names):
        raise Rejected(f"columns {ds.column_names} are not pre-tokenized rows: they would be rendered again")
    rows = []
    for n, (ids, mask) in enumerate(zip(ds["input_ids"], ds["loss_mask"], strict=True)):
        if ids is None or mask is None:
            raise Rejected(f"row {n}: a null column (TypeError: object of type 'NoneType' has no len())")
        if len(ids) != len(mask):
            raise Rejected(f"row {n}: Pre-tokenized row shape mismatch")
        if len(ids) > seq_length:
            raise Rejected(f"row {n} has {len(ids)} tokens, more than --seq-length {seq_length}: it would be clipped")
        if sum(mask) == 0:
            raise Rejected(f"row {n} has no supervised token: it would be dropped")
        rows.append({"input_ids": list(ids), "loss_mask": list(mask)})
    return rows
