#!/usr/bin/env python3
"""Writes tests/tokenizer/gpt2_edge_cases.json: edge-case inputs with their GPT-2 ids.

Ids come from tiktoken (built offline from the local encoder.json + vocab.bpe) and each case is
cross-checked against Hugging Face tokenizers and OpenAI's encoder.py algorithm
(gpt2_tokenizer_reference.py); the script fails if they disagree. Inputs are stored as hex because some
are invalid UTF-8; their ids are those of bytes.decode("utf-8", errors="replace").
Run once by hand (needs pip's tiktoken and tokenizers):
  python3 tests/golden/make_tokenizer_edge_cases.py ../shared/data/gpt2 tests/tokenizer/gpt2_edge_cases.json
"""
import json
import random
import sys

import gpt2_tokenizer_reference


def edge_cases():
    s = [
        "hello world", "This is some text", "indivisible", " ", "\t", "", "hello 👋 world 🌍",
        "hello <|endoftext|>", "<|endoftext|>", "a<|endoftext|>b<|endoftext|><|endoftext|>",
        "<|endoftext", "<|endoftext|", "<|ENDOFTEXT|>",
        # whitespace runs
        "  ", "   ", "a  b", "a   b", "a \n b", "a\n\nb", "a\n\n\nb", "\n", "\n\n", "\n \n", " \n",
        "\r\n", "a\r\nb", "\t\t", "a\t\tb", " \t x", "x \t", "x  ", "   x", "\u00a0x", "a\u00a0\u00a0b",
        "\u3000x", "a\u2028b", "a\u2029b", "\x0b\x0c", "a\x1cb", "a\x1d\x1e\x1fb", "a\x85b",
        "\u200bx", "a\u2009b", "\u180e", " \u180e", "a \u180e b", "\u180e\u180e x", "a\u1680b",
        " \u1680 x", "a\u202f\u205fb", "\x1c\x1d \x1e\x1f x", " \x85 x", "\ufeffhello", " " * 17 + "x", "\n" * 9 + "x",
        "x" + " " * 33, "\t \n \r\n  \t", " a", "  a", "a ", "a  ",
        # digits and numbers
        "123", "1234567890", " 42", "3.14159", "1,000,000", "-5", "+7", "1e10", "0x1F", "١٢٣",
        "٣.١٤", "½", "x²", "Ⅻ", "①②③", "二十", "１２３", "2023-10-01", "12:30pm", "$100", "100%",
        "v1.2.3", "a1b2c3", "९८७",
        # contractions (case-sensitive in GPT-2's pattern)
        "don't", "I'm", "you're", "we've", "she'll", "he'd", "it's", "'s", "'t", "'re", "'ve", "'m",
        "'ll", "'d", "I'LL", "DON'T", "'S", "''s", "'''", "o'clock", "rock 'n' roll", "'sup",
        "it’s", "Let's go", "y'all'd've",
        # punctuation
        "!!!", "?!", "...", "--", "—", "“quoted”", "«français»", "(a)", "[b]", "{c}", "<d>", "a.b",
        "foo@bar.com", "https://example.com/a?b=c&d=e", "#include <stdio.h>", "x += 1;",
        "def f(x):\n    return x", "    indented", "\ttab", "C++", "a_b_c", "__init__",
        # scripts
        "Привет мир", "Γειά σου", "שלום עולם", "مرحبا بالعالم", "नमस्ते दुनिया", "こんにちは世界",
        "你好，世界", "안녕하세요", "สวัสดีชาวโลก", "Xin chào thế giới", "Merhaba dünya", "ǅemal",
        "Ωmega", "ﬁne", "ß", "İstanbul", "ᚠᛇᚻ", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢", "𝟙𝟚𝟛", "ℌ", "ǆ",
        # combining marks and emoji sequences
        "e\u0301", "cafe\u0301", "a\u0300\u0301\u0302", "\u0301", "👨‍👩‍👧‍👦", "👍🏽", "🇫🇷🇩🇪", "❤️",
        "🙂🙂🙂", "x🙂y", " 🙂", "🏳️‍🌈", "1️⃣", "©®™", "☃", "\U0010FFFF", "\U000E0001",
        "\ue000", "\x00", "\x01\x02", "\x7f", "a\x00b",
        # very long words and runs
        "a" * 2000, "ab" * 1000, "abc" * 700, "7" * 1500, " " * 1500, "\n" * 800, "🙂" * 300,
        "x" * 999 + " " + "y" * 999, "Supercalifragilisticexpialidocious" * 20,
        "-" * 1000, "=" * 777, "\t" * 500 + "x", ". " * 600,
    ]
    cases = [text.encode("utf-8") for text in s]
    # invalid UTF-8: decoded with errors="replace" by the references
    cases += [
        b"\xff", b"\xfe\xff", b"\xc3", b"\xc3(", b"abc\xe2\x82", b"\xe2\x82abc", b"\xe2\x28\xa1",
        b"\xed\xa0\x80", b"\xed\xbf\xbf", b"\xf4\x90\x80\x80", b"\xf5\x80\x80\x80", b"\xc0\xaf",
        b"\xc1\xbf", b"\xe0\x80\xaf", b"\xe0\x9f\xbf", b"\xf0\x80\x80\xaf", b"\xf0\x8f\xbf\xbf",
        b"\x80", b"\x80\x80\x80", b"\xbf", b"a\x80b", b"hello \xff world", b"\xf0\x9f\x98",
        b"\xf0\x9f\x98 x", b"\xf0\x9f", b"\xf0", b"\xe2\x82\xac\xe2\x82", b"\xc3\xa9\xc3",
        b"don\x92t", b"caf\xe9", b"\xef\xbf\xbd", b"\xef\xbb\xbfbom", b" \xff\xff ", b"\xff" * 50,
        b"1\xff2", b"'\xffs", b"\xf8\x88\x80\x80\x80", b"\xfc\x84\x80\x80\x80\x80",
    ]
    rng = random.Random(1234)
    alphabet = (list("abcXYZ019 '\t\n\r.,!?-_") + ["\u00a0", "\u3000", "é", "ß", "ж", "ש", "ع",
                "中", "ア", "한", "\u0301", "٣", "½", "²", "🙂", "👍", "\u200d", "\ufe0f", "’",
                "\x0b", "\x1c", "\x85", "\u2028", "𝔘", "\U00010400", "<|endoftext|>"])
    for length in [1, 2, 3, 5, 8, 13, 21, 34, 55, 89] * 20:
        cases.append("".join(rng.choice(alphabet) for _ in range(length)).encode("utf-8"))
    for length in [4, 9, 17, 40] * 10:
        cases.append(bytes(rng.randrange(256) for _ in range(length)))
    return cases


def main():
    tokenizer_dir, out_path = sys.argv[1], sys.argv[2]
    tiktoken_encode = gpt2_tokenizer_reference.make_tiktoken(tokenizer_dir)
    hf_encode = gpt2_tokenizer_reference.make_tokenizers(tokenizer_dir)
    openai_encode = gpt2_tokenizer_reference.make_encoder(tokenizer_dir)
    out = []
    disagreements = 0
    for data in edge_cases():
        text = data.decode("utf-8", errors="replace")
        ordinary = tiktoken_encode(text, False)
        special = tiktoken_encode(text, True)
        if openai_encode(text, False) != ordinary or openai_encode(text, True) != special or \
                hf_encode(text, True) != special:
            disagreements += 1
            print("references disagree on", repr(text), file=sys.stderr)
            continue
        out.append({"hex": data.hex(), "ids": ordinary, "special_ids": special})
    with open(out_path, "w") as f:
        json.dump({"source": "tiktoken " + __import__("tiktoken").__version__ +
                   ", checked against tokenizers " + __import__("tokenizers").__version__ +
                   " and encoder.py", "cases": out}, f, separators=(",", ":"))
        f.write("\n")
    print(f"{len(out)} cases written, {disagreements} left out (references disagree)")
    return 1 if disagreements > 10 else 0


if __name__ == "__main__":
    sys.exit(main())
