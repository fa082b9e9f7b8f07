// TCPStore V2 transcripts recorded from torch 2.x (tests/golden/record_torch2_goldens.py writes
// them, and its docstring defines the lines), read for tcp_store_golden_test, plus the socket
// calls a replay needs.
#pragma once

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace zero::testing {

struct TranscriptEvent {
  enum class Kind { kOpen, kClose, kShut, kQuiet, kSend, kRecv, kSync } kind;
  int connection = 0;
  std::string query;        // kSend: the query type's name
  std::vector<char> bytes;  // kSend, kRecv
  int line = 0;             // in the file, for messages
};

inline std::vector<char> from_hex(const std::string& hex, const std::string& where) {
  if (hex.size() % 2 != 0) throw std::runtime_error(where + ": odd hex length");
  std::vector<char> bytes(hex.size() / 2);
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    char* end = nullptr;
    const std::string pair = hex.substr(2 * i, 2);
    bytes[i] = static_cast<char>(std::strtoul(pair.c_str(), &end, 16));
    if (end != pair.c_str() + 2) throw std::runtime_error(where + ": not hex: " + pair);
  }
  return bytes;
}

inline std::string to_hex(const std::vector<char>& bytes) {
  static const char* digits = "0123456789abcdef";
  std::string hex;
  for (char c : bytes) {
    hex += digits[static_cast<unsigned char>(c) >> 4];
    hex += digits[static_cast<unsigned char>(c) & 15];
  }
  return hex;
}

// tests/golden/data/<name> of the source tree (ZERO_SOURCE_DIR).
inline std::string golden_data_path(const std::string& name) {
  const char* source = std::getenv("ZERO_SOURCE_DIR");
  if (source == nullptr) throw std::runtime_error("ZERO_SOURCE_DIR unset");
  return std::string(source) + "/tests/golden/data/" + name;
}

// The events of a transcript file; throws naming the file and line for a malformed one.
inline std::vector<TranscriptEvent> read_transcript(const std::string& path) {
  std::ifstream file(path);
  if (!file) throw std::runtime_error("cannot read " + path);
  std::vector<TranscriptEvent> events;
  std::string text;
  for (int line = 1; std::getline(file, text); ++line) {
    if (text.empty() || text[0] == '#') continue;
    std::istringstream words(text);
    std::string kind, hex;
    TranscriptEvent event{};
    event.line = line;
    words >> kind >> event.connection;
    const std::string where = path + ":" + std::to_string(line);
    using enum TranscriptEvent::Kind;
    if (kind == "open")
      event.kind = kOpen;
    else if (kind == "close")
      event.kind = kClose;
    else if (kind == "shut")
      event.kind = kShut;
    else if (kind == "quiet")
      event.kind = kQuiet;
    else if (kind == "sync")
      event.kind = kSync;
    else if (kind == "send")
      event.kind = kSend, words >> event.query >> hex;
    else if (kind == "recv")
      event.kind = kRecv, words >> hex;
    else
      throw std::runtime_error(where + ": unknown event '" + kind + "'");
    if (!words && !words.eof()) throw std::runtime_error(where + ": malformed");
    event.bytes = from_hex(hex, where);
    events.push_back(std::move(event));
  }
  return events;
}

// A client socket to 127.0.0.1:port, or -1.
inline int connect_local(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = htons(static_cast<std::uint16_t>(port));
  if (::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) {
    ::close(fd);
    return -1;
  }
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return fd;
}

inline bool send_all(int fd, const std::vector<char>& bytes) {
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::send(fd, bytes.data() + done, bytes.size() - done, MSG_NOSIGNAL);
    if (n <= 0) return false;
    done += static_cast<std::size_t>(n);
  }
  return true;
}

// Whether fd has data (or an end) to read within `milliseconds`.
inline bool readable(int fd, int milliseconds) {
  pollfd p{fd, POLLIN, 0};
  return ::poll(&p, 1, milliseconds) > 0;
}

// Up to `size` bytes, fewer when the peer ends or `milliseconds` pass first.
inline std::vector<char> receive(int fd, std::size_t size, int milliseconds) {
  std::vector<char> bytes;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(milliseconds);
  while (bytes.size() < size) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                          deadline - std::chrono::steady_clock::now())
                          .count();
    if (left <= 0 || !readable(fd, static_cast<int>(left))) break;
    char buffer[4096];
    const ssize_t n = ::recv(fd, buffer, std::min(sizeof buffer, size - bytes.size()), 0);
    if (n <= 0) break;
    bytes.insert(bytes.end(), buffer, buffer + n);
  }
  return bytes;
}

}  // namespace zero::testing
