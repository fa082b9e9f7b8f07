// The one exception type of zero and the check macros every component throws through.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace zero {

// Thrown by every zero component. what() is the full message: the failed condition (for checks),
// the caller's context, and the source location.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

namespace detail {

template <typename... Args>
std::string concat(Args&&... args) {
  std::ostringstream stream;
  (stream << ... << std::forward<Args>(args));
  return stream.str();
}

[[noreturn]] void throw_error(const char* file, int line, const std::string& message);

}  // namespace detail
}  // namespace zero

// ZERO_THROW(msg...): throw zero::Error with the streamed arguments and the source location.
#define ZERO_THROW(...) \
  ::zero::detail::throw_error(__FILE__, __LINE__, ::zero::detail::concat(__VA_ARGS__))

// ZERO_CHECK(cond, msg...): throw zero::Error naming the condition when it is false. Use for
// every failure that depends on input or environment; it is never compiled out.
#define ZERO_CHECK(cond, ...)                                                   \
  do {                                                                          \
    if (!(cond)) [[unlikely]] {                                                 \
      ::zero::detail::throw_error(                                              \
          __FILE__, __LINE__,                                                   \
          ::zero::detail::concat(__VA_ARGS__, " [check failed: ", #cond, "]")); \
    }                                                                           \
  } while (false)

// ZERO_DCHECK(cond, msg...): ZERO_CHECK in debug builds, nothing in release (hot loops only).
#ifdef NDEBUG
#define ZERO_DCHECK(cond, ...) \
  do {                         \
  } while (false)
#else
#define ZERO_DCHECK(cond, ...) ZERO_CHECK(cond, __VA_ARGS__)
#endif
