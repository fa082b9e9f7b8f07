// Token ids from Python as a train::TokenDataset (zero/train/token_dataset.h): a 2-D int32/int64
// array, or a sequence of rows, each a 1-D int32/int64 array or a sequence of int. Arrays are read
// through the buffer protocol (NumPy's, array.array's, memoryview's: NumPy is never imported), each
// id copied once, into the dataset's token stream.
#include <Python.h>
#include <nanobind/stl/string.h>

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "bindings.h"
#include "zero/train/token_dataset.h"

namespace nb = nanobind;

namespace zero::python {

namespace {

// A buffer's view, released when it goes out of scope.
class BufferView {
 public:
  // ok() false (no Python error set) when `object` has no buffer protocol.
  // An object whose buffer cannot be had (a NumPy array of objects: ragged rows) is read as a
  // sequence instead.
  explicit BufferView(PyObject* object) {
    if (PyObject_CheckBuffer(object) == 0) return;
    if (PyObject_GetBuffer(object, &view_, PyBUF_RECORDS_RO) != 0) {
      PyErr_Clear();
      return;
    }
    ok_ = true;
  }
  ~BufferView() {
    if (ok_) PyBuffer_Release(&view_);
  }
  BufferView(const BufferView&) = delete;
  BufferView& operator=(const BufferView&) = delete;
  bool ok() const { return ok_; }
  const Py_buffer& view() const { return view_; }

 private:
  Py_buffer view_{};
  bool ok_ = false;
};

// The buffer's element type as the builder reads it: 4 (int32), 8 (int64), else a TypeError
// naming `what` and the buffer's format.
int id_width(const Py_buffer& view, const std::string& what) {
  std::string format = view.format == nullptr ? "B" : view.format;
  if (!format.empty() && (format[0] == '@' || format[0] == '=' || format[0] == '<'))
    format.erase(0, 1);
  const bool signed_integer = format == "i" || format == "l" || format == "q";
  if (signed_integer && (view.itemsize == 4 || view.itemsize == 8))
    return static_cast<int>(view.itemsize);
  raise_argument_type_error(what + ": expected token ids of int32 or int64, got an array of " +
                            "format '" + (view.format == nullptr ? "B" : view.format) + "' (" +
                            std::to_string(view.itemsize) + " bytes each)");
}

// Adds `count` ids at `data`, `stride_bytes` apart, of `width` bytes.
void add_strided(train::TokenDatasetBuilder& builder, const char* data, std::size_t count,
                 Py_ssize_t stride_bytes, int width) {
  if (width == 4) {
    builder.add_row(reinterpret_cast<const std::int32_t*>(data), count, stride_bytes / 4);
  } else {
    builder.add_row(reinterpret_cast<const std::int64_t*>(data), count, stride_bytes / 8);
  }
}

// A row given as a sequence of Python ints (or objects with __index__ that are not bool).
void add_int_row(train::TokenDatasetBuilder& builder, PyObject* row, const std::string& what,
                 std::vector<std::int64_t>& scratch) {
  nb::object items = nb::steal(PySequence_Fast(row, ""));
  if (!items.is_valid()) {
    PyErr_Clear();
    raise_argument_type_error(what +
                              ": expected a row of token ids (a list of int or a 1-D "
                              "int32/int64 array), got " +
                              Py_TYPE(row)->tp_name);
  }
  const Py_ssize_t count = PySequence_Fast_GET_SIZE(items.ptr());
  PyObject** values = PySequence_Fast_ITEMS(items.ptr());
  scratch.resize(static_cast<std::size_t>(count));
  for (Py_ssize_t i = 0; i < count; ++i) {
    PyObject* value = values[i];
    if (PyBool_Check(value) || PyIndex_Check(value) == 0)
      raise_argument_type_error(what + "[" + std::to_string(i) + "]: expected an int token id, " +
                                "got " + Py_TYPE(value)->tp_name);
    nb::object index = nb::steal(PyNumber_Index(value));
    if (!index.is_valid()) throw nb::python_error();
    int overflow = 0;
    const long long id = PyLong_AsLongLongAndOverflow(index.ptr(), &overflow);
    if (id == -1 && PyErr_Occurred() != nullptr) throw nb::python_error();
    // Beyond 64 bits: as far out of range as the builder's own bound says.
    scratch[static_cast<std::size_t>(i)] = overflow > 0   ? INT64_MAX
                                           : overflow < 0 ? INT64_MIN
                                                          : static_cast<std::int64_t>(id);
  }
  builder.add_row(std::span<const std::int64_t>(scratch));
}

// `rows` (see the file's comment) as the dataset `name` ("train_dataset", "eval_dataset").
TokenRows token_dataset(const std::string& name, nb::handle rows) {
  train::TokenDatasetBuilder builder(name);
  if (PyUnicode_Check(rows.ptr()) || PyBytes_Check(rows.ptr()))
    raise_argument_type_error(name + ": expected rows of token ids, got " +
                              Py_TYPE(rows.ptr())->tp_name);
  const BufferView whole(rows.ptr());
  if (whole.ok()) {  // a 2-D array: one row per first index
    const Py_buffer& view = whole.view();
    if (view.ndim != 2)
      raise_argument_type_error(name + ": expected a 2-D array of token ids (rows x ids) or a " +
                                "list of rows, got an array of " + std::to_string(view.ndim) +
                                " dimension(s)");
    const int width = id_width(view, name);
    const auto num_rows = static_cast<std::size_t>(view.shape[0]);
    const auto row_length = static_cast<std::size_t>(view.shape[1]);
    builder.reserve(num_rows, num_rows * row_length);
    const char* data = static_cast<const char*>(view.buf);
    for (std::size_t r = 0; r < num_rows; ++r)
      add_strided(builder, data + static_cast<Py_ssize_t>(r) * view.strides[0], row_length,
                  view.strides[1], width);
  } else {
    nb::object sequence = nb::steal(PySequence_Fast(rows.ptr(), ""));
    if (!sequence.is_valid()) {
      PyErr_Clear();
      raise_argument_type_error(name + ": expected rows of token ids (a list of lists of int, of " +
                                "1-D int32/int64 arrays, or a 2-D array), got " +
                                Py_TYPE(rows.ptr())->tp_name);
    }
    const Py_ssize_t num_rows = PySequence_Fast_GET_SIZE(sequence.ptr());
    PyObject** items = PySequence_Fast_ITEMS(sequence.ptr());
    std::vector<std::int64_t> scratch;
    for (Py_ssize_t r = 0; r < num_rows; ++r) {
      const std::string what = name + "[" + std::to_string(r) + "]";
      PyObject* row = items[r];
      if (PyUnicode_Check(row) || PyBytes_Check(row))
        raise_argument_type_error(what + ": expected a row of token ids, got " +
                                  Py_TYPE(row)->tp_name);
      const BufferView array(row);
      if (!array.ok()) {
        add_int_row(builder, row, what, scratch);
        continue;
      }
      const Py_buffer& view = array.view();
      if (view.ndim != 1)
        raise_argument_type_error(what + ": expected a 1-D array of token ids, got an array of " +
                                  std::to_string(view.ndim) + " dimension(s)");
      add_strided(builder, static_cast<const char*>(view.buf),
                  static_cast<std::size_t>(view.shape[0]), view.strides[0], id_width(view, what));
    }
  }
  return TokenRows{builder.finish()};
}

}  // namespace

void add_token_dataset(nb::module_& m) {
  nb::class_<TokenRows>(m, "TokenDataset",
                        "Rows of token ids checked and copied once, for zero.train's "
                        "train_dataset / eval_dataset (made by zero.train itself).")
      .def_prop_ro("name", [](const TokenRows& rows) { return rows.dataset->name; })
      .def_prop_ro("num_rows",
                   [](const TokenRows& rows) { return rows.dataset->rows->num_examples(); })
      .def_prop_ro("num_tokens",
                   [](const TokenRows& rows) { return rows.dataset->rows->tokens().size(); });
  m.def("token_dataset", &token_dataset, nb::arg("name"), nb::arg("rows"),
        "Rows of token ids (a 2-D int32/int64 array, or a sequence of rows, each a 1-D array or a "
        "sequence of int) as a TokenDataset named `name`; TypeError/ValueError name the row and "
        "position.");
}

}  // namespace zero::python
