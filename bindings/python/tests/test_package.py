"""The package itself: type stubs generated at build time beside the extension."""

import pathlib

import zero


def test_stubs_are_generated_beside_the_extension():
    package = pathlib.Path(zero.__file__).parent
    stub = (package / "_zero.pyi").read_text()
    for name in ("class Tokenizer", "def encode_batch", "class TokenBatch", "def estimate",
                 "def train", "def checkpoint_info"):
        assert name in stub
    assert (package / "py.typed").exists()


def test_words_from_keywords():
    from zero._flags import words
    assert words({"a": True, "b": False, "c": [1, 2], "d": None, "e": 5e-05, "f": "x y",
                  "g": -1}) == ["--a", "True", "--b", "False", "--c", "1,2", "--e", "5e-05",
                                "--f", "x y", "--g=-1"]
