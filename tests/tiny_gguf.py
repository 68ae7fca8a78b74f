"""A tiny random-weight GGUF that llama.cpp loads and serves: a real model with garbage output.

Architecture ``llama`` (1 block, hidden size 64, 4 heads), float32 weights drawn from numpy with a
fixed seed, and a real byte-level BPE tokenizer (GPT-2's byte-to-unicode mapping, so any UTF-8
text tokenizes) with a few hundred merges of common English and code fragments, the ChatML
special tokens and a ChatML chat template that also renders tools, tool calls and tool results.
The file is about 0.5 MB and takes a few milliseconds to write.
"""

from __future__ import annotations

from pathlib import Path

import gguf
import numpy as np

N_EMBD = 64
N_HEAD = 4
N_HEAD_KV = 4
N_FF = 128
N_LAYER = 1
CONTEXT_LENGTH = 32768  # rollout prompts are thousands of tokens; the KV cache stays a few MB

SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")

# Whole words and code fragments that become single tokens (with and without a leading space);
# merges are the left-to-right chains that build them, so every prefix is a token too.
_WORD_TEXT = """
the of and to in is that for it as with was on be by this are or from at an not have has had
but which were can all will one their there been if more when would what so no out up into do
use used using make new file files line lines code test tests error errors fix bug issue run
value values name names type types list dict set str int float bool none true false return
def class self import from pass raise try except finally while for else elif with yield lambda
print len range open read write path os sys json args kwargs result results data config params
assert assertEqual function method module package python pytest git diff patch repo commit
"""
_WORDS = _WORD_TEXT.split()
_FRAGMENTS = (
    "    ",
    "        ",
    "\n    ",
    "\n        ",
    "\n\n",
    "()",
    "):",
    "('",
    "')",
    '("',
    '")',
    "==",
    "!=",
    "->",
    "__",
    "__init__",
    "self.",
    "def ",
    "import ",
    "return ",
    "    def ",
    "    return ",
    "\n\n\n",
    "...",
    "],",
    "},",
    '":',
    '", "',
)

CHATML_TOOLS_TEMPLATE = (
    "{%- if tools %}"
    "<|im_start|>system\n"
    "{%- if messages and messages[0].role == 'system' %}"
    "{{ messages[0].content or '' }}\n\n"
    "{%- endif %}"
    "# Tools\n\nYou may call one or more functions. Function signatures:\n<tools>"
    "{%- for tool in tools %}\n{{ tool | tojson }}{%- endfor %}\n</tools>\n\n"
    'For each call return <tool_call>{"name": ..., "arguments": {...}}</tool_call>'
    "<|im_end|>\n"
    "{%- elif messages and messages[0].role == 'system' %}"
    "<|im_start|>system\n{{ messages[0].content or '' }}<|im_end|>\n"
    "{%- endif %}"
    "{%- for message in messages %}"
    "{%- if message.role == 'system' and loop.first %}"
    "{%- elif message.role == 'tool' %}"
    "<|im_start|>user\n<tool_response>\n{{ message.content or '' }}\n</tool_response><|im_end|>\n"
    "{%- else %}"
    "<|im_start|>{{ message.role }}\n"
    "{%- if message.content is string %}{{ message.content }}"
    "{%- elif message.content %}"
    "{%- for part in message.content %}{{ part.text or '' }}{%- endfor %}"
    "{%- endif %}"
    "{%- if message.tool_calls %}"
    "{%- for call in message.tool_calls %}"
    '\n<tool_call>\n{"name": "{{ call.function.name }}", "arguments": '
    "{{ call.function.arguments }}}\n</tool_call>"
    "{%- endfor %}"
    "{%- endif %}"
    "<|im_end|>\n"
    "{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}<|im_start|>assistant\n{%- endif %}"
)


def _bytes_to_unicode() -> dict[int, str]:
    """GPT-2's reversible byte -> printable character mapping (what llama.cpp's BPE expects)."""
    printable = [
        *range(ord("!"), ord("~") + 1),
        *range(ord("¡"), ord("¬") + 1),
        *range(ord("®"), ord("ÿ") + 1),
    ]
    chars = list(printable)
    extra = 0
    for b in range(256):
        if b not in printable:
            printable.append(b)
            chars.append(256 + extra)
            extra += 1
    return dict(zip(printable, map(chr, chars), strict=True))


def _vocab() -> tuple[list[str], list[str]]:
    """(tokens, merges): the 256 byte tokens, then one token per merge, in merge-rank order."""
    byte_char = _bytes_to_unicode()
    tokens = [byte_char[b] for b in range(256)]
    known = set(tokens)
    merges: list[str] = []
    # Space-prefixed words first: their merges outrank the bare ones, so " the" is one token.
    pieces = [*(" " + w for w in _WORDS), *_WORDS, *_FRAGMENTS]
    for piece in pieces:
        chars = [byte_char[b] for b in piece.encode("utf-8")]
        current = chars[0]
        for char in chars[1:]:
            merged = current + char
            if merged not in known:
                known.add(merged)
                tokens.append(merged)
                merges.append(f"{current} {char}")
            current = merged
    return tokens, merges


def write_tiny_gguf(path: Path, seed: int = 0) -> Path:
    """Write the model to ``path`` (parents created) and return ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tokens, merges = _vocab()
    token_types = [gguf.TokenType.NORMAL] * len(tokens)
    for special in SPECIAL_TOKENS:
        tokens.append(special)
        token_types.append(gguf.TokenType.CONTROL)
    n_vocab = len(tokens)
    head_dim = N_EMBD // N_HEAD

    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_name("trajforge-tiny-random")
    writer.add_context_length(CONTEXT_LENGTH)
    writer.add_embedding_length(N_EMBD)
    writer.add_block_count(N_LAYER)
    writer.add_feed_forward_length(N_FF)
    writer.add_head_count(N_HEAD)
    writer.add_head_count_kv(N_HEAD_KV)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_rope_dimension_count(head_dim)
    writer.add_rope_freq_base(10000.0)
    writer.add_vocab_size(n_vocab)
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)

    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("qwen2")
    writer.add_token_list(tokens)
    writer.add_token_types(token_types)
    writer.add_token_merges(merges)
    writer.add_bos_token_id(tokens.index("<|endoftext|>"))
    writer.add_eos_token_id(tokens.index("<|im_end|>"))
    writer.add_pad_token_id(tokens.index("<|endoftext|>"))
    writer.add_add_bos_token(False)
    writer.add_chat_template(CHATML_TOOLS_TEMPLATE)

    rng = np.random.default_rng(seed)

    def weight(*shape: int) -> np.ndarray:
        return (rng.standard_normal(shape) * 0.02).astype(np.float32)

    def ones(n: int) -> np.ndarray:
        return np.ones(n, dtype=np.float32)

    # numpy shape is (out, in): gguf reverses it into ggml's (in, out), which llama.cpp expects.
    writer.add_tensor("token_embd.weight", weight(n_vocab, N_EMBD))
    for i in range(N_LAYER):
        blk = f"blk.{i}"
        writer.add_tensor(f"{blk}.attn_norm.weight", ones(N_EMBD))
        writer.add_tensor(f"{blk}.attn_q.weight", weight(N_HEAD * head_dim, N_EMBD))
        writer.add_tensor(f"{blk}.attn_k.weight", weight(N_HEAD_KV * head_dim, N_EMBD))
        writer.add_tensor(f"{blk}.attn_v.weight", weight(N_HEAD_KV * head_dim, N_EMBD))
        writer.add_tensor(f"{blk}.attn_output.weight", weight(N_EMBD, N_HEAD * head_dim))
        writer.add_tensor(f"{blk}.ffn_norm.weight", ones(N_EMBD))
        writer.add_tensor(f"{blk}.ffn_gate.weight", weight(N_FF, N_EMBD))
        writer.add_tensor(f"{blk}.ffn_up.weight", weight(N_FF, N_EMBD))
        writer.add_tensor(f"{blk}.ffn_down.weight", weight(N_EMBD, N_FF))
    writer.add_tensor("output_norm.weight", ones(N_EMBD))
    writer.add_tensor("output.weight", weight(n_vocab, N_EMBD))

    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path
