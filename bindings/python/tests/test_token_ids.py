"""Training data given from Python as token ids (issue 43): rows of ids train as the texts they
tokenize to train (the same losses, bit for bit), as a list of lists of int, a list of 1-D
arrays or a 2-D array (strided too); bad ids and element types are errors naming the argument,
row and position; the ids path needs no NumPy."""

import subprocess

import pytest

import zero
from conftest import PYTHON, WORDS, python_env, tiny_train_flags

np = pytest.importorskip("numpy")


def texts():
    """400 examples of 8 to 19 words (no two lines alike in length, so rows are ragged)."""
    return [" ".join(WORDS[(i * 5 + k * 3) % len(WORDS)] for k in range(8 + i % 12))
            for i in range(400)]


@pytest.fixture(scope="module")
def tokenizer_dir(trained):
    """The tokenizer the session's tiny run learned and saved beside its model."""
    return trained[0]


def flags(corpus, output_dir, tokenizer_dir, **extra):
    result = tiny_train_flags(corpus, output_dir, tokenizer_name=tokenizer_dir, max_steps=6,
                              **extra)
    del result["train_file"]
    return result


def encode(tokenizer_dir, examples):
    tokenizer = zero.Tokenizer.from_pretrained(str(tokenizer_dir))
    return [tokenizer.encode(text) for text in examples]


def losses(result):
    return [entry["loss"] for entry in result["log_history"] if "loss" in entry]


def test_ids_train_and_evaluate_as_the_texts_they_tokenize_to(corpus, tmp_path, tokenizer_dir):
    examples = texts()
    ids = encode(tokenizer_dir, examples)
    from_texts = zero.train(train_dataset=examples[40:], eval_dataset=examples[:40],
                            **flags(corpus, tmp_path / "texts", tokenizer_dir), verbose=False)
    from_lists = zero.train(train_dataset=[row.tolist() for row in ids[40:]],
                            eval_dataset=[row.astype(np.int64) for row in ids[:40]],
                            **flags(corpus, tmp_path / "lists", tokenizer_dir), verbose=False)
    assert len(losses(from_texts)) == 6
    assert losses(from_lists) == losses(from_texts)
    assert from_texts["eval_loss"] is not None
    assert from_lists["eval_loss"] == from_texts["eval_loss"]


def test_train_ids_alone_split_off_validation_rows_as_texts_do(corpus, tmp_path, tokenizer_dir):
    examples = texts()
    ids = encode(tokenizer_dir, examples)
    split = {"validation_split_percentage": 10}
    from_texts = zero.train(train_dataset=examples,
                            **flags(corpus, tmp_path / "texts", tokenizer_dir, **split),
                            verbose=False)
    from_ids = zero.train(train_dataset=ids,  # 1-D int32 arrays, as encode gives them
                          **flags(corpus, tmp_path / "ids", tokenizer_dir, **split),
                          verbose=False)
    assert losses(from_ids) == losses(from_texts)
    assert from_ids["eval_loss"] == from_texts["eval_loss"]


def test_rows_of_block_size_in_a_2d_array_are_the_blocks(corpus, tmp_path, tokenizer_dir):
    # run_clm's group_texts, written here: the texts' ids concatenated, cut into rows of
    # block_size (16), the remainder dropped. Fewer than 1000 rows: one group, so group_texts
    # gives these rows back and the run is the texts' run.
    examples = texts()
    stream = np.concatenate(encode(tokenizer_dir, examples))
    blocks = stream[: len(stream) // 16 * 16].reshape(-1, 16)
    assert blocks.shape[0] < 1000 and blocks.dtype == np.int32
    no_eval = {"do_eval": False, "validation_split_percentage": 0}  # else 5% of rows vs texts
    from_texts = zero.train(train_dataset=examples,
                            **flags(corpus, tmp_path / "texts", tokenizer_dir, **no_eval),
                            verbose=False)
    from_array = zero.train(train_dataset=blocks,
                            **flags(corpus, tmp_path / "array", tokenizer_dir, **no_eval),
                            verbose=False)
    wide = np.zeros((blocks.shape[0], 32), dtype=np.int64)
    wide[:, ::2] = blocks
    strided = wide[:, ::2]  # not contiguous: every other int64
    assert not strided.flags["C_CONTIGUOUS"]
    from_strided = zero.train(train_dataset=strided,
                              **flags(corpus, tmp_path / "strided", tokenizer_dir, **no_eval),
                              verbose=False)
    assert len(losses(from_texts)) == 6
    assert losses(from_array) == losses(from_texts)
    assert losses(from_strided) == losses(from_texts)


def test_ids_outside_the_vocabulary_are_value_errors_naming_row_and_position(
        corpus, tmp_path, tokenizer_dir):
    base = flags(corpus, tmp_path / "out", tokenizer_dir)
    vocab = zero.Tokenizer.from_pretrained(str(tokenizer_dir)).vocab_size
    rows = [[1, 2, 3, 4] * 8] * 20
    with pytest.raises(ValueError, match=r"^train_dataset\[1\]\[2\]: token id -1 is negative"):
        zero.train(train_dataset=[[1, 2, 3], [4, 5, -1]], **base, verbose=False)
    with pytest.raises(zero.InputError,
                       match=rf"^eval_dataset\[2\]\[1\]: token id {vocab} is not below the "
                             rf"model's vocab_size {vocab}"):
        zero.train(train_dataset=rows, eval_dataset=[[5], [], [vocab - 1, vocab, 0]], **base,
                   verbose=False)
    with pytest.raises(zero.InputError, match=rf"^train_dataset\[0\]\[1\]: token id {2**60} is "
                                              r"larger than any token id"):
        zero.train(train_dataset=np.array([[0, 2**40]], dtype=np.int64) * 2**20, **base,
                   verbose=False)


def test_wrong_element_types_are_type_errors_naming_the_argument(corpus, tmp_path, tokenizer_dir):
    base = flags(corpus, tmp_path / "out", tokenizer_dir)
    cases = [
        ([[1, 2.5]], r"^train_dataset\[0\]\[1\]: expected an int token id, got float"),
        ([[1, True]], r"^train_dataset\[0\]\[1\]: expected an int token id, got bool"),
        ([[1, 2], "three"], r"^train_dataset\[1\]: expected a row of token ids, got str"),
        ([[1, 2], 3], r"^train_dataset\[1\]: expected a row of token ids .*got int"),
        (np.ones((4, 16), dtype=np.float32),
         r"^train_dataset: expected token ids of int32 or int64, got an array of format 'f'"),
        ([np.ones(16, dtype=np.uint16)],
         r"^train_dataset\[0\]: expected token ids of int32 or int64, got an array of format 'H'"),
        (np.ones((2, 2, 4), dtype=np.int32),
         r"^train_dataset: expected a 2-D array of token ids .* got an array of 3 dimension"),
        ([np.ones((2, 8), dtype=np.int64)],
         r"^train_dataset\[0\]: expected a 1-D array of token ids, got an array of 2 dimension"),
    ]
    for value, message in cases:
        with pytest.raises(zero.ArgumentTypeError, match=message):
            zero.train(train_dataset=value, **base, verbose=False)
        assert issubclass(zero.ArgumentTypeError, TypeError)
    with pytest.raises(zero.ArgumentTypeError, match=r"^eval_dataset\[0\]\[0\]: expected an int"):
        zero.train(train_dataset=[[1, 2]], eval_dataset=[[None]], **base, verbose=False)


def test_ids_need_the_tokenizer_and_no_files(corpus, tmp_path, tokenizer_dir):
    rows = [[1, 2, 3, 4] * 8] * 20
    base = flags(corpus, tmp_path / "out", tokenizer_dir)
    with pytest.raises(zero.InputError, match="need the tokenizer that made them"):
        zero.train(train_dataset=rows, **{**base, "tokenizer_name": None}, verbose=False)
    with pytest.raises(zero.InputError, match="^train_dataset: give train_dataset or train_file"):
        zero.train(train_dataset=rows, **{**base, "train_file": corpus}, verbose=False)
    with pytest.raises(zero.InputError, match="eval_dataset: give the data as token ids or as "
                                              "files"):
        zero.train(train_dataset=texts(), eval_dataset=rows, **base, verbose=False)


def test_ids_need_no_numpy():
    """The module imports, and reads rows of ids (lists, and array.array through the buffer
    protocol), with NumPy unimportable."""
    script = (
        "import sys; sys.modules['numpy'] = None\n"
        "import array, zero\n"
        "rows = zero._zero.token_dataset('train_dataset', [[1, 2, 3], array.array('q', [4, 5]),"
        " array.array('i', [6])])\n"
        "print(rows.num_rows, rows.num_tokens)\n"
        "try:\n"
        "    zero._zero.token_dataset('train_dataset', [array.array('d', [1.0])])\n"
        "except TypeError as error:\n"
        "    print(error)\n")
    done = subprocess.run([PYTHON, "-c", script], capture_output=True, text=True,
                          env=python_env(), check=True)
    assert done.stdout.splitlines() == [
        "3 6",
        "train_dataset[0]: expected token ids of int32 or int64, got an array of format 'd' "
        "(8 bytes each)"]
