"""A real, tiny Qwen3 built locally: random-init ``Qwen3ForCausalLM`` + a byte-level BPE tokenizer trained here.

Nothing is downloaded. The model is the genuine transformers architecture (config → weights → ``save_pretrained``)
at toy size, and the tokenizer carries Qwen3's special tokens and a Qwen3-style chat template
(:data:`QWEN3_CHAT_TEMPLATE`: tools in the system turn, ``<tool_call>`` blocks in assistant turns, ``tool`` results
as ``<tool_response>`` in a user turn, ``enable_thinking``). Tests and the training stages use it to run the whole
``hf:`` path end to end: ``get_backend(f"hf:{build_tiny_qwen3(tmp)}")``. Building takes ~50 ms once torch and
transformers are imported (~3 s for the imports).

The same arguments give byte-identical files (weights are initialised from ``seed`` in a forked RNG, BPE training
is deterministic). The model's output is noise, of course: it exists to exercise plumbing, not to shop.
"""

from __future__ import annotations

import json
from pathlib import Path

from shoparena.errors import ConfigError

__all__ = ["QWEN3_CHAT_TEMPLATE", "SPECIAL_TOKENS", "TEXT_TOKENS", "build_tiny_qwen3"]

SPECIAL_TOKENS: tuple[str, ...] = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
"""Control tokens (``special=True``: dropped by ``decode(skip_special_tokens=True)``)."""
TEXT_TOKENS: tuple[str, ...] = (
    "<think>", "</think>", "<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>",
)
"""Single tokens that are part of the text (``special=False``, as in Qwen3: they survive decoding)."""

#: Qwen2/Qwen3 pre-tokenizer split (contractions, letters, single digits, punctuation runs, newlines, spaces).
_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
          r"|\s*[\r\n]+|\s+(?!\S)|\s+")

# Written for this project after Qwen3's template; renders the same text for the same conversation.
QWEN3_CHAT_TEMPLATE = r"""
{#- ── system turn, with the tool signatures when tools are given ── -#}
{%- if tools %}
    {{- '<|im_start|>system\n' }}
    {%- if messages[0].role == 'system' %}{{- messages[0].content + '\n\n' }}{%- endif %}
    {{- '# Tools\n\nYou may call one or more functions to assist with the user query.\n\n' }}
    {{- 'You are provided with function signatures within <tools></tools> XML tags:\n<tools>' }}
    {%- for tool in tools %}{{- '\n' + (tool | tojson) }}{%- endfor %}
    {{- '\n</tools>\n\nFor each function call, return a json object with function name and arguments within ' }}
    {{- '<tool_call></tool_call> XML tags:\n<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}'}}
    {{- '\n</tool_call><|im_end|>\n' }}
{%- elif messages[0].role == 'system' %}
    {{- '<|im_start|>system\n' + messages[0].content + '<|im_end|>\n' }}
{%- endif %}
{#- ── the last real user query: assistant turns after it keep their reasoning, earlier ones lose it ── -#}
{%- set ns = namespace(last_query=messages|length - 1) %}
{%- for message in messages %}
    {%- if message.role == 'user' and message.content is string
          and not (message.content.startswith('<tool_response>') and message.content.endswith('</tool_response>')) %}
        {%- set ns.last_query = loop.index0 %}
    {%- endif %}
{%- endfor %}
{#- ── the turns ── -#}
{%- for message in messages %}
    {%- set content = message.content if message.content is string else '' %}
    {%- if message.role == 'user' or (message.role == 'system' and not loop.first) %}
        {{- '<|im_start|>' + message.role + '\n' + content + '<|im_end|>\n' }}
    {%- elif message.role == 'assistant' %}
        {%- set reasoning = message.reasoning_content if message.reasoning_content is string else '' %}
        {%- if message.reasoning_content is not string and '</think>' in content %}
            {%- set reasoning = content.split('</think>')[0].rstrip('\n').split('<think>')[-1].lstrip('\n') %}
            {%- set content = content.split('</think>')[-1].lstrip('\n') %}
        {%- endif %}
        {%- if loop.index0 > ns.last_query and (loop.last or reasoning) %}
            {{- '<|im_start|>assistant\n<think>\n' + reasoning.strip('\n') + '\n</think>\n\n' + content.lstrip('\n') }}
        {%- else %}
            {{- '<|im_start|>assistant\n' + content }}
        {%- endif %}
        {%- for call in message.tool_calls or [] %}
            {%- set fn = call.function if call.function is defined else call %}
            {%- if content or not loop.first %}{{- '\n' }}{%- endif %}
            {{- '<tool_call>\n{"name": "' + fn.name + '", "arguments": ' }}
            {{- (fn.arguments if fn.arguments is string else fn.arguments | tojson) + '}\n</tool_call>' }}
        {%- endfor %}
        {{- '<|im_end|>\n' }}
    {%- elif message.role == 'tool' %}
        {%- if loop.first or messages[loop.index0 - 1].role != 'tool' %}{{- '<|im_start|>user' }}{%- endif %}
        {{- '\n<tool_response>\n' + content + '\n</tool_response>' }}
        {%- if loop.last or messages[loop.index0 + 1].role != 'tool' %}{{- '<|im_end|>\n' }}{%- endif %}
    {%- endif %}
{%- endfor %}
{#- ── the generation prompt; enable_thinking=false pre-fills an empty think ── -#}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\n' }}
    {%- if enable_thinking is defined and enable_thinking is false %}{{- '<think>\n\n</think>\n\n' }}{%- endif %}
{%- endif %}
""".strip()

_DIALOGUE = """\
I want a red floral summer dress under 700 pesos with free shipping.
Find me wireless bluetooth earbuds with noise cancelling from an official store.
Looking for a violin bow, full size, horsetail hair, cash on delivery please.
Can you recommend running shoes in size eu:42, black, breathable mesh?
I need a rice cooker and a kitchen knife set from the same shop.
My budget is 2000 and I have a voucher: 10% off above 1500, capped at 200.
Show me the cheapest phone case for iPhone 15 that is shockproof.
Let me search the catalog for matching products first.
The first result is a good match but I should check the size options.
Let me view the product information to verify the colour and material.
This product matches every requirement: price, service and attributes.
I will recommend product 5113553159 because it is floral and within budget.
No product matched, so I will try a different query and the next page.
The shop sells both items, so the shop bucket is satisfied.
After the voucher the total price is 1800, which stays within the budget.
Here are my recommendations. Thank you for shopping with us!
"""
_TOOL_TEXT = """\
find_product view_product_information recommend_product terminate check_product_match
{"name": "find_product", "arguments": {"q": "violin bow", "page": 1, "price": "0-500", "sort": "priceasc"}}
{"name": "view_product_information", "arguments": {"product_ids": "3706669986,591486855"}}
{"name": "recommend_product", "arguments": {"product_ids": "5113553159"}}
{"name": "terminate", "arguments": {"status": "success"}}
{"type": "function", "function": {"name": "find_product", "description": "Search products", "parameters":
{"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}}}
[{"product_id": "1203344556", "shop_id": "3450032", "title": "Violin 4/4 Solid Spruce", "price": 2499.0,
"service": ["COD", "freeShipping"], "sold_count": 31}]
"""
_CHAT_TEXT = """\
system user assistant tool
# Tools

You may call one or more functions to assist with the user query.
You are provided with function signatures within XML tags:
For each function call, return a json object with function name and arguments within XML tags:
"""


def _corpus() -> list[str]:
    return [*_DIALOGUE.splitlines(), *_TOOL_TEXT.splitlines(), _CHAT_TEXT] * 8 + ["0123456789 .,;:!?'\"()[]{}<>/\\-_"]


def _train_tokenizer(vocab_size: int):  # -> tokenizers.Tokenizer
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(_SPLIT), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=list(SPECIAL_TOKENS), show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(_corpus(), trainer)
    tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in TEXT_TOKENS])
    return tok


def build_tiny_qwen3(out_dir: str | Path, *, seed: int = 0, vocab_size: int = 1024, hidden: int = 64,
                     layers: int = 2, heads: int = 4, kv_heads: int = 2, intermediate: int = 128,
                     max_positions: int = 8192, max_new_tokens: int | None = 96) -> Path:
    """Write a tiny Qwen3 (config, safetensors weights, tokenizer, chat template) to ``out_dir``; return it.

    ``max_new_tokens`` goes to ``generation_config.json``: the per-turn cap the ``hf:`` backend serves it with (an
    untrained model otherwise babbles until the run's whole token budget, every turn of a 30-step episode).

    ``vocab_size`` is the BPE training target (the small corpus may stop short of it); the model's vocabulary is
    exactly the tokenizer's. Loads with ``AutoTokenizer`` / ``AutoModelForCausalLM.from_pretrained(out_dir)``.
    """
    try:
        import torch
        from transformers import PreTrainedTokenizerFast, Qwen3Config, Qwen3ForCausalLM
    except ImportError as exc:
        raise ConfigError(f"building a tiny Qwen3 needs torch and transformers ({exc.name} is missing)",
                          hint="pip install 'shoparena[hf]'") from exc
    if hidden % heads or heads % kv_heads:
        raise ConfigError(f"hidden={hidden}, heads={heads}, kv_heads={kv_heads} do not divide evenly")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)

    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=_train_tokenizer(vocab_size), eos_token="<|im_end|>", pad_token="<|endoftext|>",
        model_max_length=max_positions, chat_template=QWEN3_CHAT_TEMPLATE,
    )
    tokenizer.save_pretrained(out)
    _set_tokenizer_class(out / "tokenizer_config.json")

    ids = tokenizer.convert_tokens_to_ids
    config = Qwen3Config(
        vocab_size=len(tokenizer), hidden_size=hidden, intermediate_size=intermediate, num_hidden_layers=layers,
        num_attention_heads=heads, num_key_value_heads=kv_heads, head_dim=hidden // heads,
        max_position_embeddings=max_positions, tie_word_embeddings=True,
        bos_token_id=ids("<|endoftext|>"), eos_token_id=ids("<|im_end|>"), pad_token_id=ids("<|endoftext|>"),
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = Qwen3ForCausalLM(config)
    model.generation_config.eos_token_id = [ids("<|im_end|>"), ids("<|endoftext|>")]
    if max_new_tokens is not None:
        model.generation_config.max_new_tokens = max_new_tokens
    model.save_pretrained(out)
    return out


def _set_tokenizer_class(path: Path) -> None:
    # The generic fast class loads under both transformers 4.x and 5.x (5.x writes its own backend name).
    config = json.loads(path.read_text(encoding="utf-8"))
    config["tokenizer_class"] = "PreTrainedTokenizerFast"
    path.write_text(json.dumps(config, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
