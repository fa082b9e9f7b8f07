#!/usr/bin/env python3
"""Hugging Face tokenizers' ids for Llama-family tokenizer.json files, built here (nothing can be
downloaded): the reference for tests/tokenizer/tokenizer_families_test.cc.

Builds with the `tokenizers` library (0.20), into OUT/<name>/tokenizer.json:
  llama3    byte-level BPE trained with Llama 3's Split pattern + ByteLevel(use_regex false),
            ignore_merges (plus whole-word tokens no merge reaches), template <|begin_of_text|> $A
  qwen2     the same with Qwen2's pattern (single digits) and its NFC normalizer, no template
  smollm2   Digits(individual_digits) + ByteLevel(use_regex true, GPT-2's pattern)
  llama2    SentencePiece-style BPE as transformers' LlamaConverter lays it out: normalizer
            Prepend("▁") + Replace(" ", "▁"), <0x00>..<0xFF> byte fallback, unk <unk>, fuse_unk,
            decoder Replace/ByteFallback/Fuse/Strip, template <s> $A
  mistral   the same model, Metaspace(prepend_scheme first, split false) instead of the normalizer,
            template <s> $A </s>
  metaspace the same model, Metaspace(prepend_scheme always, split true)
  unk       llama2 without byte fallback tokens: characters outside the vocabulary become <unk>
and the texts CI has into OUT/texts/: the fortunes files (Debian's package, as scripts/demo.sh finds
them), README.md, a generated stress text, and tiny shakespeare and WikiText-2 valid where the
shared data folder has them. Texts are read as bytes and decoded with errors="replace".

OUT/manifest.json lists {tokenizer, text, mode, ids, decoded}: mode "lines" encodes each line
(split at "\\n") with add_special_tokens=True, one line of ids per line; mode "whole" encodes the
text with add_special_tokens=False into one line of ids and writes decode(ids,
skip_special_tokens=False) to `decoded`. The large texts are encoded by lines, for llama3 and
llama2 only. Exit 3 when `tokenizers` cannot be imported.

Usage: llama_tokenizer_reference.py OUT SOURCE_DIR [SHARED_DATA_DIR]
"""
import json
import os
import random
import sys
import unicodedata

try:
    from tokenizers import (AddedToken, Regex, Tokenizer, decoders, models, normalizers,
                            pre_tokenizers, processors, trainers)
except ImportError as error:
    print(f"tokenizers is not importable: {error}", file=sys.stderr)
    sys.exit(3)

LLAMA3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
                  r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|"
                 r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
FORTUNES = "/usr/share/games/fortunes"
# The large texts (fortunes, corpora) are encoded line by line for these two only, to keep the test
# short (tokenizers encodes about 1 MB/s); every tokenizer gets the stress text and the README both
# line by line and whole.
LARGE_TEXTS_FOR = ("llama3", "llama2")


def read_text(path):
    with open(path, "rb") as stream:
        return stream.read().decode("utf-8", errors="replace")


def stress_text():
    """Every Unicode general category (a few code points each) in contexts that exercise the
    patterns' branches, digit runs, contractions in both cases, whitespace runs, added tokens."""
    rng = random.Random(38)
    by_category = {}
    for code in range(0x110000):
        if 0xD800 <= code <= 0xDFFF or code in (0x0A, 0x0D):
            continue
        by_category.setdefault(unicodedata.category(chr(code)), []).append(code)
    lines = []
    for category in sorted(by_category):
        codes = by_category[category]
        picked = codes[:4] + rng.sample(codes, min(len(codes), 12))
        for code in picked:
            c = chr(code)
            lines.append(f" a{c}b {c}1 {c}{c} 's{c}\t{c}  {c}x {c}'S 9{c}9 ")
        lines.append(category + ": " + "".join(chr(code) for code in picked))
    lines += [
        "1 12 123 1234 12345 123456 1234567 12345678901234567890 3.14159 1,000,000 -42 +7e10",
        "٣٤٥ ٣٤٥٦٧ ১২৩৪৫ ①②③④⑤ Ⅻ Ⅳ ½¾ x²³ 0x1F 1st 2nd 3rd 4th 10%",
        "it's IT'S It'S I'm I'M we'll WE'LL They've THEY'VE she'd SHE'D you're YOU'RE don't DON'T",
        "'s 't 're 've 'm 'll 'd 'S 'T 'RE 'VE 'M 'LL 'D ''s ' s 'ſ 'ſt Kelvin 'K ’s ’S",
        "tab\tseparated\t\tvalues\t \t end",
        "trailing spaces   ",
        "  leading spaces and  double  spaces   between   words",
        "ideographic\u3000space\u3000\u3000twice",
        "mongolian\u180evowel\u180e\u180eseparator \u180e x",
        "no-break\u00a0space\u2009thin\u200bzero-width\u2028line\u2029para\u0085nel\u202fnnbsp",
        "\t\t\t",
        "",
        "   ",
        "crlf line\r",
        "special <s> tokens </s> inside <|begin_of_text|>text<|end_of_text|> and <|endoftext|>",
        "<s><s></s><unk> glued<s>together",
        "emoji 🙂👍🏽 👨‍👩‍👧‍👦 🇫🇷 flags and ZWJ",
        "mixed 漢字かなカナ한국어 العربية עברית ไทย हिन्दी Ελληνικά Русский",
        "combining e\u0301 a\u0308 n\u0303 and precomposed é ä ñ",
        "punctuation!!! ??? ... --- ___ *** ((())) [[]] {{}} <<>> ``` \"\"\" ''' ;;; :::",
        "code: def f(x):\n    return x**2  # comment",
        "url https://example.com/path?q=1&r=2#frag email a.b@c.de",
        "\n\n\nthree newlines before, two after\n\n",
        "    indented four\n\tindented tab\n  \n",
    ]
    return "\n".join(lines + whitespace_lines()) + "\n"


# Code points the engines could disagree on being space: Unicode's White_Space (which Oniguruma's,
# Python's and zero's \s are), U+180E (PCRE2's own \s in UCP mode still has it), and U+200B.
SPACES = "\t\x0b\x0c \x85\xa0\u1680\u2000\u2009\u200a\u2028\u2029\u202f\u205f\u3000\u180e\u200b"


def whitespace_lines():
    """Each space-like code point between words, in runs, before letters, digits and punctuation
    and at the end: where a different \\s splits differently (the training corpus repeats these,
    so merges join the code point to its neighbours and a different split gives other ids)."""
    return [f"word{c}word {c}word word{c} x {c} {c}{c}y{c}{c} {c}1{c}. {c}'s end{c}  {c}"
            for c in SPACES]


def train_byte_level(corpus, pattern, digits, nfc=False):
    tokenizer = Tokenizer(models.BPE(ignore_merges=pattern is not None))
    if nfc:
        tokenizer.normalizer = normalizers.NFC()
    if pattern is not None:
        tokenizer.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(pattern), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    else:
        tokenizer.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Digits(individual_digits=digits),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)])
    tokenizer.decoder = decoders.ByteLevel()
    specials = ["<|begin_of_text|>", "<|end_of_text|>", "<|endoftext|>"]
    trainer = trainers.BpeTrainer(vocab_size=3000, min_frequency=2, special_tokens=specials,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tokenizer.train_from_iterator(corpus, trainer)
    return tokenizer


def with_whole_words(tokenizer, words):
    """Adds byte-level tokens for whole words that no merge produces: with ignore_merges the word
    is one token, without it BPE splits it."""
    data = json.loads(tokenizer.to_str())
    vocab = data["model"]["vocab"]
    mapping = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    for word in words:
        form = "".join(piece for piece, _ in mapping.pre_tokenize_str(word))
        if form not in vocab:
            vocab[form] = len(vocab)
    return Tokenizer.from_str(json.dumps(data))


def sentencepiece_model(corpus, byte_fallback):
    """A Llama-2-style vocabulary: <unk> <s> </s>, <0x00>..<0xFF>, then pieces learned with "▁"
    for spaces, plus whitespace-run pieces as SentencePiece has them."""
    learner = Tokenizer(models.BPE())
    learner.normalizer = normalizers.Sequence([normalizers.Prepend("▁"),
                                               normalizers.Replace(" ", "▁")])
    learner.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="never",
                                                     split=True)
    trainer = trainers.BpeTrainer(vocab_size=2500, min_frequency=2, limit_alphabet=150,
                                  show_progress=False)
    learner.train_from_iterator(corpus, trainer)
    learned = json.loads(learner.to_str())["model"]
    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2}
    if byte_fallback:
        for byte in range(256):
            vocab[f"<0x{byte:02X}>"] = len(vocab)
    for piece, _ in sorted(learned["vocab"].items(), key=lambda item: item[1]):
        vocab.setdefault(piece, len(vocab))
    merges = [tuple(merge) if isinstance(merge, list) else tuple(merge.split(" "))
              for merge in learned["merges"]]
    for left, right in [("▁", "▁"), ("▁▁", "▁▁"), ("▁▁▁▁", "▁▁▁▁"), ("\n", "\n")]:
        if left in vocab and right in vocab and left + right not in vocab:
            vocab[left + right] = len(vocab)
            merges.append((left, right))
    return models.BPE(vocab=vocab, merges=merges, unk_token="<unk>", fuse_unk=True,
                      byte_fallback=byte_fallback)


def sentencepiece_tokenizer(model, metaspace, template):
    tokenizer = Tokenizer(model)
    if metaspace is None:
        tokenizer.normalizer = normalizers.Sequence([normalizers.Prepend("▁"),
                                                     normalizers.Replace(" ", "▁")])
    else:
        scheme, split = metaspace
        tokenizer.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme=scheme,
                                                           split=split)
    tokenizer.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(),
                                           decoders.Fuse(), decoders.Strip(" ", 1, 0)])
    tokenizer.add_special_tokens([AddedToken(token, normalized=False, special=True)
                                  for token in ("<unk>", "<s>", "</s>")])
    set_template(tokenizer, template)
    return tokenizer


def set_template(tokenizer, single, byte_level=False):
    names = [word for word in single.split() if word != "$A"]
    template = processors.TemplateProcessing(
        single=single, pair=single + " $B",
        special_tokens=[(name, tokenizer.token_to_id(name)) for name in dict.fromkeys(names)])
    if byte_level:
        tokenizer.post_processor = processors.Sequence([
            processors.ByteLevel(trim_offsets=False), template])
    else:
        tokenizer.post_processor = template


def main():
    if len(sys.argv) not in (3, 4):
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    out, source = sys.argv[1], sys.argv[2]
    shared = sys.argv[3] if len(sys.argv) == 4 else ""
    os.makedirs(os.path.join(out, "texts"), exist_ok=True)

    texts = {"stress": stress_text(), "readme": read_text(os.path.join(source, "README.md"))}
    if os.path.isdir(FORTUNES):
        names = sorted(entry.name for entry in os.scandir(FORTUNES)
                       if entry.is_file(follow_symlinks=False) and not entry.name.endswith(".dat"))
        texts["fortunes"] = "".join(read_text(os.path.join(FORTUNES, name)) for name in names)
    for name, relative in (("tinyshakespeare", "tinyshakespeare/input.txt"),
                           ("wikitext2", "wikitext-2/wiki.valid.tokens")):
        if shared and os.path.isfile(os.path.join(shared, relative)):
            texts[name] = read_text(os.path.join(shared, relative))
    for name, text in texts.items():
        with open(os.path.join(out, "texts", name + ".txt"), "w", encoding="utf-8",
                  newline="") as stream:
            stream.write(text)

    corpus = texts["stress"].split("\n") + whitespace_lines() * 20 + texts["readme"].split("\n")
    corpus += texts.get("fortunes", "").split("\n")[:20000]

    tokenizers = {}
    llama3 = train_byte_level(corpus, LLAMA3_PATTERN, False)
    llama3 = with_whole_words(llama3, [" KING", " ROMEO", " Citizen", " fortune", " zero",
                                       " tokenizer", "Hello", " computers"])
    set_template(llama3, "<|begin_of_text|> $A", byte_level=True)
    tokenizers["llama3"] = llama3
    tokenizers["qwen2"] = train_byte_level(corpus, QWEN2_PATTERN, False, nfc=True)
    tokenizers["smollm2"] = train_byte_level(corpus, None, True)
    with_fallback = sentencepiece_model(corpus, True)
    tokenizers["llama2"] = sentencepiece_tokenizer(with_fallback, None, "<s> $A")
    tokenizers["mistral"] = sentencepiece_tokenizer(with_fallback, ("first", False), "<s> $A </s>")
    tokenizers["metaspace"] = sentencepiece_tokenizer(with_fallback, ("always", True), "<s> $A")
    tokenizers["unk"] = sentencepiece_tokenizer(sentencepiece_model(corpus, False), None, "<s> $A")

    manifest = []
    for name, tokenizer in tokenizers.items():
        folder = os.path.join(out, name)
        os.makedirs(folder, exist_ok=True)
        tokenizer.save(os.path.join(folder, "tokenizer.json"))
        for text_name, text in texts.items():
            small = text_name in ("stress", "readme")
            if not small and name not in LARGE_TEXTS_FOR:
                continue
            stem = os.path.join(folder, text_name)
            lines = text.split("\n")
            encodings = tokenizer.encode_batch(lines, add_special_tokens=True)
            with open(stem + ".lines.ids", "w") as stream:
                for encoding in encodings:
                    stream.write(" ".join(map(str, encoding.ids)) + "\n")
            manifest.append({"tokenizer": name, "text": text_name, "mode": "lines",
                             "ids": stem + ".lines.ids"})
            if not small:
                continue
            ids = tokenizer.encode(text, add_special_tokens=False).ids
            with open(stem + ".whole.ids", "w") as stream:
                stream.write(" ".join(map(str, ids)) + "\n")
            with open(stem + ".whole.decoded", "w", encoding="utf-8", newline="") as stream:
                stream.write(tokenizer.decode(ids, skip_special_tokens=False))
            manifest.append({"tokenizer": name, "text": text_name, "mode": "whole",
                             "ids": stem + ".whole.ids", "decoded": stem + ".whole.decoded"})
    with open(os.path.join(out, "manifest.json"), "w") as stream:
        json.dump(manifest, stream, indent=1)


if __name__ == "__main__":
    main()
