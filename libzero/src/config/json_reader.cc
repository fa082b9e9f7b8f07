// Strict JSON parsing (duplicate keys rejected) and typed reads with JSON-path messages.
#include "json_reader.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <optional>

#include "zero/core/error.h"
#include "zero/core/suggest.h"

namespace zero::config::detail {

namespace {

// nlohmann's message without its "[json.exception.parse_error.101] " prefix.
std::string strip_exception_id(const std::string& message) {
  const auto end = message.find("] ");
  return message.starts_with("[json.exception") && end != std::string::npos
             ? message.substr(end + 2)
             : message;
}

std::string format_double(double value) {
  char buffer[64];
  std::snprintf(buffer, sizeof(buffer), "%.17g", value);
  // Prefer the shortest spelling that reads back to the same value.
  for (int precision = 1; precision <= 17; ++precision) {
    char shorter[64];
    std::snprintf(shorter, sizeof(shorter), "%.*g", precision, value);
    if (std::strtod(shorter, nullptr) == value) return shorter;
  }
  return buffer;
}

// The integer a JSON number denotes: integers, and floats with no fractional part (5e8).
std::optional<std::int64_t> to_integer(const Json& value) {
  if (value.is_number_unsigned()) {
    const auto unsigned_value = value.get<std::uint64_t>();
    if (unsigned_value > static_cast<std::uint64_t>(kInt64Max)) return std::nullopt;
    return static_cast<std::int64_t>(unsigned_value);
  }
  if (value.is_number_integer()) return value.get<std::int64_t>();
  if (value.is_number_float()) {
    const double number = value.get<double>();
    // 2^63 is exactly representable; every double below it in magnitude converts safely.
    if (!std::isfinite(number) || number != std::floor(number) || number >= 9223372036854775808.0 ||
        number < -9223372036854775808.0)
      return std::nullopt;
    return static_cast<std::int64_t>(number);
  }
  return std::nullopt;
}

std::string got(const Json& value) {
  if (value.is_string())
    return "got the string " + describe(value) + " (the only string accepted here is \"auto\")";
  if (value.is_number_float()) {
    const double number = value.get<double>();
    if (std::isfinite(number) && number != std::floor(number))
      return "got " + describe(value) + ", which has a fractional part";
  }
  return "got " + describe(value);
}

}  // namespace

Json parse_json(std::string_view text, std::string_view source_name) {
  constexpr int kMaxDepth = 64;
  const std::string source(source_name);
  if (std::all_of(text.begin(), text.end(),
                  [](char c) { return std::isspace(static_cast<unsigned char>(c)); }))
    ZERO_THROW(source,
               ": the config is empty; expected a JSON object such as "
               "{\"train_micro_batch_size_per_gpu\": 1}");
  struct Level {
    std::string path;
    bool is_array = false;
    std::vector<std::string> keys;
    std::string last_key;
  };
  std::vector<Level> stack;
  std::vector<std::string> duplicates;
  auto callback = [&](int depth, Json::parse_event_t event, Json& parsed) {
    switch (event) {
      case Json::parse_event_t::object_start:
      case Json::parse_event_t::array_start: {
        // Printing and comparing values recurse; no DeepSpeed config nests beyond a few levels.
        if (depth >= kMaxDepth)
          ZERO_THROW(source, ": nested deeper than ", kMaxDepth, " levels; not a DeepSpeed config");
        std::string path;
        if (!stack.empty())
          path = stack.back().is_array ? stack.back().path + "[]"
                                       : join_path(stack.back().path, stack.back().last_key);
        stack.push_back(Level{path, event == Json::parse_event_t::array_start, {}, {}});
        break;
      }
      case Json::parse_event_t::key: {
        Level& level = stack.back();
        std::string key = parsed.get<std::string>();
        if (std::find(level.keys.begin(), level.keys.end(), key) != level.keys.end())
          duplicates.push_back(join_path(level.path, key));
        else
          level.keys.push_back(key);
        level.last_key = std::move(key);
        break;
      }
      case Json::parse_event_t::object_end:
      case Json::parse_event_t::array_end:
        if (!stack.empty()) stack.pop_back();
        break;
      case Json::parse_event_t::value: break;
    }
    return true;
  };
  Json root;
  try {
    root = Json::parse(text.begin(), text.end(), callback, /*allow_exceptions=*/true,
                       /*ignore_comments=*/false);
  } catch (const Json::parse_error& error) {
    // nlohmann's message names the line and column.
    ZERO_THROW(source, ": not valid JSON: ", strip_exception_id(error.what()));
  } catch (const Json::exception& error) {
    ZERO_THROW(source, ": not valid JSON: ", strip_exception_id(error.what()));
  }
  if (!duplicates.empty()) {
    std::string message = source +
                          ": duplicate keys (DeepSpeed rejects them; a JSON reader would "
                          "silently keep the last):";
    for (const std::string& path : duplicates)
      message += "\n  - " + path + ": given more than once";
    ZERO_THROW(message);
  }
  return root;
}

std::string describe(const Json& value) {
  std::string text;
  if (value.is_number_float()) {
    const double number = value.get<double>();
    text = std::isfinite(number) ? format_double(number) : "a number beyond the double range";
  } else {
    text = value.dump(-1, ' ', false, Json::error_handler_t::replace);
  }
  if (text.size() > 60) text = text.substr(0, 57) + "...";
  return text;
}

std::string join_path(std::string_view parent, std::string_view key) {
  if (parent.empty()) return std::string(key);
  return std::string(parent) + "." + std::string(key);
}

ObjectReader::ObjectReader(const Json& object, std::string path, Diagnostics& diagnostics,
                           Strictness strictness)
    : object_(object), path_(std::move(path)), diagnostics_(diagnostics), strictness_(strictness) {}

const Json* ObjectReader::find(std::string_view key) {
  mark_known(key);
  if (!object_.is_object()) return nullptr;
  const auto it = object_.find(key);
  return it == object_.end() ? nullptr : &*it;
}

bool ObjectReader::has(std::string_view key) const {
  return object_.is_object() && object_.find(key) != object_.end();
}

void ObjectReader::mark_known(std::string_view key) {
  if (std::find(known_.begin(), known_.end(), key) == known_.end()) known_.emplace_back(key);
}

void ObjectReader::error(std::string_view key, const std::string& message) {
  diagnostics_.errors.push_back(join_path(path_, key) + ": " + message);
}

void ObjectReader::warn(std::string_view key, const std::string& message) {
  diagnostics_.warnings.push_back(join_path(path_, key) + ": " + message);
}

const Json* ObjectReader::value_for(std::string_view key, const std::string& default_text) {
  const Json* value = find(key);
  if (value == nullptr) return nullptr;
  if (value->is_string() && value->get_ref<const std::string&>() == "auto") {
    const std::string full_path = join_path(path_, key);
    const std::string hint = auto_hint(full_path);
    if (strictness_ == Strictness::kPydantic) {
      warn(key, "\"auto\" and no trainer value fills it; DeepSpeed's default " + default_text +
                    " applies" + hint);
    } else if (!hint.empty()) {
      error(key, "\"auto\" but no trainer value fills it" + hint);
    } else {
      error(key, "\"auto\" is not supported here (no trainer flag fills it); give a value");
    }
    return nullptr;
  }
  return value;
}

bool ObjectReader::read(std::string_view key, bool& out) {
  const Json* value = value_for(key, out ? "true" : "false");
  if (value == nullptr) return false;
  if (!value->is_boolean()) {
    error(key, "expected true or false, " + got(*value));
    return false;
  }
  out = value->get<bool>();
  return true;
}

bool ObjectReader::read(std::string_view key, std::int64_t& out, std::int64_t min,
                        std::int64_t max) {
  const Json* value = value_for(key, std::to_string(out));
  if (value == nullptr) return false;
  const std::optional<std::int64_t> number = to_integer(*value);
  std::string expectation = "an integer";
  if (max != kInt64Max)
    expectation += " in [" + std::to_string(min) + ", " + std::to_string(max) + "]";
  else if (min != std::numeric_limits<std::int64_t>::min())
    expectation += " >= " + std::to_string(min);
  if (!number) {
    error(key, "expected " + expectation + ", " + got(*value));
    return false;
  }
  if (*number < min || *number > max) {
    error(key, "expected " + expectation + ", got " + describe(*value));
    return false;
  }
  out = *number;
  return true;
}

bool ObjectReader::read(std::string_view key, int& out, int min, int max) {
  std::int64_t wide = out;
  if (!read(key, wide, min, max)) return false;
  out = static_cast<int>(wide);
  return true;
}

bool ObjectReader::read(std::string_view key, double& out, double min, double max) {
  const Json* value = value_for(key, format_double(out));
  if (value == nullptr) return false;
  std::string expectation = "a number";
  const double lowest = -std::numeric_limits<double>::max();
  const double highest = std::numeric_limits<double>::max();
  if (min != lowest && max != highest)
    expectation += " in [" + format_double(min) + ", " + format_double(max) + "]";
  else if (min != lowest)
    expectation += " >= " + format_double(min);
  if (!value->is_number()) {
    error(key, "expected " + expectation + ", " + got(*value));
    return false;
  }
  const double number = value->get<double>();
  if (!std::isfinite(number) || number < min || number > max) {
    error(key, "expected " + expectation + ", got " + describe(*value));
    return false;
  }
  out = number;
  return true;
}

bool ObjectReader::read(std::string_view key, std::string& out) {
  const Json* value = value_for(key, "\"" + out + "\"");
  if (value == nullptr) return false;
  if (!value->is_string()) {
    error(key, "expected a string, got " + describe(*value));
    return false;
  }
  out = value->get<std::string>();
  return true;
}

bool ObjectReader::read_either(std::string_view key, std::string_view alias, std::int64_t& out) {
  mark_known(key);
  mark_known(alias);
  if (has(key) && has(alias)) {
    error(key, "given twice, as '" + std::string(key) + "' and as '" + std::string(alias) +
                   "' (the same setting); keep one");
    return false;
  }
  return read(has(alias) ? alias : key, out);
}

bool ObjectReader::read_either(std::string_view key, std::string_view alias, bool& out) {
  mark_known(key);
  mark_known(alias);
  if (has(key) && has(alias)) {
    error(key, "given twice, as '" + std::string(key) + "' and as '" + std::string(alias) +
                   "' (the same setting); keep one");
    return false;
  }
  return read(has(alias) ? alias : key, out);
}

void ObjectReader::ignore_unless_default(std::string_view key, const Json& default_value) {
  const Json* value = find(key);
  if (value == nullptr || (value->is_string() && value->get_ref<const std::string&>() == "auto"))
    return;
  if (default_value.is_boolean() && !value->is_boolean()) {
    error(key, "expected true or false, " + got(*value));
    return;
  }
  if (default_value.is_number() && !value->is_number()) {
    error(key, "expected a number, " + got(*value));
    return;
  }
  if (*value != default_value)
    warn(key, "set to " + describe(*value) + ", which zero does not implement; ignored");
}

void ObjectReader::finish() {
  if (!object_.is_object()) return;
  for (const auto& [key, value] : object_.items()) {
    if (std::find(known_.begin(), known_.end(), key) != known_.end()) continue;
    const bool is_error = strictness_ != Strictness::kLenient;
    std::string message = "unknown key (value " + describe(value) + ")";
    if (!is_error) message += ", ignored";
    if (auto nearest = nearest_name(key, known_)) message += "; did you mean '" + *nearest + "'?";
    if (is_error)
      error(key, message);
    else
      warn(key, message);
  }
}

}  // namespace zero::config::detail
