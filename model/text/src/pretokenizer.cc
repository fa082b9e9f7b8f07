// GPT-2's pre-tokenizer: the regex compiled by PCRE2 in UTF + UCP mode and JIT-compiled.
#define PCRE2_CODE_UNIT_WIDTH 8
#include "pretokenizer.h"

#include <pcre2.h>

#include <string>

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

}  // namespace

Pretokenizer::Pretokenizer() {
  int error_code = 0;
  PCRE2_SIZE error_offset = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(kGpt2PatternPcre2.data()),
                                   kGpt2PatternPcre2.size(), PCRE2_UTF | PCRE2_UCP, &error_code,
                                   &error_offset, nullptr);
  ZERO_CHECK(code != nullptr, "PCRE2 cannot compile the GPT-2 pattern at offset ", error_offset,
             ": ", pcre2_message(error_code));
  const int jit = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
  if (jit != 0) {
    pcre2_code_free(code);
    ZERO_THROW("PCRE2 JIT compilation of the GPT-2 pattern failed: ", pcre2_message(jit),
               " (PCRE2 must be built with JIT support)");
  }
  code_ = code;
}

Pretokenizer::~Pretokenizer() { pcre2_code_free(static_cast<pcre2_code*>(code_)); }

std::size_t Pretokenizer::match_end(std::string_view text, std::size_t offset) const {
  ThreadMatchState& state = thread_match_state();
  const int result = pcre2_jit_match(static_cast<const pcre2_code*>(code_),
                                     reinterpret_cast<PCRE2_SPTR>(text.data()), text.size(), offset,
                                     PCRE2_NO_UTF_CHECK, state.match_data, state.context);
  ZERO_CHECK(result > 0, "PCRE2 match failed at byte ", offset, ": ", pcre2_message(result));
  const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(state.match_data);
  ZERO_CHECK(ovector[0] == offset && ovector[1] > offset, "GPT-2 pattern left bytes ", offset, "..",
             ovector[0], " unmatched");
  return ovector[1];
}

}  // namespace zero::text::detail
