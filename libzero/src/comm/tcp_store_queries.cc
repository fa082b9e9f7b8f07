// The TCPStore server's query parser: one client's queries read from a StoreChannel and answered
// from StoreData, as torch 2's server answers them (tests/golden/data/tcpstore_v2_*.txt).
#include <algorithm>
#include <charconv>

#include "tcp_store.h"

namespace zero::detail {

namespace {

using wire::append_string;
using wire::append_value;
using wire::Query;

// A length-prefixed string, grown as its bytes arrive: a client cannot make the server allocate
// more than it sent (a size field of 4 GiB followed by nothing costs nothing).
bool read_string(StoreChannel& channel, std::string& text) {
  std::uint64_t size = 0;
  if (!channel.read(&size, sizeof size) || size > (std::uint64_t{1} << 32)) return false;
  constexpr std::uint64_t kChunkBytes = 1 << 16;
  text.clear();
  while (text.size() < size) {
    const std::size_t done = text.size();
    const std::size_t chunk = static_cast<std::size_t>(std::min(kChunkBytes, size - done));
    text.resize(done + chunk);
    if (!channel.read(text.data() + done, chunk)) return false;
  }
  return true;
}

// A count then that many strings (CHECK, WAIT, MULTI_GET).
bool read_keys(StoreChannel& channel, std::vector<std::string>& keys) {
  std::uint64_t count = 0;
  if (!channel.read(&count, sizeof count) || count > 1'000'000) return false;
  keys.resize(count);
  for (std::string& key : keys)
    if (!read_string(channel, key)) return false;
  return true;
}

void append_text(std::vector<char>& reply, const std::vector<char>& value) {
  append_string(reply, value.data(), value.size());
}

class QueryServer {
 public:
  QueryServer(StoreChannel& channel, StoreData& data) : channel_(channel), data_(data) {}

  // Reads one query's arguments and appends its reply (nothing for SET-like queries); false
  // drops the client.
  bool serve(Query query, std::vector<char>& reply) {
    switch (query) {
      case Query::kPing: {
        std::uint32_t nonce = 0;
        if (!channel_.read(&nonce, sizeof nonce)) return false;
        append_value(reply, nonce);
        return true;
      }
      case Query::kSet:
      case Query::kAppend:
      case Query::kQueuePush: return serve_write(query);
      case Query::kCompareSet: return serve_compare_set(reply);
      case Query::kGet:
      case Query::kDeleteKey:
      case Query::kQueuePop:
      case Query::kQueueLen: return serve_key(query, reply);
      case Query::kAdd: return serve_add(reply);
      case Query::kCheck:
      case Query::kWait:
      case Query::kMultiGet: return serve_keys(query, reply);
      case Query::kMultiSet: return serve_multi_set();
      case Query::kGetNumKeys: {
        std::lock_guard lock(data_.mutex);
        append_value<std::int64_t>(reply, static_cast<std::int64_t>(data_.values.size()));
        return true;
      }
      default: return false;  // VALIDATE again, CANCEL_WAIT, or a type this store does not know
    }
  }

 private:
  // SET, APPEND, QUEUE_PUSH: key and bytes, no reply.
  bool serve_write(Query query) {
    if (!read_string(channel_, key_) || !read_string(channel_, value_)) return false;
    std::lock_guard lock(data_.mutex);
    if (query == Query::kQueuePush) {
      data_.queues[key_].emplace_back(value_.begin(), value_.end());
      return true;
    }
    std::vector<char>& stored = data_.values[key_];
    if (query == Query::kSet) stored.clear();
    stored.insert(stored.end(), value_.begin(), value_.end());
    return true;
  }

  // Sets the key to `desired` when it holds `expected` (or is missing and `expected` is empty);
  // answers the value it then holds, or `expected` for a missing key that stays missing.
  bool serve_compare_set(std::vector<char>& reply) {
    std::string expected, desired;
    if (!read_string(channel_, key_) || !read_string(channel_, expected) ||
        !read_string(channel_, desired))
      return false;
    std::lock_guard lock(data_.mutex);
    const auto found = data_.values.find(key_);
    if (found == data_.values.end()) {
      if (!expected.empty()) {
        append_string(reply, expected.data(), expected.size());
        return true;
      }
      data_.values[key_].assign(desired.begin(), desired.end());
      append_string(reply, desired.data(), desired.size());
      return true;
    }
    if (std::string_view(found->second.data(), found->second.size()) == expected)
      found->second.assign(desired.begin(), desired.end());
    append_text(reply, found->second);
    return true;
  }

  // GET (the value, empty for a missing key), DELETE_KEY (how many it deleted), QUEUE_POP (the
  // queue's length before, then its first item if it had one), QUEUE_LEN.
  bool serve_key(Query query, std::vector<char>& reply) {
    if (!read_string(channel_, key_)) return false;
    std::lock_guard lock(data_.mutex);
    if (query == Query::kGet) {
      const auto found = data_.values.find(key_);
      append_text(reply, found == data_.values.end() ? std::vector<char>() : found->second);
    } else if (query == Query::kDeleteKey) {
      append_value<std::int64_t>(reply, static_cast<std::int64_t>(data_.values.erase(key_)));
    } else {
      std::deque<std::vector<char>>& queue = data_.queues[key_];
      append_value<std::int64_t>(reply, static_cast<std::int64_t>(queue.size()));
      if (query == Query::kQueuePop && !queue.empty()) {
        append_text(reply, queue.front());
        queue.pop_front();
      }
    }
    return true;
  }

  // TCPStore keeps counters as decimal text. A value that is not one, or a sum past int64, drops
  // the client (never an exception: this runs on a server thread).
  bool serve_add(std::vector<char>& reply) {
    std::int64_t delta = 0;
    if (!read_string(channel_, key_) || !channel_.read(&delta, sizeof delta)) return false;
    std::lock_guard lock(data_.mutex);
    std::vector<char>& stored = data_.values[key_];
    std::int64_t now = 0;
    const char* end = stored.data() + stored.size();
    if (!stored.empty() && std::from_chars(stored.data(), end, now).ptr != end) return false;
    if (__builtin_add_overflow(now, delta, &now)) return false;
    const std::string text = std::to_string(now);
    stored.assign(text.begin(), text.end());
    append_value(reply, now);
    return true;
  }

  bool has_all(const std::vector<std::string>& keys) {
    std::lock_guard lock(data_.mutex);
    return std::all_of(keys.begin(), keys.end(), [this](const std::string& key) {
      const auto queue = data_.queues.find(key);
      return data_.values.contains(key) || (queue != data_.queues.end() && !queue->second.empty());
    });
  }

  // CHECK (ready or not now), WAIT (answers when every key exists), MULTI_GET (each value).
  bool serve_keys(Query query, std::vector<char>& reply) {
    std::vector<std::string> keys;
    if (!read_keys(channel_, keys)) return false;
    if (query == Query::kCheck) {
      append_value(reply, has_all(keys) ? wire::kReady : wire::kNotReady);
    } else if (query == Query::kWait) {
      while (!has_all(keys))
        if (!channel_.keep_waiting()) return false;
      append_value(reply, wire::kStopWaiting);
    } else {
      std::lock_guard lock(data_.mutex);
      for (const std::string& key : keys) {
        const auto found = data_.values.find(key);
        append_text(reply, found == data_.values.end() ? std::vector<char>() : found->second);
      }
    }
    return true;
  }

  bool serve_multi_set() {
    std::uint64_t count = 0;
    if (!channel_.read(&count, sizeof count) || count > 1'000'000) return false;
    for (std::uint64_t i = 0; i < count; ++i) {
      if (!read_string(channel_, key_) || !read_string(channel_, value_)) return false;
      std::lock_guard lock(data_.mutex);
      data_.values[key_].assign(value_.begin(), value_.end());
    }
    return true;
  }

  StoreChannel& channel_;
  StoreData& data_;
  std::string key_, value_;  // the current query's, reused
};

}  // namespace

void serve_store_queries(StoreChannel& channel, StoreData& data) {
  std::uint8_t type = 0;
  if (!channel.read(&type, 1) || type != static_cast<std::uint8_t>(Query::kValidate)) return;
  std::uint32_t magic = 0;
  if (!channel.read(&magic, sizeof magic) || magic != wire::kValidationMagic) return;
  QueryServer server(channel, data);
  while (channel.read(&type, 1)) {
    std::vector<char> reply;
    if (!server.serve(static_cast<Query>(type), reply)) return;
    if (!reply.empty() && !channel.write(reply)) return;
  }
}

}  // namespace zero::detail
