// zero.Tokenizer: GPT-2's BPE (zero/text/tokenizer.h) from Python. Ids come back as NumPy int32
// arrays over the C++ vectors that hold them (no copy: flags.owndata is False and the array's base
// is the TokenBuffer or TokenBatch owning the ids). encode_batch is text::encode_batch
// (zero/text/token_batch.h: a process-wide pool of threads) with the GIL released.
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <Python.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <numpy/arrayobject.h>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "bindings.h"
#include "zero/core/error.h"
#include "zero/core/launch.h"
#include "zero/text/token_batch.h"
#include "zero/text/tokenizer.h"
#include "zero/train/hub_cache.h"

namespace nb = nanobind;

namespace zero::python {

namespace {

using text::TokenBatch;
using text::TokenId;
static_assert(sizeof(TokenId) == sizeof(std::int32_t));

// Texts shorter than this are encoded with the GIL held: releasing and taking it back costs more
// than encoding a few tokens.
constexpr std::size_t kReleaseGilBytes = 4096;

void ensure_numpy() {
  static bool imported = false;
  if (imported) return;
  if (_import_array() < 0) throw nb::python_error();
  imported = true;
}

// A NumPy array of `count` int32 at `data`, owned by `owner` (kept alive as the array's base).
nb::object int32_view(const TokenId* data, std::size_t count, nb::handle owner) {
  ensure_numpy();
  npy_intp dims[1] = {static_cast<npy_intp>(count)};
  PyObject* array = PyArray_SimpleNewFromData(1, dims, NPY_INT32,
                                              const_cast<void*>(static_cast<const void*>(data)));
  if (array == nullptr) throw nb::python_error();
  if (PyArray_SetBaseObject(reinterpret_cast<PyArrayObject*>(array), owner.inc_ref().ptr()) < 0) {
    Py_DECREF(array);
    throw nb::python_error();
  }
  return nb::steal(array);
}

// The ids of one encode: the base of the array encode returns.
struct TokenBuffer {
  std::vector<TokenId> ids;
};

// The UTF-8 of a str (the caller checked PyUnicode_Check). An ASCII str's own characters are its
// UTF-8, read without a call; others' UTF-8 is made once and cached inside the str by Python.
std::string_view utf8_of(nb::handle text) {
  if (PyUnicode_IS_COMPACT_ASCII(text.ptr()))
    return {static_cast<const char*>(PyUnicode_DATA(text.ptr())),
            static_cast<std::size_t>(PyUnicode_GET_LENGTH(text.ptr()))};
  Py_ssize_t size = 0;
  const char* data = PyUnicode_AsUTF8AndSize(text.ptr(), &size);
  if (data == nullptr) throw nb::python_error();
  return {data, static_cast<std::size_t>(size)};
}

text::SpecialTokens special_of(bool special) {
  return special ? text::SpecialTokens::kRecognize : text::SpecialTokens::kAsText;
}

text::Tokenizer from_pretrained(const std::string& name, const std::string& revision,
                                const std::optional<std::string>& cache_dir) {
  nb::gil_scoped_release release;
  if (std::filesystem::exists(name)) return text::Tokenizer::load(name);
  const std::filesystem::path cache =
      train::hub_cache_folder(cache_dir.value_or(""), process_environment());
  return text::Tokenizer::load(train::resolve_hub_folder("from_pretrained", name, revision, cache));
}

nb::object encode(const text::Tokenizer& tokenizer, nb::handle text, bool special) {
  if (!PyUnicode_Check(text.ptr())) throw nb::type_error("encode: expected a str");
  const std::string_view view = utf8_of(text);
  nb::object owner = nb::cast(TokenBuffer{});
  TokenBuffer& buffer = nb::cast<TokenBuffer&>(owner);
  if (view.size() >= kReleaseGilBytes) {
    nb::gil_scoped_release release;
    tokenizer.encode_append(view, buffer.ids, special_of(special));
  } else {
    tokenizer.encode_append(view, buffer.ids, special_of(special));
  }
  return int32_view(buffer.ids.data(), buffer.ids.size(), owner);
}

nb::object encode_batch(const text::Tokenizer& tokenizer, nb::handle texts, int num_threads,
                        bool special) {
  if (num_threads < 1)
    throw nb::value_error(
        ("encode_batch: num_threads must be at least 1, got " + std::to_string(num_threads))
            .c_str());
  // A tuple of the same str objects: they (and their UTF-8, cached inside each) stay alive while
  // the GIL is released, whatever another thread does to the caller's list.
  nb::object items = nb::steal(PySequence_Tuple(texts.ptr()));
  if (!items.is_valid()) throw nb::python_error();
  const Py_ssize_t count = PyTuple_GET_SIZE(items.ptr());
  std::vector<std::string_view> lines(static_cast<std::size_t>(count));
  for (Py_ssize_t i = 0; i < count; ++i) {
    PyObject* item = PyTuple_GET_ITEM(items.ptr(), i);
    if (!PyUnicode_Check(item))
      throw nb::type_error(("encode_batch: item " + std::to_string(i) + " is not a str").c_str());
    lines[static_cast<std::size_t>(i)] = utf8_of(item);
  }
  text::TokenBatch batch;
  {
    nb::gil_scoped_release release;
    batch = text::encode_batch(tokenizer, lines, num_threads, special_of(special));
  }
  return nb::cast(std::move(batch));  // moves the vectors: the ids are not copied
}

nb::object decode(const text::Tokenizer& tokenizer, nb::handle ids_object) {
  // Any sequence of ints or integer array: NumPy's conversion to uint32 checks the values' range.
  ensure_numpy();
  nb::object array = nb::steal(PyArray_FROMANY(ids_object.ptr(), NPY_INT64, 1, 1,
                                               NPY_ARRAY_CARRAY_RO | NPY_ARRAY_FORCECAST));
  if (!array.is_valid()) throw nb::python_error();
  const auto* values =
      static_cast<const std::int64_t*>(PyArray_DATA(reinterpret_cast<PyArrayObject*>(array.ptr())));
  const std::size_t count =
      static_cast<std::size_t>(PyArray_SIZE(reinterpret_cast<PyArrayObject*>(array.ptr())));
  std::vector<TokenId> ids(count);
  for (std::size_t i = 0; i < count; ++i) {
    ZERO_CHECK(values[i] >= 0 && values[i] <= 0xFFFFFFFFll, "decode: id ", values[i],
               " at position ", i, " is not a token id");
    ids[i] = static_cast<TokenId>(values[i]);
  }
  std::string bytes;
  {
    nb::gil_scoped_release release;
    bytes = tokenizer.decode(ids);
  }
  PyObject* text =
      PyUnicode_DecodeUTF8(bytes.data(), static_cast<Py_ssize_t>(bytes.size()), "replace");
  if (text == nullptr) throw nb::python_error();
  return nb::steal(text);
}

}  // namespace

void add_tokenizer(nb::module_& m) {
  nb::class_<TokenBuffer>(m, "TokenBuffer",
                          "The C++ vector holding the ids of one encode (the array's base).");
  nb::class_<TokenBatch>(m, "TokenBatch",
                         "The ids of encode_batch: line i is batch[i], an int32 array viewing "
                         "`ids[offsets[i]:offsets[i + 1]]` (no copy).")
      .def("__len__", &TokenBatch::size)
      .def(
          "__getitem__",
          [](nb::handle self, std::int64_t index) {
            const TokenBatch& batch = nb::cast<const TokenBatch&>(self);
            const auto size = static_cast<std::int64_t>(batch.size());
            if (index < 0) index += size;
            if (index < 0 || index >= size) throw nb::index_error("TokenBatch index out of range");
            const std::int64_t begin = batch.offsets[static_cast<std::size_t>(index)];
            const std::int64_t end = batch.offsets[static_cast<std::size_t>(index) + 1];
            return int32_view(batch.ids.data() + begin, static_cast<std::size_t>(end - begin),
                              self);
          },
          nb::arg("index"), nb::sig("def __getitem__(self, index: int) -> numpy.ndarray"))
      .def_prop_ro(
          "ids",
          [](nb::handle self) {
            const TokenBatch& batch = nb::cast<const TokenBatch&>(self);
            return int32_view(batch.ids.data(), batch.ids.size(), self);
          },
          nb::sig("def ids(self) -> numpy.ndarray"), "Every line's ids, in order (int32, no copy).")
      .def_prop_ro(
          "offsets",
          [](nb::handle self) {
            ensure_numpy();
            const TokenBatch& batch = nb::cast<const TokenBatch&>(self);
            npy_intp dims[1] = {static_cast<npy_intp>(batch.offsets.size())};
            PyObject* array = PyArray_SimpleNewFromData(
                1, dims, NPY_INT64, const_cast<std::int64_t*>(batch.offsets.data()));
            if (array == nullptr) throw nb::python_error();
            PyArray_SetBaseObject(reinterpret_cast<PyArrayObject*>(array), self.inc_ref().ptr());
            return nb::steal(array);
          },
          nb::sig("def offsets(self) -> numpy.ndarray"),
          "Where each line starts in `ids`, and the end (int64, len(batch) + 1 values).")
      .def(
          "tolist",
          [](const TokenBatch& batch) {
            nb::list out;
            for (std::size_t i = 0; i < batch.size(); ++i) {
              nb::list line;
              for (auto k = batch.offsets[i]; k < batch.offsets[i + 1]; ++k)
                line.append(batch.ids[static_cast<std::size_t>(k)]);
              out.append(line);
            }
            return out;
          },
          "The ids as a list of lists of int (a copy).");

  nb::class_<text::Tokenizer>(m, "Tokenizer",
                              "GPT-2's byte-level BPE, as OpenAI's encoder, tiktoken's gpt2 and "
                              "Hugging Face's GPT2TokenizerFast.")
      .def_static("from_pretrained", &from_pretrained, nb::arg("name_or_path"),
                  nb::arg("revision") = "main", nb::arg("cache_dir") = nb::none(),
                  "A folder (tokenizer.json, vocab.json + merges.txt, or encoder.json + "
                  "vocab.bpe), a tokenizer.json file, or a Hub id from the local Hugging Face "
                  "cache.")
      .def("encode", &encode, nb::arg("text"), nb::arg("special") = false,
           nb::sig("def encode(self, text: str, special: bool = False) -> numpy.ndarray"),
           "The ids of `text` as an int32 array (no copy). special=True: `<|endoftext|>` in the "
           "text becomes its id (else it is ordinary text, as tiktoken's encode_ordinary).")
      .def("encode_batch", &encode_batch, nb::arg("texts"), nb::arg("num_threads") = 1,
           nb::arg("special") = false,
           nb::sig("def encode_batch(self, texts: collections.abc.Sequence[str], "
                   "num_threads: int = 1, special: bool = False) -> TokenBatch"),
           "The ids of every text, encoded on num_threads threads with the GIL released.")
      .def("decode", &decode, nb::arg("ids"),
           nb::sig("def decode(self, ids: collections.abc.Sequence[int] | numpy.ndarray) -> str"),
           "The text of `ids` (bytes that are not UTF-8 become U+FFFD).")
      .def_prop_ro("vocab_size", &text::Tokenizer::vocab_size)
      .def_prop_ro("eot_token", &text::Tokenizer::end_of_text_id);
}

}  // namespace zero::python
