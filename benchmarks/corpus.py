"""A fixed, seeded synthetic corpus of realistic Kimi-K2.5 assistant turns for the benchmarks.

Every record is generated from its own ``random.Random(f"{seed}:{index}")``, so a corpus of any size
is a prefix of every larger corpus with the same seed, and the same seed gives the same bytes on
every machine (string seeds are hashed with SHA-512, not with Python's randomised ``hash``). No network,
no files: :func:`write_jsonl` writes only where it is told to (the benchmarks pass a temp dir or
``benchmarks/results/``, which is git-ignored).

Records have the shape ``audit_dataset`` reads::

    {"id": "bench-000042", "kind": "tool",
     "response": {"role": "assistant", "content": ..., "reasoning_content": ...,
                  "tool_calls": [...], "finish_reason": "stop"},
     "reference_ids": [...]}          # only with with_reference_ids=True

Kinds (share of records): long English reasoning with a markdown answer, code-heavy answers,
CJK (Chinese, Japanese, Korean) prose, emoji-heavy chat, tool calls with JSON arguments (some
with CJK, some model-compact, some with a whole file as a JSON string), turns cut off by the length
limit, turns whose text quotes special-token text literally (``<think>``, ``<|im_end|>``), a tool call
carrying a base64 blob longer than 25,000 characters (exercises the official 25k-run cut), and every
1000th record a huge reasoning trace longer than 400,000 characters (exercises the 400k cut).
"""

from __future__ import annotations

import base64
import json
import random
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

DEFAULT_SEED = 20250101

Message = dict[str, Any]
Record = dict[str, Any]

# ---------------------------------------------------------------------------------------------
# Vocabularies

_EN_WORDS = (
    "the of and to a in is that it for as with was on be by this are or from at an which not have "
    "but we can if all one they their has more also will would should could there so what when then "
    "than these each into only other some any may its our about such just like first two new way use "
    "used using make made need needs because however therefore since while where here now still let "
    "check consider note assume suppose given find compute value values function functions variable "
    "case cases step steps answer question user request problem solution approach method result results "
    "number numbers list array string strings key keys dict object type types error errors test tests "
    "input output file files path data model models token tokens layer layers loss gradient batch size "
    "time memory speed performance cache buffer thread process request response server client api "
    "query table column row index schema database field fields parameter parameters argument arguments "
    "returns return call calls loop iteration condition edge boundary overflow integer float precision "
    "probability expected distribution sample samples mean variance sum product matrix vector graph node "
    "edges tree root leaf depth search sort order sequence prefix suffix substring pattern match regex "
    "actually wait hmm okay right so maybe perhaps indeed clearly likely unlikely possible impossible "
    "correct incorrect wrong true false yes no good better best simple simpler complex efficient "
    "recursive iterative dynamic programming greedy binary linear quadratic constant logarithmic"
).split()

_EN_CAPS = (
    "First Second Then Next Also However Therefore So Now Let Wait Actually Okay Hmm Alternatively "
    "Finally The This That We I It If When Since Because Note Given Consider Suppose Python JSON "
    "HTTP API SQL Linux GPU CPU Kubernetes Docker React TypeScript Rust PyTorch NumPy Kimi Moonshot"
).split()

_EN_CONTRACTIONS = ("it's", "don't", "can't", "we'll", "that's", "I'm", "they're", "isn't", "doesn't", "let's", "we've", "I'd")

_ZH_CHARS = (
    "的一是在不了有和人这中大为上个国我以要他时来用们生到作地于出就分对成会可主发年动同工也能下过子说产种面"
    "而方后多定行学法所民得经十三之进着等部度家电力里如水化高自二理起小物现实加量都两体制机当使点从业本去把"
    "性好应开它合还因由其些然前外天政四日那社义事平形相全表间样与关各重新线内数正心反你明看原又么利比或但质"
    "气第向道命此变条只没结解问意建月公无系军很情者最立代想已通并提直题党程展五果料象员革位入常文总次品式活"
    "设及管特件长求老头基资边流路级少图山统接知较将组见计别她手角期根论运农指几九区强放决西被干做必战先回则"
    "任取据处队南给色光门即保治北造百规热领七海口东导器压志世金增争济阶油思术极交受联什认六共权收证改清美再"
    "采转更单风切打白教速花带安场身车例真务具万每目至达走积示议声报斗完类八离华名确才科张信马节话米整空元况"
    "今集温传土许步群广石记需段研界拉林律叫且究观越织装影算低持音众书布复容儿须际商非验连断深难近矿千周委素"
    "技备半办青省列习响约支般史感劳便团往酸历市克何除消构府称太准精值号率族维划选标写存候毛亲快效斯院查江型"
    "眼王按格养易置派层片始却专状育厂京识适属圆包火住调满县局照参红细引听该铁价严龙飞模型函数变量参数训练数"
    "据集推理输出输入代码测试错误优化内存速度缓存线程进程请求响应服务器客户端接口查询表格索引字段"
)
_ZH_PUNCT = ("，", "，", "，", "。", "。", "、", "；", "：", "？", "！")
_JA_KANA = (
    "あいうえおかきくけこさしすせそたちつてとなにぬねのはひふへほまみむめもやゆよらりるれろわをん"
    "がぎぐげござじずぜぞだでどばびぶべぼぱぴぷぺぽっゃゅょー"
)
_JA_KATA_WORDS = ("データ", "モデル", "トークン", "サーバー", "テスト", "コード", "ファイル", "メモリ", "キャッシュ", "プログラム", "エラー", "リクエスト")
_JA_KANJI_WORDS = ("問題", "解決", "確認", "実行", "結果", "関数", "変数", "設定", "入力", "出力", "処理", "性能", "速度", "学習", "推論")
_KO_SYLLABLES = "가나다라마바사아자차카타파하고노도로모보소오조초코토포호는을를이가에서의로와과하다니다습니다합니다있는없는데이터모델토큰서버테스트코드파일"
_EMOJI = (
    "🙂", "😀", "😂", "🤔", "👍", "👎", "🔥", "✨", "🚀", "🎉", "❤️", "💡", "✅", "❌", "⚠️", "📌", "📈", "🐍", "🦀",
    "👩‍💻", "👨‍👩‍👧‍👦", "🏳️‍🌈", "🇺🇸", "🇨🇳", "🇯🇵", "🇫🇷", "👋🏽", "🤝🏻", "🧑🏿‍🔬", "🫠", "🥲", "☕", "🍜", "🌏",
)
_OTHER_SCRIPTS = ("Здравствуйте", "мир", "данные", "مرحبا", "بالعالم", "नमस्ते", "दुनिया", "Γειά", "κόσμε", "café", "naïve", "Straße", "façade", "jalapeño")
_IDENTS = (
    "value", "result", "items", "config", "parser", "tokenizer", "encode", "decode", "buffer", "offset", "count",
    "index", "request", "response", "handler", "cache", "batch", "logits", "weights", "grad", "session", "client",
    "user_id", "max_len", "num_tokens", "path", "payload", "rows", "state", "queue", "worker", "timeout", "retries",
)
_TOOL_NAMES = ("get_weather", "web_search", "run_python", "read_file", "write_file", "bash", "sql_query", "fetch_url", "create_issue", "send_email")
_CITIES = ("Beijing", "北京", "上海", "Tokyo", "東京", "San Francisco", "Paris", "Zürich", "São Paulo", "서울", "Москва", "Berlin")


# ---------------------------------------------------------------------------------------------
# Text pieces


def _sentence(rng: random.Random, min_words: int = 6, max_words: int = 24) -> str:
    words = rng.choices(_EN_WORDS, k=rng.randint(min_words, max_words))
    words[0] = rng.choice(_EN_CAPS) if rng.random() < 0.7 else words[0].capitalize()
    roll = rng.random()
    if roll < 0.15:
        words.insert(rng.randrange(1, len(words)), rng.choice(_EN_CONTRACTIONS))
    elif roll < 0.3:
        words.insert(rng.randrange(1, len(words)), _number(rng))
    elif roll < 0.38:
        words.insert(rng.randrange(1, len(words)), f"`{rng.choice(_IDENTS)}`")
    elif roll < 0.42:
        words.insert(rng.randrange(1, len(words)), rng.choice(_OTHER_SCRIPTS))
    if rng.random() < 0.25:
        words[rng.randrange(1, len(words))] += ","
    return " ".join(words) + rng.choice((".", ".", ".", "?", ":", "!"))


def _number(rng: random.Random) -> str:
    roll = rng.random()
    if roll < 0.4:
        return str(rng.randint(0, 10_000))
    if roll < 0.6:
        return f"{rng.uniform(-1000, 1000):.{rng.randint(1, 6)}f}"
    if roll < 0.7:
        return f"{rng.uniform(1e-9, 1e9):.3e}"
    if roll < 0.8:
        return f"0x{rng.getrandbits(32):08x}"
    if roll < 0.9:
        return f"{rng.randint(1, 99)}%"
    return f"{rng.randint(2000, 2030)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"


def _paragraph(rng: random.Random, sentences: tuple[int, int] = (3, 9)) -> str:
    return " ".join(_sentence(rng) for _ in range(rng.randint(*sentences)))


def _math_line(rng: random.Random) -> str:
    a, b = rng.randint(2, 999), rng.randint(2, 999)
    forms = (
        f"{a} * {b} = {a * b}",
        f"{a} + {b} = {a + b}, and {a + b} mod 7 = {(a + b) % 7}",
        f"$\\frac{{{a}}}{{{b}}} \\approx {a / b:.4f}$",
        f"$$\\sum_{{i=1}}^{{{a}}} i = {a * (a + 1) // 2}$$",
        f"so x = {a}, y = {b}, x^2 + y^2 = {a * a + b * b}",
    )
    return rng.choice(forms)


def _zh_sentence(rng: random.Random) -> str:
    parts = []
    for _ in range(rng.randint(1, 4)):
        run = "".join(rng.choices(_ZH_CHARS, k=rng.randint(4, 22)))
        if rng.random() < 0.15:
            run += rng.choice((" Python ", " API ", " GPU ", " token ", " JSON ")) + "".join(rng.choices(_ZH_CHARS, k=rng.randint(2, 8)))
        if rng.random() < 0.1:
            run += str(rng.randint(1, 2048))
        parts.append(run)
    return "，".join(parts) + rng.choice(("。", "。", "？", "！", "："))


def _ja_sentence(rng: random.Random) -> str:
    out = []
    for _ in range(rng.randint(3, 8)):
        roll = rng.random()
        if roll < 0.35:
            out.append(rng.choice(_JA_KANJI_WORDS))
        elif roll < 0.55:
            out.append(rng.choice(_JA_KATA_WORDS))
        else:
            out.append("".join(rng.choices(_JA_KANA, k=rng.randint(1, 4))))
        if rng.random() < 0.2:
            out.append("、")
    return "".join(out) + "。"


def _ko_sentence(rng: random.Random) -> str:
    words = ["".join(rng.choices(_KO_SYLLABLES, k=rng.randint(1, 4))) for _ in range(rng.randint(3, 10))]
    return " ".join(words) + rng.choice((".", "?", "다.", "요."))


def _cjk_paragraph(rng: random.Random) -> str:
    roll = rng.random()
    if roll < 0.6:
        return "".join(_zh_sentence(rng) for _ in range(rng.randint(2, 7)))
    if roll < 0.85:
        return "".join(_ja_sentence(rng) for _ in range(rng.randint(2, 6)))
    return " ".join(_ko_sentence(rng) for _ in range(rng.randint(2, 6)))


def _emoji_line(rng: random.Random) -> str:
    words = rng.choices(_EN_WORDS, k=rng.randint(4, 14))
    for _ in range(rng.randint(1, 4)):
        words.insert(rng.randrange(len(words) + 1), "".join(rng.choices(_EMOJI, k=rng.randint(1, 3))))
    return " ".join(words)


def _python_block(rng: random.Random) -> str:
    name = rng.choice(_IDENTS)
    args = ", ".join(rng.sample(_IDENTS, rng.randint(1, 3)))
    lines = [f"def {name}_{rng.randint(0, 99)}({args}):", f'    """{_sentence(rng, 4, 10)}"""']
    depth = 1
    for _ in range(rng.randint(4, 25)):
        ind = "    " * depth
        a, b = rng.sample(_IDENTS, 2)
        roll = rng.random()
        if roll < 0.2 and depth < 4:
            lines.append(f"{ind}for {a} in range({rng.randint(1, 512)}):")
            depth += 1
        elif roll < 0.3 and depth < 4:
            lines.append(f"{ind}if {a} > {_number(rng)} and not {b}:")
            depth += 1
        elif roll < 0.4 and depth > 1:
            depth -= 1
            lines.append(f"{'    ' * depth}else:")
            depth += 1
        elif roll < 0.5:
            lines.append(f"{ind}# {_sentence(rng, 3, 12)}")
        elif roll < 0.6:
            lines.append(f"{ind}{a}[{b!r}] = {{\"{b}\": {_number(rng)}, \"ok\": True}}")
        elif roll < 0.7:
            lines.append(f'{ind}print(f"{a}={{{a}!r}} {b}={{{b}:.3f}}")')
        else:
            lines.append(f"{ind}{a} = {b}.{rng.choice(_IDENTS)}({rng.choice(_IDENTS)}, {_number(rng)})")
        if depth > 1 and rng.random() < 0.15:
            depth -= 1
    lines.append(f"    return {rng.choice(_IDENTS)}")
    return "```python\n" + "\n".join(lines) + "\n```"


def _js_block(rng: random.Random) -> str:
    name = rng.choice(_IDENTS)
    body = []
    for _ in range(rng.randint(3, 15)):
        a, b = rng.sample(_IDENTS, 2)
        body.append(rng.choice((
            f"  const {a} = await fetch(`/api/{b}/${{id}}`);",
            f"  if (!{a}?.{b}) {{ throw new Error(\"{_sentence(rng, 3, 8)}\"); }}",
            f"  {a}.push({{ {b}: {_number(rng)}, label: '{rng.choice(_OTHER_SCRIPTS)}' }});",
            f"  return {a}.map(({b}) => {b} * 2).filter(Boolean);",
            f"\t// {_sentence(rng, 3, 10)}",
        )))
    return "```typescript\nexport async function " + name + "(id: string): Promise<number[]> {\n" + "\n".join(body) + "\n}\n```"


def _shell_block(rng: random.Random) -> str:
    cmds = [
        f"pip install {rng.choice(('tiktoken', 'numpy', 'torch==2.4.0', 'requests>=2.31'))}",
        f"git log --oneline -n {rng.randint(1, 50)} -- src/{rng.choice(_IDENTS)}.py",
        f"grep -rn \"{rng.choice(_IDENTS)}\" ./src | head -{rng.randint(5, 40)}",
        f"curl -sS -X POST https://api.example.com/v1/{rng.choice(_IDENTS)} -H 'Content-Type: application/json' -d '{{\"n\": {rng.randint(1, 9)}}}'",
        f"docker run --rm -it -p {rng.randint(1024, 65535)}:8080 app:latest",
    ]
    return "```bash\n" + "\n".join(rng.sample(cmds, rng.randint(1, len(cmds)))) + "\n```"


def _json_block(rng: random.Random) -> str:
    return "```json\n" + json.dumps(_json_value(rng, 3), ensure_ascii=False, indent=2) + "\n```"


def _table(rng: random.Random) -> str:
    cols = rng.sample(_IDENTS, rng.randint(2, 5))
    rows = ["| " + " | ".join(cols) + " |", "|" + "|".join("---" for _ in cols) + "|"]
    for _ in range(rng.randint(2, 8)):
        rows.append("| " + " | ".join(_number(rng) for _ in cols) + " |")
    return "\n".join(rows)


def _code_block(rng: random.Random) -> str:
    return rng.choice((_python_block, _python_block, _js_block, _shell_block, _json_block))(rng)


def _json_value(rng: random.Random, depth: int) -> Any:
    roll = rng.random()
    if depth <= 0 or roll < 0.35:
        return rng.choice((
            rng.randint(-100, 10_000),
            round(rng.uniform(-100, 100), rng.randint(1, 5)),
            rng.choice((True, False, None)),
            _sentence(rng, 2, 8),
            rng.choice(_CITIES),
            "".join(rng.choices(_ZH_CHARS, k=rng.randint(2, 10))),
        ))
    if roll < 0.55:
        return [_json_value(rng, depth - 1) for _ in range(rng.randint(1, 5))]
    return {k: _json_value(rng, depth - 1) for k in rng.sample(_IDENTS, rng.randint(1, 5))}


def _markdown_answer(rng: random.Random, paragraphs: tuple[int, int], code_share: float, cjk: bool = False) -> str:
    parts: list[str] = []
    if rng.random() < 0.5:
        parts.append("## " + " ".join(w.capitalize() for w in rng.choices(_EN_WORDS, k=rng.randint(2, 6))))
    for _ in range(rng.randint(*paragraphs)):
        roll = rng.random()
        if roll < code_share:
            parts.append(_code_block(rng))
        elif roll < code_share + 0.1:
            parts.append("\n".join(f"{i}. **{rng.choice(_IDENTS)}**: {_sentence(rng, 4, 14)}" for i in range(1, rng.randint(3, 7))))
        elif roll < code_share + 0.15:
            parts.append(_table(rng))
        elif roll < code_share + 0.2:
            parts.append("\n".join(f"- {_sentence(rng, 3, 12)}" for _ in range(rng.randint(2, 6))))
        else:
            parts.append(_cjk_paragraph(rng) if cjk else _paragraph(rng))
    return "\n\n".join(parts)


def _reasoning(rng: random.Random, target_chars: int, cjk: bool = False, code: bool = False) -> str:
    parts: list[str] = []
    size = 0
    while size < target_chars:
        roll = rng.random()
        if code and roll < 0.15:
            piece = _code_block(rng)
        elif roll < 0.25:
            piece = "\n".join(_math_line(rng) for _ in range(rng.randint(1, 4)))
        elif cjk and roll < 0.75:
            piece = _cjk_paragraph(rng)
        else:
            piece = _paragraph(rng, (2, 7))
        parts.append(piece)
        size += len(piece) + 2
    sep = "\n\n" if rng.random() < 0.8 else "\n"
    return sep.join(parts)


# ---------------------------------------------------------------------------------------------
# Tool calls


def _tool_arguments(rng: random.Random, name: str) -> dict[str, Any]:
    if name == "get_weather":
        return {"city": rng.choice(_CITIES), "unit": rng.choice(("celsius", "fahrenheit")), "days": rng.randint(1, 7)}
    if name == "web_search":
        q = _sentence(rng, 2, 8) if rng.random() < 0.6 else "".join(rng.choices(_ZH_CHARS, k=rng.randint(4, 14)))
        return {"query": q, "top_k": rng.randint(3, 20), "recency_days": rng.choice((None, 7, 30))}
    if name == "run_python":
        return {"code": _python_block(rng)[10:-4], "timeout": rng.randint(5, 120)}
    if name == "read_file":
        return {"path": f"/workspace/{rng.choice(_IDENTS)}/{rng.choice(_IDENTS)}.py", "start_line": rng.randint(1, 400)}
    if name == "write_file":
        return {"path": f"src/{rng.choice(_IDENTS)}.ts", "content": _js_block(rng)[14:-4] + "\n" + _python_block(rng)[10:-4]}
    if name == "bash":
        return {"command": _shell_block(rng)[8:-4], "cwd": "/workspace"}
    if name == "sql_query":
        col = rng.choice(_IDENTS)
        return {"sql": f"SELECT {col}, COUNT(*) AS n FROM events WHERE ts >= '{_number(rng)}' GROUP BY {col} ORDER BY n DESC LIMIT {rng.randint(1, 100)};"}
    if name == "send_email":
        return {"to": [f"{rng.choice(_IDENTS)}@example.com"], "subject": _sentence(rng, 2, 6), "body": _paragraph(rng, (1, 3)) + " " + _emoji_line(rng)}
    return {k: _json_value(rng, 2) for k in rng.sample(_IDENTS, rng.randint(1, 4))}


def _tool_calls(rng: random.Random, count: int, first_index: int, blob_chars: int = 0) -> list[dict[str, Any]]:
    calls = []
    for i in range(count):
        name = rng.choice(_TOOL_NAMES)
        args = _tool_arguments(rng, name)
        if blob_chars and i == 0:
            name = "upload_file"
            raw = rng.randbytes(blob_chars * 3 // 4 + 3)
            args = {"filename": "figure.png", "data_base64": base64.b64encode(raw).decode("ascii")[:blob_chars]}
        compact = rng.random() < 0.4  # models often write compact JSON; the template's tojson writes ", " and ": "
        text = json.dumps(args, ensure_ascii=False, separators=(",", ":") if compact else None)
        calls.append({"id": f"functions.{name}:{first_index + i}", "type": "function", "function": {"name": name, "arguments": text}})
    return calls


# ---------------------------------------------------------------------------------------------
# Turn kinds


def _chat(rng: random.Random) -> Message:
    size = int(rng.lognormvariate(8.3, 0.8))  # median ~4k characters of reasoning, long tail
    return {"reasoning_content": _reasoning(rng, size), "content": _markdown_answer(rng, (2, 8), 0.2)}


def _code(rng: random.Random) -> Message:
    size = int(rng.lognormvariate(8.0, 0.7))
    return {"reasoning_content": _reasoning(rng, size, code=True), "content": _markdown_answer(rng, (3, 10), 0.55)}


def _cjk(rng: random.Random) -> Message:
    size = int(rng.lognormvariate(7.6, 0.7))
    return {"reasoning_content": _reasoning(rng, size, cjk=True), "content": _markdown_answer(rng, (2, 7), 0.15, cjk=True)}


def _emoji(rng: random.Random) -> Message:
    size = int(rng.lognormvariate(6.8, 0.6))
    content = "\n".join(_emoji_line(rng) for _ in range(rng.randint(2, 12)))
    return {"reasoning_content": _reasoning(rng, size), "content": content}


def _tool(rng: random.Random) -> Message:
    size = int(rng.lognormvariate(7.0, 0.8))
    msg: Message = {"reasoning_content": _reasoning(rng, size, code=rng.random() < 0.3)}
    msg["content"] = _sentence(rng) if rng.random() < 0.35 else ""
    msg["tool_calls"] = _tool_calls(rng, rng.choice((1, 1, 1, 2, 2, 3, 4)), rng.randint(0, 12))
    msg["finish_reason"] = "tool_calls"
    return msg


def _truncated(rng: random.Random) -> Message:
    msg = _chat(rng)
    if rng.random() < 0.5:  # cut off inside the reasoning
        reasoning = msg["reasoning_content"]
        return {"reasoning_content": reasoning[: rng.randint(len(reasoning) // 3, len(reasoning))], "content": "", "finish_reason": "length"}
    content = msg["content"]
    msg["content"] = content[: rng.randint(1, len(content))]
    msg["finish_reason"] = "length"
    return msg


def _special_text(rng: random.Random) -> Message:
    """A turn that quotes chat-template markers literally (e.g. explaining the Kimi format)."""
    quotes = (
        "The template closes the reasoning with </think> and ends the turn with <|im_end|>.",
        "Each call is wrapped in <|tool_call_begin|> ... <|tool_call_end|> inside <|tool_calls_section_begin|>.",
        "A user message starts with <|im_user|>user<|im_middle|> in the rendered prompt.",
        "Strip the <think> block before showing the answer.",
    )
    msg = _chat(rng)
    msg["content"] = _paragraph(rng, (1, 3)) + " " + rng.choice(quotes) + "\n\n" + msg["content"]
    if rng.random() < 0.3:
        msg["reasoning_content"] += "\n\nThe user asks about " + rng.choice(quotes)
    return msg


def _long_run(rng: random.Random) -> Message:
    """A tool call carrying a base64 blob longer than the official 25,000-character run limit."""
    msg: Message = {"reasoning_content": _reasoning(rng, 1500), "content": ""}
    msg["tool_calls"] = _tool_calls(rng, 1, 0, blob_chars=rng.randint(26_000, 60_000))
    msg["finish_reason"] = "tool_calls"
    return msg


def _huge(rng: random.Random) -> Message:
    """A very long reasoning trace (over 400,000 characters): exercises the official 400k cut."""
    return {"reasoning_content": _reasoning(rng, rng.randint(410_000, 520_000), code=True), "content": _markdown_answer(rng, (3, 8), 0.3)}


KINDS: dict[str, tuple[float, Callable[[random.Random], Message]]] = {
    "chat": (0.36, _chat),
    "code": (0.18, _code),
    "cjk": (0.14, _cjk),
    "emoji": (0.06, _emoji),
    "tool": (0.20, _tool),
    "truncated": (0.03, _truncated),
    "special_text": (0.02, _special_text),
    "long_run": (0.01, _long_run),
}
HUGE_EVERY = 1000


def make_record(index: int, seed: int = DEFAULT_SEED) -> Record:
    """Record ``index`` of the corpus with ``seed`` (independent of every other record)."""
    rng = random.Random(f"kimi-recon-bench:{seed}:{index}")
    if index % HUGE_EVERY == HUGE_EVERY - 1:
        kind = "huge"
        message = _huge(rng)
    else:
        names = list(KINDS)
        kind = rng.choices(names, weights=[KINDS[n][0] for n in names])[0]
        message = KINDS[kind][1](rng)
    response: Message = {"role": "assistant", "content": message.get("content", "")}
    response["reasoning_content"] = message.get("reasoning_content")
    if message.get("tool_calls"):
        response["tool_calls"] = message["tool_calls"]
    response["finish_reason"] = message.get("finish_reason", "stop")
    return {"id": f"bench-{index:06d}", "kind": kind, "response": response}


#: The length classes of the per-turn benchmarks (:mod:`benchmarks.matrix`): about how many characters of output
#: (reasoning, content, tool-call arguments) a turn holds. ``ordinary`` is the size of the official turns the
#: hot-path figures of issue 23 were taken on; ``long`` is past the 10k characters where per-turn cost stops mattering.
LENGTH_CLASSES: dict[str, int] = {"ordinary": 500, "long": 13_000}
#: One turn in this many of a length class ends in tool calls (the rest answer in prose).
SIZED_TOOL_EVERY = 5


def _prose(rng: random.Random, target_chars: int) -> str:
    """Sentences (a paragraph break now and then) until ``target_chars`` characters: a size-bounded ``_reasoning``."""
    parts: list[str] = []
    size = 0
    while size < target_chars:
        piece = _sentence(rng) if rng.random() < 0.9 else _math_line(rng)
        parts.append(piece)
        size += len(piece) + 1
    return "".join(p + ("\n\n" if rng.random() < 0.15 else " ") for p in parts).rstrip()


def sized_record(index: int, length_class: str, seed: int = DEFAULT_SEED) -> Record:
    """Record ``index`` of the ``length_class`` turns (:data:`LENGTH_CLASSES`): English reasoning and answer, every
    :data:`SIZED_TOOL_EVERY`-th turn a tool call instead of most of the answer. Independent of every other record."""
    target = LENGTH_CLASSES[length_class]
    rng = random.Random(f"kimi-recon-bench:{length_class}:{seed}:{index}")
    tool = index % SIZED_TOOL_EVERY == SIZED_TOOL_EVERY - 1
    response: Message = {"role": "assistant", "reasoning_content": _prose(rng, int(target * (0.8 if tool else 0.5)))}
    if tool:
        response["content"] = ""
        response["tool_calls"] = _tool_calls(rng, 1, 0)
        response["finish_reason"] = "tool_calls"
    else:
        response["content"] = _prose(rng, int(target * 0.35))
        response["finish_reason"] = "stop"
    return {"id": f"bench-{length_class}-{index:06d}", "kind": "tool" if tool else "chat", "response": response}


def sized_corpus(n: int, length_class: str, seed: int = DEFAULT_SEED) -> list[Record]:
    """The first ``n`` records of a length class (a smaller corpus is a prefix of a bigger one)."""
    return [sized_record(i, length_class, seed) for i in range(n)]


def message_chars(response: Message) -> int:
    """Characters of generated text in a response (reasoning, content, tool-call ids and arguments)."""
    n = len(response.get("reasoning_content") or "") + len(response.get("content") or "")
    for call in response.get("tool_calls") or ():
        n += len(call["id"]) + len(call["function"]["arguments"])
    return n


def iter_records(target_bytes: int, seed: int = DEFAULT_SEED) -> Iterator[Record]:
    """Records 0, 1, 2, ... until their generated text reaches ``target_bytes`` bytes of UTF-8."""
    total = 0
    index = 0
    while total < target_bytes:
        record = make_record(index, seed)
        total += message_bytes(record["response"])
        yield record
        index += 1


def message_bytes(response: Message) -> int:
    """UTF-8 bytes of generated text in a response."""
    n = len((response.get("reasoning_content") or "").encode("utf-8")) + len((response.get("content") or "").encode("utf-8"))
    for call in response.get("tool_calls") or ():
        n += len(call["id"].encode("utf-8")) + len(call["function"]["arguments"].encode("utf-8"))
    return n


def build_corpus(target_bytes: int, seed: int = DEFAULT_SEED) -> list[Record]:
    return list(iter_records(target_bytes, seed))


def add_reference_ids(records: Sequence[Record], encode: Callable[[Record], list[int]]) -> None:
    """Attach ``reference_ids`` (what the model emitted) computed by ``encode`` to each record, in place."""
    for record in records:
        record["reference_ids"] = encode(record)


def write_jsonl(records: Sequence[Record], path: Path, *, repeat: int = 1) -> int:
    """Write ``records`` (``repeat`` times, ids suffixed ``-rK`` after the first copy) as JSONL; returns bytes written."""
    path.parent.mkdir(parents=True, exist_ok=True)
    written = 0
    with path.open("w", encoding="utf-8") as fh:
        for k in range(repeat):
            for record in records:
                row = record if k == 0 else {**record, "id": f"{record['id']}-r{k}"}
                line = json.dumps(row, ensure_ascii=False) + "\n"
                fh.write(line)
                written += len(line.encode("utf-8"))
    return written


def summary(records: Sequence[Record]) -> dict[str, Any]:
    """Counts per kind and text size, for the report."""
    kinds: dict[str, int] = {}
    for r in records:
        kinds[r["kind"]] = kinds.get(r["kind"], 0) + 1
    return {
        "records": len(records),
        "text_bytes": sum(message_bytes(r["response"]) for r in records),
        "text_chars": sum(message_chars(r["response"]) for r in records),
        "tool_call_turns": sum(1 for r in records if r["response"].get("tool_calls")),
        "kinds": dict(sorted(kinds.items(), key=lambda kv: -kv[1])),
    }


if __name__ == "__main__":
    import argparse
    import time

    parser = argparse.ArgumentParser(description="Generate the benchmark corpus and print its summary.")
    parser.add_argument("--mb", type=float, default=1.0, help="size of generated text in MiB")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    parser.add_argument("--out", type=Path, help="also write the records as JSONL here")
    ns = parser.parse_args()
    t0 = time.perf_counter()
    recs = build_corpus(int(ns.mb * 2**20), ns.seed)
    print(json.dumps(summary(recs), indent=2), f"\ngenerated in {time.perf_counter() - t0:.2f} s")
    if ns.out:
        print(f"wrote {write_jsonl(recs, ns.out)} bytes to {ns.out}")
