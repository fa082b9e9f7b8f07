"""zero.Tokenizer: GPT-2's ids, arrays without copies, encode_batch on threads with the GIL
released, decode. Every test but GPT-2's own ids runs twice: on a tokenizer `zero tokenizer
train` learns here from the repository's Markdown (no shared data: these run in CI), and on
GPT-2's (../shared/data, skipped where absent)."""

import os
import signal
import threading
import time

import numpy as np
import pytest

import zero


@pytest.fixture(scope="module", params=["trained", "gpt2"])
def tokenizer_dir(request):
    return request.getfixturevalue("trained_tokenizer_dir" if request.param == "trained"
                                   else "gpt2_dir")


@pytest.fixture(scope="module")
def tokenizer(tokenizer_dir):
    return zero.Tokenizer.from_pretrained(str(tokenizer_dir))


def test_encodes_as_gpt2(gpt2_dir):
    # OpenAI's GPT-2 ids (tiktoken.get_encoding("gpt2").encode_ordinary gives the same).
    tokenizer = zero.Tokenizer.from_pretrained(str(gpt2_dir))
    assert tokenizer.encode("Hello world").tolist() == [15496, 995]
    assert tokenizer.encode(" <|endoftext|>").tolist() == [1279, 91, 437, 1659, 5239, 91, 29]
    assert tokenizer.encode("<|endoftext|>", special=True).tolist() == [50256]
    assert tokenizer.vocab_size == 50257 and tokenizer.eot_token == 50256
    assert tokenizer.decode([15496, 995]) == "Hello world"


def test_the_trained_tokenizer_learnt_merges(trained_tokenizer_dir):
    # What the cases below run on in CI: 256 bytes, 1,743 merges and <|endoftext|> last.
    tokenizer = zero.Tokenizer.from_pretrained(str(trained_tokenizer_dir))
    assert tokenizer.vocab_size == 2000 and tokenizer.eot_token == 1999
    assert tokenizer.encode("<|endoftext|>", special=True).tolist() == [1999]
    text = "the optimizer states of every rank"
    assert len(tokenizer.encode(text)) < len(text) / 3
    assert tokenizer.decode(tokenizer.encode(text)) == text


def test_encode_returns_int32_without_a_copy(tokenizer):
    ids = tokenizer.encode("The GIL is released while encoding long texts.")
    assert ids.dtype == np.int32 and ids.ndim == 1
    assert not ids.flags.owndata
    assert isinstance(ids.base, zero.TokenBuffer)  # the C++ vector holding the ids
    assert ids.__array_interface__["data"][0] != 0


def test_batch_lines_are_views_of_one_buffer(tokenizer):
    lines = ["First Citizen:", "Before we proceed any further, hear me speak.", "", "All:"]
    batch = tokenizer.encode_batch(lines)
    assert len(batch) == 4
    assert isinstance(batch, zero.TokenBatch)
    for i, line in enumerate(lines):
        assert batch[i].tolist() == tokenizer.encode(line).tolist()
        assert batch[i].base is batch and not batch[i].flags.owndata
        assert np.shares_memory(batch[i], batch.ids) or len(batch[i]) == 0
    assert batch.ids.base is batch and batch.ids.dtype == np.int32
    assert batch.offsets.tolist()[0] == 0 and batch.offsets.tolist()[-1] == len(batch.ids)
    assert batch[-1].tolist() == batch[3].tolist()
    assert batch.tolist() == [tokenizer.encode(line).tolist() for line in lines]
    with pytest.raises(IndexError):
        batch[4]


def test_arrays_outlive_the_batch_and_tokenizer(tokenizer_dir):
    tokenizer = zero.Tokenizer.from_pretrained(str(tokenizer_dir))
    expected = tokenizer.encode("Hello world").tolist()
    line = tokenizer.encode_batch(["Hello world"] * 3)[1]
    del tokenizer
    assert line.tolist() == expected and len(expected) >= 2


def test_threads_give_the_same_ids(tokenizer, repository_lines):
    lines = repository_lines[:5000]
    one = tokenizer.encode_batch(lines, num_threads=1)
    assert len(one) == len(lines) and len(one.ids) > len(lines)
    for threads in (2, 3, 8):
        many = tokenizer.encode_batch(lines, num_threads=threads)
        assert np.array_equal(one.ids, many.ids) and np.array_equal(one.offsets, many.offsets)
    joined = tokenizer.encode("\n".join(lines[:200]))
    assert len(joined) > 0


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no os.fork on this platform")
def test_encode_batch_on_threads_in_a_forked_child(tokenizer, repository_lines):
    """A fork() child (a DataLoader worker) has none of the parent's pool threads: its own start."""
    lines = repository_lines[:2000]
    expected = tokenizer.encode_batch(lines, num_threads=2)
    pid = os.fork()
    if pid == 0:
        signal.alarm(30)  # a hang ends the child with SIGALRM
        batch = tokenizer.encode_batch(lines, num_threads=2)
        os._exit(0 if np.array_equal(batch.ids, expected.ids) else 1)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status), f"the child hung (signal {os.WTERMSIG(status)})"
    assert os.WEXITSTATUS(status) == 0, "the child's ids differ"


def test_encode_batch_releases_the_gil(tokenizer, repository_lines):
    lines = repository_lines * 20  # 0.2-0.4 s of encoding (repeated words hit the word cache)
    ticks = []
    stop = threading.Event()

    def count():
        while not stop.is_set():
            ticks.append(time.perf_counter())

    thread = threading.Thread(target=count)
    thread.start()
    time.sleep(0.05)
    start = time.perf_counter()
    tokenizer.encode_batch(lines, num_threads=1)
    end = time.perf_counter()
    stop.set()
    thread.join()
    duration = end - start
    assert duration > 0.05
    # The other thread ticks all through the call. With the GIL held it ticks only at the ends:
    # before the call takes the GIL and, for a switch interval or two (5 ms each), after it
    # returns and before `end` is read. So the call's ten tenths are counted, the first and last
    # left out.
    tenths = {int(10 * (t - start) / duration) for t in ticks if start < t < end}
    inner = sorted(tenths & set(range(1, 9)))
    assert len(inner) >= 7, f"the other thread ticked in tenths {inner} of a {duration:.3f} s call"


def test_decode_round_trips(tokenizer, repository_lines):
    text = "\n".join(repository_lines[:100])
    assert tokenizer.decode(tokenizer.encode(text)) == text
    ids = tokenizer.encode("Hello world")
    assert tokenizer.decode(ids.tolist()) == "Hello world"
    assert tokenizer.decode(ids.astype(np.int64)) == "Hello world"
    # Ids that split a multi-byte character: its bytes become U+FFFD, as bytes.decode("replace").
    ids = tokenizer.encode("\u4e16")  # one CJK character: bytes e4 b8 96, more than one id
    assert len(ids) > 1
    assert tokenizer.decode(ids[:1]) == "\ufffd"


def test_bad_input_raises(tokenizer, tmp_path):
    with pytest.raises(TypeError):
        tokenizer.encode(b"bytes")
    with pytest.raises(TypeError):
        tokenizer.encode_batch(["a", 3])
    with pytest.raises(ValueError, match="num_threads must be at least 1"):
        tokenizer.encode_batch(["a"], num_threads=0)
    unknown = tokenizer.vocab_size * 4
    with pytest.raises(zero.Error, match=f"cannot decode token id {unknown}"):
        tokenizer.decode([unknown])
    with pytest.raises(zero.InputError, match="no-such-model"):
        zero.Tokenizer.from_pretrained("no-such-model", cache_dir=str(tmp_path))


def test_loads_the_tokenizer_zero_train_saves(trained):
    output_dir, _ = trained
    tokenizer = zero.Tokenizer.from_pretrained(str(output_dir))
    text = "the quick brown fox"
    assert tokenizer.decode(tokenizer.encode(text)) == text
    assert tokenizer.vocab_size == 300
