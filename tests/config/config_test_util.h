// Helpers for the config tests: resolve a JSON string and inspect the error or the warnings.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "zero/config/ds_config.h"
#include "zero/core/error.h"

namespace zero::config::testing {

inline ConfigResult resolve(const std::string& json, const TrainerValues& trainer = {}) {
  return resolve_config(json, trainer, "test.json");
}

// The zero::Error message resolving `json` throws, or "" when it resolves.
inline std::string error_of(const std::string& json, const TrainerValues& trainer = {}) {
  try {
    resolve(json, trainer);
  } catch (const zero::Error& error) {
    return error.what();
  }
  return "";
}

inline bool any_contains(const std::vector<std::string>& lines, const std::string& text) {
  for (const std::string& line : lines)
    if (line.find(text) != std::string::npos) return true;
  return false;
}

}  // namespace zero::config::testing

// EXPECT the message to contain `text`.
#define EXPECT_CONTAINS(message, text) \
  EXPECT_NE(std::string(message).find(text), std::string::npos) << "in: " << (message)
