// Reading a tokenizer's file whole, and as JSON, with errors that name the file.
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

namespace zero::text::detail {

std::string read_tokenizer_file(const std::filesystem::path& path);
nlohmann::json parse_tokenizer_json(const std::filesystem::path& path);

}  // namespace zero::text::detail
