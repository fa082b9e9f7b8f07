// The pre-tokenizer: Oniguruma patterns translated for PCRE2, compiled in UTF + UCP mode and JIT.
#define PCRE2_CODE_UNIT_WIDTH 8
#include "pretokenizer.h"

#include <pcre2.h>

#include <cctype>

#include "utf8.h"
#include "zero/core/error.h"

namespace zero::text::detail {
namespace {

std::string pcre2_message(int code) {
  PCRE2_UCHAR buffer[256];
  pcre2_get_error_message(code, buffer, sizeof(buffer));
  return reinterpret_cast<const char*>(buffer);
}

// Per-thread match state: match data for one ovector pair, and a JIT stack large enough for
// pieces of any length (the repeats in the pattern backtrack over whole runs).
struct ThreadMatchState {
  pcre2_match_data* match_data = nullptr;
  pcre2_match_context* context = nullptr;
  pcre2_jit_stack* jit_stack = nullptr;
  ThreadMatchState() {
    match_data = pcre2_match_data_create(1, nullptr);
    context = pcre2_match_context_create(nullptr);
    jit_stack = pcre2_jit_stack_create(64 * 1024, 64 * 1024 * 1024, nullptr);
    ZERO_CHECK(match_data && context && jit_stack, "PCRE2: out of memory");
    pcre2_jit_stack_assign(context, nullptr, jit_stack);
  }
  ~ThreadMatchState() {
    pcre2_jit_stack_free(jit_stack);
    pcre2_match_context_free(context);
    pcre2_match_data_free(match_data);
  }
};

ThreadMatchState& thread_match_state() {
  thread_local ThreadMatchState state;
  return state;
}

pcre2_code* compile(const std::string& pattern) {
  int error_code = 0;
  PCRE2_SIZE error_offset = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                   PCRE2_UTF | PCRE2_UCP, &error_code, &error_offset, nullptr);
  ZERO_CHECK(code != nullptr, "PCRE2 cannot compile the pre-tokenizer pattern '", pattern,
             "' at offset ", error_offset, ": ", pcre2_message(error_code));
  const int jit = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
  if (jit != 0) {
    pcre2_code_free(code);
    ZERO_THROW("PCRE2 JIT compilation of the pre-tokenizer pattern '", pattern,
               "' failed: ", pcre2_message(jit), " (PCRE2 must be built with JIT support)");
  }
  return code;
}

}  // namespace

std::string oniguruma_to_pcre2(std::string_view pattern) {
  const std::string white_space(kWhiteSpaceClassBody);
  std::string out;
  bool in_class = false;
  auto refuse = [&](std::string_view what) {
    ZERO_THROW("pre-tokenizer pattern '", pattern, "': ", what,
               " is not supported (Oniguruma and PCRE2 read it differently)");
  };
  for (std::size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c == '\\') {
      ZERO_CHECK(i + 1 < pattern.size(), "pre-tokenizer pattern '", pattern, "' ends in '\\'");
      const char e = pattern[++i];
      if (e == 's') {
        out += in_class ? white_space : "[" + white_space + "]";
      } else if (e == 'S') {
        if (in_class) refuse("\\S inside a character class");
        out += "[^" + white_space + "]";
      } else if (e == 'v') {
        out += "\\x{0B}";
      } else if (e == 'u') {
        ZERO_CHECK(i + 4 < pattern.size(), "pre-tokenizer pattern '", pattern,
                   "': \\u needs four hex digits");
        out += "\\x{" + std::string(pattern.substr(i + 1, 4)) + "}";
        i += 4;
      } else if (e == 'p' || e == 'P' || e == 'x') {
        out += '\\';
        out += e;
        if (i + 1 < pattern.size() && pattern[i + 1] == '{') {
          const std::size_t close = pattern.find('}', i);
          ZERO_CHECK(close != std::string_view::npos, "pre-tokenizer pattern '", pattern,
                     "': unterminated \\", e, "{");
          out += pattern.substr(i + 1, close - i);
          i = close;
        }
      } else if (std::isalpha(static_cast<unsigned char>(e)) &&
                 std::string_view("dDnrtfea").find(e) == std::string_view::npos) {
        refuse(std::string("\\") + e);
      } else {
        out += '\\';
        out += e;
      }
    } else if (in_class) {
      if (c == '[') refuse("a nested character class");
      if (c == '&' && i + 1 < pattern.size() && pattern[i + 1] == '&')
        refuse("class intersection &&");
      if (c == ']') in_class = false;
      out += c;
    } else if (c == '[') {
      in_class = true;
      out += c;
      if (i + 1 < pattern.size() && pattern[i + 1] == '^') out += pattern[++i];
      if (i + 1 < pattern.size() && pattern[i + 1] == ']') out += pattern[++i];
    } else if (c == '^' || c == '$') {
      refuse(std::string("the anchor ") + c);
    } else if (c == '(' && pattern.substr(i).starts_with("(?")) {
      std::size_t j = i + 2;
      while (j < pattern.size() && std::string_view("imx-").find(pattern[j]) != std::string::npos)
        if (pattern[j++] == 'm') refuse("the option (?m) (dot-all in Oniguruma)");
      out += c;
    } else {
      out += c;
    }
  }
  ZERO_CHECK(!in_class, "pre-tokenizer pattern '", pattern, "' has an unterminated '['");
  return out;
}

Pretokenizer::Pretokenizer() : Pretokenizer({oniguruma_to_pcre2(kGpt2Pattern)}) {}

Pretokenizer::Pretokenizer(const std::vector<std::string>& pcre2_patterns) {
  try {
    for (const std::string& pattern : pcre2_patterns) codes_.push_back(compile(pattern));
  } catch (...) {
    for (void* code : codes_) pcre2_code_free(static_cast<pcre2_code*>(code));
    throw;
  }
}

Pretokenizer::~Pretokenizer() {
  for (void* code : codes_) pcre2_code_free(static_cast<pcre2_code*>(code));
}

Pretokenizer::Match Pretokenizer::find(std::size_t level, std::string_view text,
                                       std::size_t offset) const {
  ThreadMatchState& state = thread_match_state();
  const int result = pcre2_jit_match(static_cast<const pcre2_code*>(codes_[level]),
                                     reinterpret_cast<PCRE2_SPTR>(text.data()), text.size(), offset,
                                     PCRE2_NO_UTF_CHECK, state.match_data, state.context);
  if (result == PCRE2_ERROR_NOMATCH) return {std::string_view::npos, std::string_view::npos};
  ZERO_CHECK(result > 0, "PCRE2 match failed at byte ", offset, ": ", pcre2_message(result));
  const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(state.match_data);
  return {ovector[0], ovector[1]};
}

std::size_t Pretokenizer::next_character(std::string_view text, std::size_t offset) {
  const std::size_t length = valid_sequence_length(text, offset);
  return offset + (length == 0 ? 1 : length);
}

}  // namespace zero::text::detail
