#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz targets: fuzz/corpus/<target>/<name>.

The seeds are small meaningful inputs (valid requests, edge cases, tiny GGUF
files) from which libFuzzer mutates. They are committed; this script documents
how they were made and re-creates them (it overwrites files of the same name and
leaves other files, e.g. merged finds, alone).
Usage: python3 fuzz/make_corpus.py [TARGET...]   (default: every target)
"""
import os
import struct
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROFILE = os.path.join(REPO, "..", "shared", "data", "profiles", "h100-bf16")
written = {}


def seed(target, name, data):
    if isinstance(data, str):
        data = data.encode("utf-8", "surrogatepass")
    assert len(data) < 64 * 1024, (target, name, len(data))
    d = os.path.join(ROOT, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)
    written[target] = written.get(target, 0) + 1


# ---------------------------------------------------------------- openai_request
def openai_request():
    t = "openai_request"
    seed(t, "completion_minimal", '{"prompt":"Once upon a time"}')
    seed(t, "completion_full", '{"model":"tiny","prompt":"Hello","max_tokens":16,"temperature":0.7,"top_p":0.9,'
         '"top_k":40,"min_p":0.05,"frequency_penalty":0.5,"presence_penalty":-0.5,"repetition_penalty":1.1,'
         '"n":2,"best_of":2,"stop":["\\n","END"],"seed":42,"logprobs":3,"stream":true,'
         '"stream_options":{"include_usage":true},"priority":5,"ignore_eos":false,"stop_token_ids":[2,13]}')
    seed(t, "completion_tokens", '{"prompt":[1,15043,3186],"max_tokens":4}')
    seed(t, "completion_prompt_list", '{"prompt":["one prompt"]}')
    seed(t, "completion_two_prompts", '{"prompt":["a","b"]}')
    seed(t, "completion_echo_suffix", '{"prompt":"x","echo":true,"suffix":"y"}')
    seed(t, "chat_minimal", '{"messages":[{"role":"user","content":"Hi"}]}')
    seed(t, "chat_full", '{"model":"tiny","messages":[{"role":"system","content":"Be brief."},'
         '{"role":"developer","content":"dev"},{"role":"user","content":"Hi"},'
         '{"role":"assistant","content":null},{"role":"user","content":[{"type":"text","text":"a"},'
         '{"type":"text","text":"b"}]}],"max_completion_tokens":8,"logprobs":true,"top_logprobs":5,'
         '"stream":true,"stream_options":{"include_usage":false},"tools":[]}')
    seed(t, "chat_image_part", '{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"x"}}]}]}')
    seed(t, "chat_tools", '{"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function"}]}')
    seed(t, "chat_empty_role", '{"messages":[{"role":"","content":"x"}]}')
    seed(t, "chat_top_logprobs_without_logprobs", '{"messages":[{"role":"user","content":"x"}],"top_logprobs":2}')
    # Numbers a double cannot hold (issue 8: out_of_range.406 must become a 400).
    seed(t, "huge_temperature_1e400", '{"prompt":"hi","temperature":1e400}')
    seed(t, "huge_negative_max_tokens", '{"messages":[{"role":"user","content":"x"}],"max_tokens":-1e400}')
    seed(t, "huge_top_p_1e999", '{"prompt":"hi","top_p":1e999}')
    seed(t, "huge_nested_number", '{"prompt":"hi","stream_options":{"include_usage":1e400},"stream":true}')
    seed(t, "tiny_number", '{"prompt":"hi","temperature":1e-400}')
    seed(t, "uint64_max", '{"prompt":"hi","seed":18446744073709551615,"n":18446744073709551615}')
    seed(t, "int_overflow", '{"prompt":"hi","max_tokens":99999999999999999999999}')
    seed(t, "float_integers", '{"prompt":"hi","max_tokens":16.0,"n":1.5,"seed":-0.0}')
    seed(t, "negative_zero_and_exp", '{"prompt":"hi","temperature":-0e5,"top_p":1E0}')
    seed(t, "wrong_types", '{"prompt":7,"stream":"yes","stop":5,"n":"2","temperature":[1]}')
    seed(t, "too_many_stops", '{"prompt":"x","stop":["a","b","c","d","e","f","g","h","i","j","k","l","m","n","o","p","q"]}')
    seed(t, "bad_token_ids", '{"prompt":[1,-2,3000000000],"stop_token_ids":[-1]}')
    seed(t, "unicode_escapes", '{"prompt":"caf\\u00e9 \\ud83d\\ude00 \\u2581 \\u0000 end"}')
    seed(t, "lone_surrogate", '{"prompt":"\\ud800 and \\udc00"}')
    seed(t, "raw_invalid_utf8", b'{"prompt":"\xff\xfe\xc3 bad","model":"\x80"}')
    seed(t, "bom_prefix", b'\xef\xbb\xbf{"prompt":"bom"}')
    seed(t, "duplicate_keys", '{"prompt":"a","prompt":"b","n":1,"n":2}')
    seed(t, "deep_array", '{"prompt":' + "[" * 5000 + "]" * 5000 + "}")
    seed(t, "deep_object", '{"prompt":"x","stream_options":' + '{"a":' * 3000 + "1" + "}" * 3000 + "}")
    seed(t, "truncated", '{"prompt":"Once upon a ti')
    seed(t, "trailing_garbage", '{"prompt":"x"} {"prompt":"y"}')
    seed(t, "not_object", '["prompt","x"]')
    seed(t, "null_body", "null")
    seed(t, "empty_body", "")
    seed(t, "nulls_everywhere", '{"prompt":"x","model":null,"stream":null,"n":null,"stop":null,"max_tokens":null,'
         '"temperature":null,"seed":null,"logprobs":null,"suffix":null}')
    seed(t, "stream_options_without_stream", '{"prompt":"x","stream_options":{"include_usage":true}}')
    seed(t, "long_prompt", '{"prompt":"' + "lorem ipsum " * 2000 + '"}')


# ---------------------------------------------------------------- http_request
def http(method, target, headers=(), body=b""):
    if isinstance(body, str):
        body = body.encode()
    lines = [f"{method} {target} HTTP/1.1", "Host: localhost"] + list(headers)
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


def post_json(target, body, extra=()):
    return http("POST", target, ["Content-Type: application/json", f"Content-Length: {len(body.encode())}"]
                + list(extra), body)


def chunked(target, pieces, extra=()):
    body = b""
    for p in pieces:
        body += f"{len(p):x}\r\n".encode() + p.encode() + b"\r\n"
    body += b"0\r\n\r\n"
    return http("POST", target, ["Transfer-Encoding: chunked", "Content-Type: application/json"] + list(extra), body)


def http_request():
    t = "http_request"
    seed(t, "get_health", http("GET", "/health"))
    seed(t, "head_models", http("HEAD", "/v1/models"))
    seed(t, "get_metrics_query", http("GET", "/metrics?format=prometheus"))
    seed(t, "post_completions", post_json("/v1/completions", '{"prompt":"Once upon a time","max_tokens":8}'))
    seed(t, "post_chat", post_json("/v1/chat/completions",
                                   '{"messages":[{"role":"system","content":"Be kind."},{"role":"user","content":"Hi"}]}'))
    seed(t, "post_chat_with_key", post_json("/v1/chat/completions", '{"messages":[{"role":"user","content":"Hi"}]}',
                                            ["Authorization: Bearer sk-fuzz-key"]))
    seed(t, "wrong_key", http("GET", "/v1/models", ["Authorization: Bearer nope"]))
    seed(t, "basic_auth", http("GET", "/v1/models", ["Authorization: Basic dXNlcjpwYXNz"]))
    seed(t, "chunked_completion", chunked("/v1/completions", ['{"prompt":', '"chunked body"', ',"n":1}']))
    seed(t, "chunked_with_extension_and_trailer",
         http("POST", "/v1/completions", ["Transfer-Encoding: chunked", "Trailer: X-Checksum"],
              b'5;ext=1\r\n{"pro\r\n9\r\nmpt":"x"}\r\n0\r\nX-Checksum: 1\r\n\r\n'))
    seed(t, "bad_chunk_size", http("POST", "/v1/completions", ["Transfer-Encoding: chunked"], b"zz\r\nabc\r\n0\r\n\r\n"))
    seed(t, "pipelined_three", http("GET", "/health") + post_json("/v1/completions", '{"prompt":"a"}')
         + http("GET", "/v1/models"))
    seed(t, "pipelined_close", http("GET", "/health", ["Connection: close"]) + http("GET", "/metrics"))
    seed(t, "http10", b"GET /health HTTP/1.0\r\n\r\n")
    seed(t, "expect_continue", post_json("/v1/completions", '{"prompt":"x"}', ["Expect: 100-continue"]))
    seed(t, "unknown_method", http("BREW", "/v1/completions"))
    seed(t, "get_on_post_route", http("GET", "/v1/chat/completions"))
    seed(t, "post_on_get_route", post_json("/health", "{}"))
    seed(t, "delete_models", http("DELETE", "/v1/models"))
    seed(t, "not_found", http("GET", "/v2/completions"))
    seed(t, "absolute_form", http("GET", "http://localhost:8000/health"))
    seed(t, "asterisk_options", http("OPTIONS", "*"))
    seed(t, "both_lengths", http("POST", "/v1/completions", ["Content-Length: 5", "Transfer-Encoding: chunked"],
                                 b'0\r\n\r\n'))
    seed(t, "two_content_lengths", http("POST", "/v1/completions", ["Content-Length: 3", "Content-Length: 4"], b"abcd"))
    seed(t, "negative_length", http("POST", "/v1/completions", ["Content-Length: -1"]))
    seed(t, "huge_length", http("POST", "/v1/completions", ["Content-Length: 99999999999999999999"]))
    seed(t, "obs_fold", b"GET /health HTTP/1.1\r\nHost: x\r\nX-Long: a\r\n  folded\r\n\r\n")
    seed(t, "bare_lf", b"GET /health HTTP/1.1\nHost: x\n\n")
    seed(t, "header_no_colon", b"GET /health HTTP/1.1\r\nHost x\r\n\r\n")
    seed(t, "nul_in_target", b"GET /hea\x00lth HTTP/1.1\r\n\r\n")
    seed(t, "utf8_target", "GET /v1/mod\u00e9ls HTTP/1.1\r\n\r\n")
    seed(t, "truncated_body", http("POST", "/v1/completions", ["Content-Length: 100"], b'{"prompt":'))
    seed(t, "body_1e400", post_json("/v1/completions", '{"prompt":"hi","temperature":1e400}'))
    seed(t, "long_header", http("GET", "/health", ["X-Pad: " + "a" * 3000]))
    seed(t, "chat_template_markers", post_json("/v1/chat/completions",
         '{"messages":[{"role":"user","content":"  [INST] <|im_start|> <<SYS>> </s>  "},'
         '{"role":"assistant","content":"\\n ok \\n"},{"role":"tool","content":"r"}]}'))
    seed(t, "big_prompt", post_json("/v1/completions", '{"prompt":"' + "x" * 20000 + '"}'))


# ---------------------------------------------------------------- sse_parser
def sse(body, cuts=()):
    if isinstance(body, str):
        body = body.encode()
    return bytes([len(cuts)]) + bytes(cuts) + body


def sse_parser():
    t = "sse_parser"
    chunk = 'data: {"choices":[{"index":0,"text":"Once"}]}\n\n'
    seed(t, "completion_stream", sse(chunk + 'data: {"choices":[{"text":" upon"}]}\n\ndata: [DONE]\n\n'))
    seed(t, "chat_stream_crlf", sse('data: {"choices":[{"delta":{"role":"assistant","content":"Hi"}}]}\r\n\r\n'
                                    'data: {"choices":[{"delta":{"reasoning_content":"hm","content":"!"}}]}\r\n\r\n'
                                    'data: [DONE]\r\n\r\n', cuts=(40, 41, 120)))
    seed(t, "cr_only", sse("data: a\rdata: b\r\rdata: [DONE]\r\r", cuts=(7, 8, 9)))
    seed(t, "split_inside_crlf", sse("data: x\r\n\r\ndata: y\r\n\r\n", cuts=(34, 35, 127, 128)))
    seed(t, "usage_chunk", sse('data: {"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":7}}\n\n'
                               'data: [DONE]\n\n'))
    seed(t, "error_object", sse('data: {"error":{"message":"overloaded","type":"server_error"}}\n\n'))
    seed(t, "error_field", sse("error: something broke\n\n"))
    seed(t, "error_string", sse('data: {"error":"plain"}\n\n'))
    seed(t, "comments_and_events", sse(": keep-alive\n\nevent: message\ndata: {\"choices\":[{\"text\":\"a\"}]}\n"
                                       "id: 7\nretry: 1000\n\n"))
    seed(t, "multiline_data", sse("data: {\"choices\":\ndata: [{\"text\":\"x\"}]}\n\n"))
    seed(t, "no_space_after_colon", sse("data:[DONE]\n\n"))
    seed(t, "no_final_blank_line", sse('data: {"choices":[{"text":"tail"}]}'))
    seed(t, "not_json", sse("data: hello world\n\ndata: {\"choices\":\n\n"))
    seed(t, "non_streamed_response", sse('{"choices":[{"message":{"role":"assistant","content":"whole"}}],'
                                         '"usage":{"prompt_tokens":1,"completion_tokens":2}}'))
    seed(t, "field_without_colon", sse("data\n\ndata\ndata\n\n"))
    seed(t, "huge_number", sse('data: {"usage":{"prompt_tokens":1e400}}\n\n'))
    seed(t, "invalid_utf8", sse(b'data: {"choices":[{"text":"\xff\xfe"}]}\n\n', cuts=(20,)))
    seed(t, "many_cuts", sse(chunk * 4 + "data: [DONE]\n\n", cuts=tuple(range(0, 256, 16))))
    seed(t, "done_with_trailing", sse("data: [DONE]  \n\ndata: [DONE]\n \n"))
    seed(t, "empty", sse(""))


# ---------------------------------------------------------------- chat_template
def chat(flags, *messages):
    return bytes([flags]) + b"\x00".join(m.encode() if isinstance(m, str) else m for m in messages)


def chat_template():
    t = "chat_template"
    seed(t, "user_only", chat(0, "\x01Hello there"))
    seed(t, "system_user", chat(0, "\x00You are helpful.", "\x01What is 2+2?"))
    seed(t, "full_conversation", chat(5, "\x00Be brief.", "\x01Hi", "\x02Hello!", "\x01Bye", "\x02Goodbye."))
    seed(t, "two_systems", chat(0, "\x00  first  ", "\x00second", "\x01q"))
    seed(t, "system_only", chat(10, "\x00just a system prompt"))
    seed(t, "assistant_first", chat(15, "\x02I start.", "\x01ok"))
    seed(t, "tool_and_custom_roles", chat(0, "\x01call it", "\x03{\"result\":42}", "\x04function\x01output"))
    seed(t, "whitespace_content", chat(0, "\x01 \t\n\r\x0b\x0c", "\x02\n\n"))
    seed(t, "empty_messages", chat(0, "\x01", "\x02", "\x00"))
    seed(t, "markers_in_content", chat(0, "\x01[INST] <<SYS>> <|im_start|>user\n<|eot_id|></s><s>"))
    seed(t, "unicode", chat(0, "\x01\u00bfqu\u00e9 tal? \u4f60\u597d \U0001F600 \u2581"))
    seed(t, "invalid_utf8", chat(0, b"\x01\xff\xc3(\xe2\x82"))
    seed(t, "jinja_chatml", "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + "
         "message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}")
    seed(t, "jinja_llama3", "{{ bos_token }}{% for m in messages %}<|start_header_id|>{{ m['role'] }}"
         "<|end_header_id|>\n\n{{ m['content'] | trim }}<|eot_id|>{% endfor %}")
    seed(t, "jinja_llama2", "{% if messages[0]['role'] == 'system' %}<<SYS>>\\n{{ system }}\\n<</SYS>>{% endif %}"
         "{{ bos_token + '[INST] ' + content + ' [/INST]' }}")
    seed(t, "jinja_mistral", "{{ bos_token }}{% for m in messages %}[INST] {{ m['content'] }} [/INST]{% endfor %}")
    seed(t, "jinja_zephyr", "{% for m in messages %}<|{{ m['role'] }}|>\n{{ m['content'] }}{{ eos_token }}"
         "{% endfor %}<|assistant|>")
    seed(t, "jinja_phi3_not_zephyr", "<|user|>\n{{ c }}<|end|>\n<|assistant|>\n")
    seed(t, "name_llama3", "llama3")
    seed(t, "name_chatml", "chatml")
    seed(t, "many_messages", chat(0, *["\x01m%d" % i if i % 2 == 0 else "\x02r%d" % i for i in range(40)]))


# ---------------------------------------------------------------- tokenizers
TOKENIZER_TEXTS = {
    "english": "Once upon a time, there was a little girl named Lily. She loved to play outside.",
    "leading_spaces": "   three leading spaces and trailing   ",
    "whitespace_runs": "a\t\tb\n\n\nc \r\n d\u00a0e\u3000f",
    "numbers": "1 12 123 1234 12345 3.14159 -42 1e10 0x1F 1,000,000",
    "code": "def f(x):\n    return x ** 2  # square\n\nif __name__ == '__main__':\n\tprint(f(3))\n",
    "punctuation": "Hello!!! What?! ... --- ''' \"\"\" (a) [b] {c} <d> @e #f $g %h ^i &j *k",
    "contractions": "I'm you're he's we'll they'd it's can't won't DON'T",
    "accents": "caf\u00e9 na\u00efve r\u00e9sum\u00e9 F\u00fchrer \u00c5ngstr\u00f6m",
    "cjk": "\u4f60\u597d\uff0c\u4e16\u754c\u3002\u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8 \ud55c\uad6d\uc5b4",
    "emoji": "\U0001F600\U0001F44D\U0001F3FD \U0001F468\u200d\U0001F469\u200d\U0001F467 \u2764\ufe0f",
    "combining": "e\u0301 a\u0308 \u0915\u094d\u0937 \u0e01\u0e33",
    "rtl": "\u0645\u0631\u062d\u0628\u0627 \u05e9\u05dc\u05d5\u05dd",
    "control_chars": "a\x00b\x01c\x07d\x1be\x7ff",
    "sentencepiece_space": "\u2581already\u2581escaped \u2581",
    "spm_specials": "<s>Hello</s> <unk> <s><s>",
    "gpt2_specials": "<|endoftext|>Hello<|endoftext|> <|endoftext|",
    "byte_token_text": "<0x0A> <0xFF> <0x41>",
    "long_word": "a" * 300 + " " + "ab" * 150,
    "mixed_scripts": "Hello\u4e16\u754cworld\u0645\u0631\u062d\u0628\u0627123",
    "empty": "",
    "single_space": " ",
    "newline": "\n",
}
TOKENIZER_BYTES = {
    "invalid_utf8": b"a\xff\xc3 b\xe2\x82 \xf0\x9f\x98",
    "overlong_and_surrogate": b"\xc0\xaf \xed\xa0\x80 \xf4\x90\x80\x80",
    "continuation_only": b"\x80\x81\xbf abc \xbf",
    "truncated_emoji_end": b"end \xf0\x9f\x98",
}


def tokenizers():
    for t in ("tokenizer_spm", "tokenizer_bpe"):
        for name, text in TOKENIZER_TEXTS.items():
            seed(t, name, text)
        for name, data in TOKENIZER_BYTES.items():
            seed(t, name, data)
    seed("tokenizer_bpe", "deepseek_user_defined", "F\u00fchrer \u00fc\u00fc")
    seed("tokenizer_bpe", "llama3_style_specials", "<|begin_of_text|><|start_header_id|>user<|end_header_id|>")


# ---------------------------------------------------------------- gguf
GT = dict(u8=0, i8=1, u16=2, i16=3, u32=4, i32=5, f32=6, bool=7, str=8, arr=9, u64=10, i64=11, f64=12)
SCALAR_FMT = dict(u8="<B", i8="<b", u16="<H", i16="<h", u32="<I", i32="<i", f32="<f", bool="<B", u64="<Q",
                  i64="<q", f64="<d")
F32, F16, Q8_0 = 0, 1, 8


def gstr(s):
    b = s.encode("utf-8") if isinstance(s, str) else s
    return struct.pack("<Q", len(b)) + b


def payload(t, v):
    if t == "str":
        return gstr(v)
    if t == "arr":
        elem, items = v
        out = struct.pack("<IQ", GT[elem], len(items))
        return out + b"".join(payload(elem, i) for i in items)
    return struct.pack(SCALAR_FMT[t], v)


def gguf(kv, tensors=(), version=3, alignment=32):
    out = b"GGUF" + struct.pack("<IQQ", version, len(tensors), len(kv))
    for key, t, v in kv:
        out += gstr(key) + struct.pack("<I", GT[t]) + payload(t, v)
    data = b""
    for name, dims, gtype, blob in tensors:
        out += gstr(name) + struct.pack("<I", len(dims)) + b"".join(struct.pack("<Q", d) for d in dims)
        out += struct.pack("<IQ", gtype, len(data))
        data += blob + b"\0" * (-len(blob) % alignment)
    out += b"\0" * (-len(out) % alignment)
    return out + data


class Rng:
    def __init__(self, seed):
        self.x = seed

    def next(self):
        self.x = (self.x * 6364136223846793005 + 1442695040888963407) % (1 << 64)
        return self.x >> 33

    def small(self):
        return (self.next() % 2001 - 1000) / 25000.0  # about +-0.04


def f32_blob(rng, n, value=None):
    return b"".join(struct.pack("<f", rng.small() if value is None else value) for _ in range(n))


def q8_0_blob(rng, n):
    assert n % 32 == 0
    out = b""
    for _ in range(n // 32):
        out += struct.pack("<e", 0.001) + bytes((rng.next() % 255 - 127) & 0xFF for _ in range(32))
    return out


SPM_PIECES = ["\u2581", "\u2581t", "he", "\u2581the", "\u2581a", "in", "\u2581Once", "\u2581upon", "\u2581time",
              "e", "t", "h", "a", "n", "i", "o", "\u2581O", "nce"]


def spm_vocab_kv(extra_types=True):
    tokens = ["<unk>", "<s>", "</s>"] + ["<0x%02X>" % b for b in range(256)] + SPM_PIECES + ["<|user|>"]
    types = [2, 3, 3] + [6] * 256 + [1] * len(SPM_PIECES) + [4]
    scores = [0.0] * 259 + [-float(i) for i in range(len(SPM_PIECES))] + [0.0]
    kv = [("tokenizer.ggml.model", "str", "llama"),
          ("tokenizer.ggml.tokens", "arr", ("str", tokens)),
          ("tokenizer.ggml.scores", "arr", ("f32", scores)),
          ("tokenizer.ggml.bos_token_id", "u32", 1),
          ("tokenizer.ggml.eos_token_id", "u32", 2),
          ("tokenizer.ggml.unknown_token_id", "u32", 0)]
    if extra_types:
        kv.insert(3, ("tokenizer.ggml.token_type", "arr", ("i32", types)))
    return kv, len(tokens)


def gpt2_byte_chars():
    chars, nxt = [], 256
    for b in range(256):
        keep = 33 <= b <= 126 or 161 <= b <= 172 or 174 <= b <= 255
        chars.append(chr(b if keep else nxt))
        if not keep:
            nxt += 1
    return chars


def bpe_vocab_kv(pre):
    merges = ["\u0120 t", "h e", "\u0120t he", "i n", "\u0120 a", "o n", "e r"]
    tokens = gpt2_byte_chars() + ["\u0120t", "he", "\u0120the", "in", "\u0120a", "on", "er", "<|endoftext|>"]
    types = [1] * (len(tokens) - 1) + [3]
    kv = [("tokenizer.ggml.model", "str", "gpt2"),
          ("tokenizer.ggml.pre", "str", pre),
          ("tokenizer.ggml.tokens", "arr", ("str", tokens)),
          ("tokenizer.ggml.token_type", "arr", ("i32", types)),
          ("tokenizer.ggml.merges", "arr", ("str", merges)),
          ("tokenizer.ggml.bos_token_id", "u32", len(tokens) - 1),
          ("tokenizer.ggml.eos_token_id", "u32", len(tokens) - 1)]
    return kv, len(tokens)


def model(arch, vocab_kv, n_vocab, n_embd=8, n_ff=16, n_head=2, n_head_kv=1, n_layer=1, mat_type=F32, tied=True,
          extra_kv=()):
    rng = Rng(7)
    head_dim = n_embd // n_head
    kv_dim = n_head_kv * head_dim
    p = arch + "."
    kv = [("general.architecture", "str", arch), ("general.name", "str", "fuzz-seed")]
    kv += [(p + "context_length", "u32", 64), (p + "embedding_length", "u32", n_embd),
           (p + "block_count", "u32", n_layer), (p + "feed_forward_length", "u32", n_ff),
           (p + "attention.head_count", "u32", n_head), (p + "attention.head_count_kv", "u32", n_head_kv),
           (p + "attention.layer_norm_rms_epsilon", "f32", 1e-5), (p + "rope.freq_base", "f32", 10000.0)]
    kv += list(extra_kv) + vocab_kv

    def mat(name, rows, cols):
        blob = q8_0_blob(rng, rows * cols) if mat_type == Q8_0 else f32_blob(rng, rows * cols)
        return (name, [cols, rows], mat_type, blob)

    def vec(name, n, value=None):
        return (name, [n], F32, f32_blob(rng, n, value))

    tensors = [mat("token_embd.weight", n_vocab, n_embd), vec("output_norm.weight", n_embd, 1.0)]
    if not tied:
        tensors.append(mat("output.weight", n_vocab, n_embd))
    for i in range(n_layer):
        b = "blk.%d." % i
        tensors += [vec(b + "attn_norm.weight", n_embd, 1.0), mat(b + "attn_q.weight", n_embd, n_embd),
                    mat(b + "attn_k.weight", kv_dim, n_embd), mat(b + "attn_v.weight", kv_dim, n_embd),
                    mat(b + "attn_output.weight", n_embd, n_embd)]
        if arch == "qwen2":
            tensors += [vec(b + "attn_q.bias", n_embd), vec(b + "attn_k.bias", kv_dim), vec(b + "attn_v.bias", kv_dim)]
        tensors += [vec(b + "ffn_norm.weight", n_embd, 1.0), mat(b + "ffn_gate.weight", n_ff, n_embd),
                    mat(b + "ffn_up.weight", n_ff, n_embd), mat(b + "ffn_down.weight", n_embd, n_ff)]
    return kv, tensors


def gguf_seeds():
    t = "gguf"
    spm_kv, spm_n = spm_vocab_kv()
    bpe_kv, bpe_n = bpe_vocab_kv("qwen2")
    kv, tensors = model("llama", spm_kv, spm_n + 3)  # a few more embedding rows than tokens is allowed
    llama = gguf(kv, tensors)
    seed(t, "tiny_llama_spm_f32", llama)
    kv, tensors = model("llama", spm_kv, spm_n, n_embd=32, n_ff=32, n_head=4, n_head_kv=2, mat_type=Q8_0,
                        tied=False, extra_kv=[("llama.rope.scaling.type", "str", "linear"),
                                              ("llama.rope.scaling.factor", "f32", 2.0)])
    seed(t, "tiny_llama_q8_0_untied", gguf(kv, tensors))
    kv, tensors = model("qwen2", bpe_kv, bpe_n, n_layer=2)
    seed(t, "tiny_qwen2_bpe", gguf(kv, tensors))
    kv, tensors = model("llama", spm_kv, spm_n)
    seed(t, "tiny_llama_align64", gguf(kv + [("general.alignment", "u32", 64)], tensors, alignment=64))
    seed(t, "truncated_model", llama[:3000])
    seed(t, "truncated_in_data", llama[:-100])
    seed(t, "header_only_v3", gguf([]))
    seed(t, "header_only_v2", gguf([], version=2))
    seed(t, "bad_version", gguf([], version=4))
    seed(t, "bad_magic", b"GGML" + llama[4:200])
    seed(t, "huge_counts", b"GGUF" + struct.pack("<IQQ", 3, 1 << 62, 1 << 62))
    seed(t, "vocab_only_spm", gguf(spm_vocab_kv()[0]))
    seed(t, "vocab_only_spm_no_types", gguf(spm_vocab_kv(extra_types=False)[0]))
    for pre in ("gpt-2", "llama-bpe", "deepseek-llm", "falcon", "qwen2", "unknown-pre"):
        seed(t, "vocab_only_bpe_" + pre.replace("-", "_"), gguf(bpe_vocab_kv(pre)[0]))
    every_type = [("u8", "u8", 200), ("i8", "i8", -5), ("u16", "u16", 60000), ("i16", "i16", -30000),
                  ("u32", "u32", 4000000000), ("i32", "i32", -2000000000), ("f32", "f32", 1.5),
                  ("bool", "bool", 1), ("str", "str", "text \u00e9"), ("u64", "u64", (1 << 63) - 1),
                  ("i64", "i64", -(1 << 62)), ("f64", "f64", float("nan")),
                  ("arr_i32", "arr", ("i32", [1, -2, 3])), ("arr_f64", "arr", ("f64", [0.5, float("inf")])),
                  ("arr_bool", "arr", ("bool", [0, 1, 1])), ("arr_str", "arr", ("str", ["a", "", "c"])),
                  ("arr_empty", "arr", ("u8", [])),
                  ("arr_nested", "arr", ("arr", [("i8", [1, 2]), ("str", ["x"])]))]
    seed(t, "every_value_type", gguf(every_type))
    seed(t, "uint64_above_int64", gguf([("big", "u64", 1 << 63)]))
    seed(t, "duplicate_key", gguf([("k", "u8", 1), ("k", "u8", 2)]))
    seed(t, "alignment_not_power_of_two", gguf([("general.alignment", "u32", 48)]))
    seed(t, "alignment_bool", gguf([("general.alignment", "bool", 1)]))
    rng = Rng(3)
    one = [("w", [32, 2], Q8_0, q8_0_blob(rng, 64)), ("v", [4], F16, b"\0\x3c" * 4), ("s", [], F32, b"\0" * 4)]
    seed(t, "tensors_only", gguf([], one))
    bad = bytearray(gguf([], [("w", [4], F32, b"\0" * 16)]))
    at = 24 + 8 + 1 + 4 + 8 + 4  # header, name "w", n_dims, one dim, type: the offset field
    bad[at:at + 8] = struct.pack("<Q", 7)  # misaligned
    seed(t, "misaligned_offset", bytes(bad))
    seed(t, "tensor_past_end", gguf([], [("w", [4], F32, b"\0" * 16)])[:-8])
    seed(t, "q8_0_bad_row", gguf([], [("w", [31, 1], Q8_0, b"")]))
    seed(t, "unknown_ggml_type", gguf([], [("w", [4], 99, b"\0" * 16)]))
    seed(t, "five_dims", gguf([], [("w", [1, 1, 1, 1, 1], F32, b"\0" * 4)]))
    seed(t, "dims_overflow", gguf([], [("w", [1 << 40, 1 << 40], F32, b"")]))
    seed(t, "duplicate_tensor", gguf([], [("w", [1], F32, b"\0" * 4), ("w", [1], F32, b"\0" * 4)]))
    kv, tensors = model("llama", spm_kv, spm_n)
    seed(t, "model_missing_tensor", gguf(kv, [x for x in tensors if x[0] != "blk.0.ffn_up.weight"]))
    seed(t, "model_huge_block_count", gguf([x if x[0] != "llama.block_count" else (x[0], "u32", 1 << 24)
                                            for x in kv], tensors))
    seed(t, "model_bad_heads", gguf([x if x[0] != "llama.attention.head_count_kv" else (x[0], "u32", 3)
                                     for x in kv], tensors))
    seed(t, "model_unsupported_arch", gguf([x if x[0] != "general.architecture" else (x[0], "str", "gpt2")
                                            for x in kv], tensors))
    seed(t, "model_bos_out_of_range", gguf([x if x[0] != "tokenizer.ggml.bos_token_id" else (x[0], "u32", 99999)
                                            for x in kv], tensors))


# ---------------------------------------------------------------- config_text
def config_text():
    t = "config_text"
    for name in sorted(os.listdir(os.path.join(REPO, "configs", "sim"))):
        with open(os.path.join(REPO, "configs", "sim", name), "rb") as f:
            seed(t, "configs_sim_" + name.replace(".", "_"), f.read())
    seed(t, "scalars", "strategy: padg\ninstances: 4\nrate: 6.5\nexp: -1e3\nprefix: true\nyes: yes\n"
         "quoted: \"8\"\nsingle: '2.5'\ntagged: !!str 16\nempty:\ntilde: ~\nslo: null\nhex: 0x1F\n"
         "inf_rate: inf\nnan: .nan\nbig: 99999999999999999999\ntiny: 1e-400\nplus: +5\n")
    seed(t, "lists_and_maps", "percentiles: [90, 99]\nnested:\n  - a: 1\n    b: [x, {c: false}]\n"
         "flow: {tp: 2, pp: [1, 2]}\nblock: |\n  12\n  13\nfolded: >\n  a\n  b\n")
    seed(t, "anchors", "base: &b {tp: 2, pp: 1}\ncopy: *b\nlist: &l [1, 2]\nmore: [*l, *l]\n")
    seed(t, "billion_laughs", "a: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
         "c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]\n"
         "e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d]\nf: [*e, *e, *e, *e, *e, *e, *e, *e, *e]\n")
    seed(t, "self_alias", "a: &a [*a, 1]\n")
    seed(t, "deep_flow", "a: " + "[" * 70 + "]" * 70 + "\n")
    seed(t, "deep_block", "".join(" " * (2 * i) + "k:\n" for i in range(70)))
    seed(t, "complex_key", "? [1, 2]\n: x\n? {a: 1}\n: y\n")
    seed(t, "null_key", "~: 1\n: 2\n")
    seed(t, "duplicate_keys", "a: 1\na: 2\n")
    seed(t, "top_list", "- a\n- b\n")
    seed(t, "top_scalar", "just text")
    seed(t, "empty", "")
    seed(t, "comment_only", "# nothing\n")
    seed(t, "documents", "---\na: 1\n---\nb: 2\n...\n")
    seed(t, "malformed", "strategy: padg\ntp: [1, 2\npp: 1\n")
    seed(t, "bad_indent", "a: 1\n b: 2\n")
    seed(t, "undefined_alias", "a: *missing\n")
    seed(t, "escapes", 'a: "\\x41\\u00e9\\U0001F600\\ud800\\0"\nb: \'it\'\'s\'\n')
    seed(t, "invalid_utf8", b"a: \xff\xfe\nb: \xc3\n")
    seed(t, "bom", b"\xef\xbb\xbfa: 1\n")
    seed(t, "tags", "a: !!int 5\nb: !custom x\nc: !!map {x: 1}\nd: ! 12\n")
    seed(t, "json", '{"strategy": "nodg", "rate": 2.0, "seed": 18446744073709551615, "n": "5", '
         '"list": [1, [2]], "flag": true, "slo": null, "u": "\\u00e9\\ud83d\\ude00"}')
    seed(t, "json_deep", '{"a": ' + "[" * 70 + "]" * 70 + "}")
    seed(t, "json_huge_number", '{"a": 1e400, "b": -1e400}')
    seed(t, "json_top_list", "[1, 2]")
    seed(t, "json_null", "null")
    seed(t, "json_broken", '{"a": 1,')
    seed(t, "yaml_flow_map", "{strategy: padg, tp: 2}")


# ---------------------------------------------------------------- gpu_profile
GPU_PROFILE_FILES = ["meta.json", "linear.csv", "attn_prefill.csv", "attn_decode.csv", "elementwise.csv",
                     "layer_mixed.csv"]


def head(name, n):
    """The header and the first n rows of one file of the real H100 profile (or None without it)."""
    path = os.path.join(PROFILE, name)
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return "".join(f.readlines()[:n + 1])


def gpu_profile():
    """Mode byte (see fuzz/gpu_profile_fuzz.cc): 0-5 one file over the toy profile, 6 all six files
    separated by NUL, 7 one CSV against header number (next byte)."""
    t = "gpu_profile"
    meta = '{"gpu": "toy", "models": {"toy": [8, 2, 2, 2, 16, 32]}, "tps": {"toy": [1]}}'
    linear = ("model,tp,op,tokens,k,n,time_us\n"
              "toy,1,qkv,1,8,24,20\ntoy,1,qkv,2,8,24,30\ntoy,1,qkv,4,8,24,26\ntoy,1,o,1,8,8,12\ntoy,1,o,4,8,8,15\n"
              "toy,1,gate_up,1,8,32,30\ntoy,1,gate_up,4,8,32,40\ntoy,1,down,1,16,8,14\ntoy,1,down,4,16,8,18\n"
              "toy,1,lm_head,1,8,32,50\ntoy,1,lm_head,4,8,32,62\n")
    prefill = "model,tp,q_len,kv_len,time_us\ntoy,1,16,16,10\ntoy,1,32,32,20\ntoy,1,16,32,14\ntoy,1,32,48,30\n"
    decode = ("model,tp,batch,kv_len,time_us,kv_read_GBps\ntoy,1,1,128,10,1\ntoy,1,2,128,12,1\n"
              "toy,1,1,256,11,1\ntoy,1,2,256,16,1\n")
    elem = ("model,op,tokens,time_us\ntoy,rmsnorm,1,500\ntoy,rmsnorm,4096,100\ntoy,rmsnorm,8192,150\n"
            "toy,residual_add,4096,20\ntoy,residual_add,8192,30\ntoy,silu_mul,4096,40\ntoy,silu_mul,8192,72\n")
    mixed = ("model,prefill_tokens,decode_batch,decode_kv_len,measured_eager_us,measured_cuda_graph_us,op_sum_us\n"
             "toy,0,2,128,100,79.740885,100\n")
    toy = [meta, linear, prefill, decode, elem, mixed]
    for i, (name, text) in enumerate(zip(GPU_PROFILE_FILES, toy)):
        seed(t, "toy_" + name.replace(".", "_"), bytes([i]) + text.encode())
    seed(t, "toy_all", b"\x06" + b"\0".join(x.encode() for x in toy))
    seed(t, "toy_no_layer_mixed", b"\x06" + b"\0".join(x.encode() for x in toy[:5]))
    # Variants of one file over the toy profile.
    seed(t, "meta_two_models_tps", b"\x00" + b'{"models": {"toy": [8, 2, 2, 2, 16, 32], "big": [8192, 80, 64, 8, '
         b'28672, 32000]}, "tps": {"toy": [1, 2], "big": [1, 2, 4, 8]}}')
    seed(t, "meta_huge_dims", b"\x00" + b'{"models": {"toy": [4294967296, 2, 2, 2, 16, 32]}, "tps": {"toy": [1]}}')
    seed(t, "meta_not_json", b"\x00" + b'{"models": [}')
    seed(t, "linear_crlf_blank", b"\x01" + linear.replace("\n", "\r\n").encode() + b"\r\n\r\n")
    seed(t, "linear_bad_fields", b"\x01" + b"model,tp,op,tokens,k,n,time_us\ntoy,1,qkv,1,8,24\ntoy,1,qkv,x,8,24,1\n")
    seed(t, "prefill_huge_time", b"\x02" + b"model,tp,q_len,kv_len,time_us\ntoy,1,16,16,1e308\ntoy,1,32,32,1.7e308\n")
    seed(t, "prefill_tiny_time", b"\x02" + b"model,tp,q_len,kv_len,time_us\ntoy,1,16,16,1e-300\ntoy,1,2147483647,"
         b"2147483647,5e-324\n")
    seed(t, "decode_big_context", b"\x03" + b"model,tp,batch,kv_len,time_us,kv_read_GBps\ntoy,1,1,2147483647,10,1\n"
         b"toy,1,2147483647,1,999999999,1\n")
    seed(t, "elementwise_large", b"\x04" + b"model,op,tokens,time_us\ntoy,rmsnorm,4096,1e9\ntoy,rmsnorm,2147483647,1e-9\n"
         b"toy,residual_add,4096,20\ntoy,residual_add,4097,30\ntoy,silu_mul,4096,40\ntoy,silu_mul,8192,72\n")
    seed(t, "mixed_prefill_rows", b"\x05" + mixed.encode() + b"toy,512,0,0,300,250,310\ntoy,100,16,4096,400,350,420\n")
    seed(t, "mixed_no_tokens", b"\x05" + mixed.encode() + b"toy,0,0,0,1,1,1\n")
    # The real profile's headers with a few rows (needs ../shared/data): all files, then each CSV alone.
    real = [head(name, 40 if name == "meta.json" else 12) for name in GPU_PROFILE_FILES]
    if all(x is not None for x in real):
        with open(os.path.join(PROFILE, "meta.json")) as f:
            real[0] = f.read()
        seed(t, "h100_heads", b"\x06" + b"\0".join(x.encode() for x in real))
        for i, name in enumerate(GPU_PROFILE_FILES[1:]):
            seed(t, "csv_h100_" + name.replace(".", "_"), bytes([7, i]) + real[i + 1].encode())
    seed(t, "csv_empty", b"\x07\x00")
    seed(t, "csv_header_only", b"\x07\x03model,op,tokens,time_us\n")


# ---------------------------------------------------------------- meminfo
def meminfo():
    t = "meminfo"
    host = ("MemTotal:       24608572 kB\nMemFree:        10236644 kB\nMemAvailable:   20123456 kB\n"
            "Buffers:          143220 kB\nCached:          9608744 kB\nSwapCached:            0 kB\n"
            "HugePages_Total:       0\nHugepagesize:       2048 kB\n")
    seed(t, "host", host)
    seed(t, "first_line", "MemAvailable: 1 kB\n")
    seed(t, "no_newline", "MemTotal: 5 kB\nMemAvailable:\t\t7 kB")
    seed(t, "missing", "MemTotal: 5 kB\nMemFree: 3 kB\n")
    seed(t, "wrong_unit", "MemAvailable: 12 MB\n")
    seed(t, "negative", "MemAvailable: -5 kB\n")
    seed(t, "negative_zero", "MemAvailable: -0 kB\n")
    seed(t, "huge", "MemAvailable: 99999999999999999999 kB\n")
    seed(t, "key_prefix", "MemAvailableX: 5 kB\nMemAvailable: 6 kB\n")
    seed(t, "empty", "")


if __name__ == "__main__":
    targets = {"openai_request": openai_request, "http_request": http_request, "sse_parser": sse_parser,
               "chat_template": chat_template, "tokenizers": tokenizers, "gguf": gguf_seeds,
               "config_text": config_text, "gpu_profile": gpu_profile, "meminfo": meminfo}
    for name in sys.argv[1:] or targets:
        targets[name]()
    for target, n in sorted(written.items()):
        print(f"{target}: {n} seeds")
