// The reference scripts' id lines ("15496 995 ..."): parsed into token ids.
#pragma once

#include <sstream>
#include <string>
#include <vector>

#include "zero/text/tokenizer.h"

namespace zero::text {

inline std::vector<TokenId> parse_ids(const std::string& line) {
  std::vector<TokenId> ids;
  std::istringstream stream(line);
  TokenId id;
  while (stream >> id) ids.push_back(id);
  return ids;
}

}  // namespace zero::text
