// zero._zero: the extension behind `import zero` (the package's __init__.py re-exports it). C++
// errors become Python exceptions of one small hierarchy, their messages unchanged, each also the
// built-in exception a Python caller expects:
//   zero.Error (Exception: the base of all of them)
//     zero.InputError (ValueError: train::InputError and the flag parser's usage errors)
//       zero.ConfigError (config::ConfigError: a DeepSpeed config with errors; .errors lists them)
//       zero.MissingFileError (also FileNotFoundError: a file or folder an argument names is
//         absent; raised by the package, which checks path arguments before the call)
//     zero.ArgumentTypeError (TypeError: an argument of the wrong type; raised by the package
//       and by token_dataset)
//     zero.RunError (RuntimeError: zero::Error and every other C++ failure while running)
// The library's log records (zero/core/logging.h) go to a Python callable the package sets
// (`set_log_handler`: Python's logging), and back to stderr at exit.
#include <Python.h>

#include <exception>
#include <new>
#include <string>

#include "bindings.h"
#include "zero/comm/communicator.h"
#include "zero/config/ds_config.h"
#include "zero/core/error.h"
#include "zero/core/logging.h"
#include "zero/train/cli.h"
#include "zero/train/trainer.h"

namespace nb = nanobind;

namespace zero::python {

namespace {

PyObject* g_config_error = nullptr;
PyObject* g_input_error = nullptr;
PyObject* g_run_error = nullptr;
PyObject* g_argument_type_error = nullptr;
// The package's log handler, callable(level, rank, world_size, message) with logging's levels;
// a strong reference kept for the process (never released: the sink may run at any time).
PyObject* g_log_handler = nullptr;

// A new exception class zero.`name` with `bases` (a type or a tuple of types).
PyObject* new_exception(nb::module_& m, const char* name, nb::handle bases, const char* doc) {
  const std::string qualified = std::string("zero.") + name;
  PyObject* type = PyErr_NewExceptionWithDoc(qualified.c_str(), doc, bases.ptr(), nullptr);
  if (type == nullptr) throw nb::python_error();
  m.attr(name) = nb::handle(type);
  return type;
}

int python_level(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug: return 10;
    case LogLevel::kInfo: return 20;
    case LogLevel::kWarning: return 30;
    case LogLevel::kError: return 40;
  }
  return 40;
}

// The library's sink while the package's handler is set: the record handed to it under the GIL
// (from any thread; the calls that log release the GIL first). A handler that raises is reported
// as unraisable, never into the C++ caller.
void python_log_sink(const LogRecord& record) {
  if (g_log_handler == nullptr || !Py_IsInitialized()) {
    stderr_log_sink(record);
    return;
  }
  nb::gil_scoped_acquire gil;
  try {
    const nb::handle handler(g_log_handler);
    handler(python_level(record.level), record.rank, record.world_size,
            nb::str(record.message.data(), record.message.size()));
  } catch (nb::python_error& error) {
    error.discard_as_unraisable("zero's log handler");
  }
}

// callable(level, rank, world_size, message), or None: stderr as the `zero` command prints.
void set_log_handler(nb::object handler) {
  if (handler.is_none()) {
    set_log_sink(stderr_log_sink);
    return;
  }
  PyObject* previous = g_log_handler;
  g_log_handler = handler.release().ptr();
  Py_XDECREF(previous);
  set_log_sink(python_log_sink);
}

void raise_config_error(const config::ConfigError& error) {
  nb::object instance = nb::borrow(g_config_error)(nb::str(error.what()));
  nb::list errors;
  for (const std::string& line : error.errors()) errors.append(nb::str(line.c_str(), line.size()));
  instance.attr("errors") = errors;
  PyErr_SetObject(g_config_error, instance.ptr());
}

void translate(const std::exception_ptr& pointer, void*) {
  try {
    std::rethrow_exception(pointer);
  } catch (const cli::UsageError& error) {
    PyErr_SetString(g_input_error, error.message.c_str());
  } catch (const train::InputError& error) {
    PyErr_SetString(g_input_error, error.what());
  } catch (const config::ConfigError& error) {
    raise_config_error(error);
  } catch (const std::bad_alloc&) {
    PyErr_NoMemory();
  } catch (const std::exception& error) {  // zero::Error and the libraries' own
    PyErr_SetString(g_run_error, error.what());
  }
}

}  // namespace

void raise_argument_type_error(const std::string& message) {
  PyErr_SetString(g_argument_type_error, message.c_str());
  throw nb::python_error();
}

void add_errors(nb::module_& m) {
  const nb::handle error = new_exception(
      m, "Error", PyExc_Exception, "The base of every exception zero raises (catch this one).");
  const auto bases = [&](nb::handle first, PyObject* builtin) {
    return nb::make_tuple(first, nb::handle(builtin));
  };
  g_input_error = new_exception(
      m, "InputError", bases(error, PyExc_ValueError),
      "Bad input (a ValueError): an unknown or malformed argument, a contradiction between "
      "arguments and the config, data that cannot be used; the message names the argument.");
  g_config_error = new_exception(
      m, "ConfigError", nb::handle(g_input_error),
      "A DeepSpeed config with errors: the message lists them all; .errors holds each one.");
  // FileNotFoundError first: its constructor fills errno, strerror and filename.
  new_exception(m, "MissingFileError",
                nb::make_tuple(nb::handle(PyExc_FileNotFoundError), nb::handle(g_input_error)),
                "A file or folder an argument names does not exist (a FileNotFoundError and an "
                "InputError): .argument names the argument, .filename the path.");
  g_argument_type_error =
      new_exception(m, "ArgumentTypeError", bases(error, PyExc_TypeError),
                    "An argument of the wrong type (a TypeError); the message names it.");
  g_run_error =
      new_exception(m, "RunError", bases(error, PyExc_RuntimeError),
                    "A failure while running (a RuntimeError): zero's C++ message unchanged.");
  nb::register_exception_translator(translate);
  m.def("set_log_handler", &set_log_handler, nb::arg("handler").none(),
        "Routes the library's log records to handler(level, rank, world_size, message) (logging's "
        "levels); None: stderr, as the `zero` command prints them.");
}

}  // namespace zero::python

NB_MODULE(_zero, m) {
  m.doc() = "zero's C++ planner, config checker, tokenizer and trainer (see the package `zero`)";
  zero::set_log_sink(zero::stderr_log_sink);  // until the package sets its handler
  zero::python::add_errors(m);
  zero::python::add_commands(m);
  zero::python::add_checkpoint(m);
  zero::python::add_tokenizer(m);
  zero::python::add_token_dataset(m);
  m.def(
      "finalize",
      [] {
        zero::set_log_sink(zero::stderr_log_sink);  // Python's logging may be gone after this
        zero::finalize_communication();
      },
      "Ends the communication library (MPI) the trainer started; `zero` calls it at exit.");
}
