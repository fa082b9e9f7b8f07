// zero._zero: the extension behind `import zero` (the package's __init__.py re-exports it). C++
// errors become Python exceptions of one small hierarchy, their messages unchanged:
//   zero.Error (zero::Error and every other C++ failure)
//     zero.ConfigError (config::ConfigError: a DeepSpeed config with errors; .errors lists them)
//     zero.InputError (train::InputError and the flag parser's usage errors: bad input)
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

PyObject* g_error = nullptr;
PyObject* g_config_error = nullptr;
PyObject* g_input_error = nullptr;

PyObject* new_exception(nb::module_& m, const char* name, PyObject* base, const char* doc) {
  const std::string qualified = std::string("zero.") + name;
  PyObject* type = PyErr_NewExceptionWithDoc(qualified.c_str(), doc, base, nullptr);
  if (type == nullptr) throw nb::python_error();
  m.attr(name) = nb::handle(type);
  return type;
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
    PyErr_SetString(g_error, error.what());
  }
}

}  // namespace

void add_errors(nb::module_& m) {
  g_error = new_exception(m, "Error", PyExc_RuntimeError,
                          "A failure in zero's C++ code (its message unchanged).");
  g_config_error = new_exception(
      m, "ConfigError", g_error,
      "A DeepSpeed config with errors: the message lists them all; .errors holds each one.");
  g_input_error = new_exception(
      m, "InputError", g_error,
      "Bad input: an unknown or malformed flag, a missing file, a contradiction between flags "
      "and the config.");
  nb::register_exception_translator(translate);
}

}  // namespace zero::python

NB_MODULE(_zero, m) {
  m.doc() = "zero's C++ planner, config checker, tokenizer and trainer (see the package `zero`)";
  zero::set_log_sink(zero::stderr_log_sink);  // as the `zero` command prints its log lines
  zero::python::add_errors(m);
  zero::python::add_commands(m);
  zero::python::add_checkpoint(m);
  zero::python::add_tokenizer(m);
  m.def("finalize", &zero::finalize_communication,
        "Ends the communication library (MPI) the trainer started; `zero` calls it at exit.");
}
