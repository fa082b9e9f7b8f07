// Reading DeepSpeed JSON into typed fields: strict parsing, typed getters, unknown-key reports.
#pragma once

#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace zero::config::detail {

using Json = nlohmann::json;

// Errors and warnings gathered while resolving one config; errors are thrown together at the end.
struct Diagnostics {
  std::vector<std::string> errors;
  std::vector<std::string> warnings;
};

// Parses strict JSON. Duplicate keys (at any depth) are errors naming their path; syntax errors
// name the line and column. Throws zero::Error naming `source_name`.
Json parse_json(std::string_view text, std::string_view source_name);

// A JSON value as the user wrote it, shortened to about 60 characters for messages.
std::string describe(const Json& value);

// "parent.key", or "key" at the top level.
std::string join_path(std::string_view parent, std::string_view key);

// The trainer flag that fills an "auto" at `path` (e.g. " (pass --learning_rate)"), or "".
std::string auto_hint(std::string_view path);

constexpr std::int64_t kInt64Max = std::numeric_limits<std::int64_t>::max();

// How an object is checked, after how DeepSpeed reads it:
//   kPydantic  pydantic models (zero_optimization, offload_*, fp16, bf16, monitors): an unknown
//              key is an error; an unfilled "auto" is dropped, so the default applies (warning).
//   kKwargs    optimizer and scheduler params, passed as keyword arguments: an unknown key is an
//              error; an unfilled "auto" is an error naming the trainer flag.
//   kLenient   dict lookups (top level, aio, checkpoint, ...): an unknown key is a warning; an
//              unfilled "auto" is an error naming the trainer flag.
enum class Strictness { kPydantic, kKwargs, kLenient };

// One JSON object being read into a struct. Each read marks its key known; finish() reports the
// keys never read. A missing key leaves the output at its default.
class ObjectReader {
 public:
  ObjectReader(const Json& object, std::string path, Diagnostics& diagnostics,
               Strictness strictness);

  const std::string& path() const { return path_; }
  // The value at `key` (marking it known), or nullptr when absent.
  const Json* find(std::string_view key);
  bool has(std::string_view key) const;

  // Each returns true when the key was present and its value stored.
  bool read(std::string_view key, bool& out);
  bool read(std::string_view key, std::int64_t& out, std::int64_t min = 0,
            std::int64_t max = kInt64Max);
  bool read(std::string_view key, int& out, int min, int max);
  bool read(std::string_view key, double& out, double min = -std::numeric_limits<double>::max(),
            double max = std::numeric_limits<double>::max());
  bool read(std::string_view key, std::string& out);
  // `key` or its alias `alias` (both spellings DeepSpeed accepts; giving both is an error).
  bool read_either(std::string_view key, std::string_view alias, std::int64_t& out);
  bool read_either(std::string_view key, std::string_view alias, bool& out);

  // Marks keys known to DeepSpeed that zero reads elsewhere or not at all.
  void mark_known(std::string_view key);
  // Marks `key` known; when present with a value other than `default_value`, warns that zero
  // does not implement it and ignores it (a type different from the default's is an error).
  void ignore_unless_default(std::string_view key, const Json& default_value);

  // Reports every key never read: an error (strict) or a warning (lenient), with the nearest key.
  void finish();

  // Records an error or a warning about `key` in this object ("path.key: message").
  void error(std::string_view key, const std::string& message);
  void warn(std::string_view key, const std::string& message);

 private:
  // Handles "auto" and the common type errors; returns the value to convert, or nullptr.
  const Json* value_for(std::string_view key, const std::string& default_text);

  const Json& object_;
  std::string path_;
  Diagnostics& diagnostics_;
  Strictness strictness_;
  std::vector<std::string> known_;
};

}  // namespace zero::config::detail
