// zero's TCPStore against torch 2.x's own bytes (tests/golden/data/tcpstore_v2_*.txt, recorded
// by tests/golden/record_torch2_goldens.py from torch 2.15; no Python here). Server side: torch's
// clients' queries, from a torchrun handshake and from every call of the API, replayed against
// TcpStoreServer in the recorded order, each reply byte-equal to torch's server's. Client side:
// a fake server answers zero's client with torch's server's recorded replies, and each query
// zero's client sends is one torch's client sent.
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <optional>
#include <thread>

#include "../common/free_port.h"
#include "comm/tcp_store.h"
#include "tcp_store_transcript.h"

namespace zero::detail {
namespace {

using namespace std::chrono_literals;
using testing::TranscriptEvent;
using Kind = TranscriptEvent::Kind;

constexpr int kReplyMilliseconds = 5000;

// For each WAIT that another connection's query released (events between its send and its
// reply), the index of the last query sent before the reply: just before sending it, the WAIT
// must still be unanswered.
std::map<std::size_t, std::vector<int>> unanswered_waits(
    const std::vector<TranscriptEvent>& events) {
  std::map<std::size_t, std::vector<int>> checks;
  std::map<int, std::size_t> waiting;  // connection -> index of its WAIT
  for (std::size_t i = 0; i < events.size(); ++i) {
    const TranscriptEvent& event = events[i];
    if (event.kind == Kind::kSend && event.query == "WAIT") waiting[event.connection] = i;
    if (event.kind != Kind::kRecv || !waiting.contains(event.connection)) continue;
    const std::size_t sent = waiting[event.connection];
    waiting.erase(event.connection);
    for (std::size_t j = i; j-- > sent + 1;) {
      if (events[j].kind == Kind::kSend && events[j].connection != event.connection) {
        checks[j].push_back(event.connection);
        break;
      }
    }
  }
  return checks;
}

// Replays the clients' side of `name` against a TcpStoreServer; returns the replies compared.
int replay_against_server(const std::string& name) {
  const std::string path = testing::golden_data_path(name);
  const std::vector<TranscriptEvent> events = testing::read_transcript(path);
  TcpStoreServer server(testing::free_port());
  const auto checks = unanswered_waits(events);
  std::map<int, int> sockets;
  std::uint32_t nonce = 0x7A000000;
  int compared = 0;
  for (std::size_t i = 0; i < events.size(); ++i) {
    const TranscriptEvent& event = events[i];
    const std::string where = name + ":" + std::to_string(event.line);
    int& fd = sockets[event.connection];
    if (event.kind == Kind::kOpen) {
      fd = testing::connect_local(server.port());
      EXPECT_GE(fd, 0) << where << ": cannot connect";
    } else if (event.kind == Kind::kSend) {
      if (checks.contains(i)) {
        std::this_thread::sleep_for(20ms);
        for (int waiter : checks.at(i))
          EXPECT_FALSE(testing::readable(sockets[waiter], 0))
              << where << ": connection " << waiter << "'s WAIT was answered before this query";
      }
      EXPECT_TRUE(testing::send_all(fd, event.bytes)) << where << ": send " << event.query;
    } else if (event.kind == Kind::kSync) {
      std::vector<char> ping{static_cast<char>(wire::Query::kPing)};
      wire::append_value(ping, ++nonce);
      EXPECT_TRUE(testing::send_all(fd, ping)) << where;
      std::vector<char> echo(ping.begin() + 1, ping.end());
      EXPECT_EQ(testing::receive(fd, 4, kReplyMilliseconds), echo) << where << ": no PING echo";
    } else if (event.kind == Kind::kRecv) {
      const std::vector<char> got = testing::receive(fd, event.bytes.size(), kReplyMilliseconds);
      EXPECT_EQ(testing::to_hex(got), testing::to_hex(event.bytes))
          << where << ": zero's reply differs from torch's";
      ++compared;
    } else if (event.kind == Kind::kQuiet) {
      // torch's libuv server ignores a client whose first query is not VALIDATE, the older one
      // drops it: either, but no answer.
      const std::vector<char> got = testing::receive(fd, 1, 500);
      EXPECT_TRUE(got.empty()) << where << ": answered a client that did not VALIDATE";
    } else if (event.kind == Kind::kShut) {
      EXPECT_TRUE(testing::receive(fd, 1, kReplyMilliseconds).empty()) << where << ": not closed";
    } else if (event.kind == Kind::kClose) {
      ::close(fd);
      fd = -1;
    }
  }
  for (const auto& [connection, fd] : sockets) {
    if (fd < 0) continue;
    EXPECT_FALSE(testing::readable(fd, 50)) << name << ": extra bytes on " << connection;
    ::close(fd);
  }
  return compared;
}

TEST(TcpStoreGolden, ServerAnswersTorchrunsHandshakeAsTorch) {
  // The agent's ADD/SET/WAIT/MULTI_SET/MULTI_GET/GET and two gloo workers' init_process_group.
  EXPECT_GE(replay_against_server("tcpstore_v2_torchrun.txt"), 20);
}

TEST(TcpStoreGolden, ServerAnswersEveryTcpStoreCallAsTorch) {
  // COMPARE_SET, APPEND, DELETE_KEY, MULTI_*, the queues, GETNUMKEYS, a WAIT another client
  // releases, and a client whose first byte is not VALIDATE.
  EXPECT_GE(replay_against_server("tcpstore_v2_api.txt"), 40);
}

// The size of the query at the start of `buffer` (the queries zero's client sends), 0 while cut.
std::size_t query_size(const std::vector<char>& buffer) {
  std::size_t at = 1;
  auto string = [&] {
    if (buffer.size() < at + 8) return false;
    std::uint64_t size = 0;
    std::memcpy(&size, buffer.data() + at, 8);
    at += 8 + size;
    return buffer.size() >= at;
  };
  if (buffer.empty()) return 0;
  switch (static_cast<wire::Query>(buffer[0])) {
    case wire::Query::kValidate:
    case wire::Query::kPing: at = 5; break;
    case wire::Query::kGetNumKeys: break;
    case wire::Query::kSet:
      if (!string() || !string()) return 0;
      break;
    case wire::Query::kGet:
      if (!string()) return 0;
      break;
    case wire::Query::kAdd:
      if (!string()) return 0;
      at += 8;
      break;
    case wire::Query::kCheck:
    case wire::Query::kWait: {
      if (buffer.size() < 9) return 0;
      std::uint64_t count = 0;
      std::memcpy(&count, buffer.data() + 1, 8);
      at = 9;
      for (std::uint64_t k = 0; k < count; ++k)
        if (!string()) return 0;
      break;
    }
    default: return 1;  // any other first byte: matched as one byte
  }
  return buffer.size() >= at ? at : 0;
}

// Plays torch's server from the recorded API transcript: zero's first connection gets what the
// stray client got, its second what torch's client `a` (connection 1) got. Each query zero's
// client sends must be the next one, or a later one, that torch's client sent; its reply is
// torch's server's.
class RecordedTorchServer {
 public:
  explicit RecordedTorchServer(const std::vector<TranscriptEvent>& events) {
    for (std::size_t i = 0; i < events.size(); ++i) {
      const TranscriptEvent& e = events[i];
      if (e.kind != Kind::kSend || e.connection > 1) continue;
      Exchange exchange{e.query, e.bytes, {}, e.line, false};
      if (i + 1 < events.size() && events[i + 1].connection == e.connection) {
        exchange.quiet = events[i + 1].kind == Kind::kQuiet;
        if (events[i + 1].kind == Kind::kRecv) exchange.reply = events[i + 1].bytes;
      }
      sessions_[e.connection].push_back(exchange);
    }
    listener_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(listener_, reinterpret_cast<sockaddr*>(&address), sizeof address);
    socklen_t size = sizeof address;
    ::getsockname(listener_, reinterpret_cast<sockaddr*>(&address), &size);
    port_ = ntohs(address.sin_port);
    ::listen(listener_, 4);
    thread_ = std::thread([this] {
      for (int session = 0; session < 2; ++session) {
        if (!testing::readable(listener_, 20000)) break;
        const int fd = ::accept(listener_, nullptr, nullptr);
        serve(fd, sessions_[session]);
        ::close(fd);
      }
    });
  }
  ~RecordedTorchServer() {
    ::shutdown(listener_, SHUT_RDWR);
    thread_.join();
    ::close(listener_);
  }
  int port() const { return port_; }
  std::vector<std::string> queries_matched;

 private:
  struct Exchange {
    std::string query;
    std::vector<char> request, reply;
    int line;
    bool quiet;
  };

  void serve(int fd, const std::vector<Exchange>& session) {
    std::vector<char> buffer;
    std::size_t cursor = 0;
    while (true) {
      // A first query that torch's server ignored was forwarded by its first byte.
      const bool stray = cursor == 0 && !session.empty() && session[0].quiet;
      std::size_t size = stray && !buffer.empty() ? 1 : query_size(buffer);
      if (size == 0) {
        char more[4096];
        const ssize_t n = testing::readable(fd, 20000) ? ::recv(fd, more, sizeof more, 0) : 0;
        if (n <= 0) return;  // the client closed (or went silent)
        buffer.insert(buffer.end(), more, more + n);
        continue;
      }
      std::vector<char> query(buffer.begin(), buffer.begin() + size);
      buffer.erase(buffer.begin(), buffer.begin() + size);
      const bool ping = query[0] == static_cast<char>(wire::Query::kPing);
      std::size_t k = cursor;
      while (k < session.size() &&
             (ping ? session[k].request[0] != query[0] : session[k].request != query))
        ++k;
      if (k == session.size()) {
        ADD_FAILURE() << "zero's client sent " << testing::to_hex(query)
                      << ", which torch's client never sent after line "
                      << (cursor < session.size() ? session[cursor].line : 0);
        return;
      }
      cursor = k + 1;
      queries_matched.push_back(session[k].query);
      if (session[k].quiet) continue;  // torch's server said nothing; the client gives up
      std::vector<char> reply = session[k].reply;
      if (ping) {
        // torch's server echoed the recorded nonce; echo zero's the same way.
        EXPECT_EQ(reply,
                  std::vector<char>(session[k].request.begin() + 1, session[k].request.end()));
        reply.assign(query.begin() + 1, query.end());
      }
      if (!reply.empty() && !testing::send_all(fd, reply)) return;
    }
  }

  std::map<int, std::vector<Exchange>> sessions_;
  int listener_ = -1;
  int port_ = 0;
  std::thread thread_;
};

std::vector<char> bytes(std::string_view text) { return {text.begin(), text.end()}; }

TEST(TcpStoreGolden, ClientUnderstandsTorchsServer) {
  const auto events = testing::read_transcript(testing::golden_data_path("tcpstore_v2_api.txt"));
  std::optional<RecordedTorchServer> server(std::in_place, events);
  {
    // torch's client prefixes its keys with "/"; zero's sends them as given.
    TcpStore store("127.0.0.1", server->port(), 10s);  // detects the protocol: probe, then V2
    EXPECT_EQ(store.protocol(), TcpStore::Protocol::kV2);
    store.set("/zero/a", bytes("1"));
    EXPECT_TRUE(store.check({"/zero/a"}));
    EXPECT_FALSE(store.check({"/zero/absent"}));
    EXPECT_FALSE(store.check({"/zero/a", "/zero/absent"}));
    EXPECT_EQ(store.get("/zero/a"), bytes("1"));
    EXPECT_EQ(store.add("/zero/n", 5), 5);
    EXPECT_EQ(store.add("/zero/n", -2), 3);
    EXPECT_EQ(store.add("/zero/n", 0), 3);
    store.set("/zero/empty", {});
    EXPECT_EQ(store.get("/zero/empty"), std::vector<char>());
    const std::vector<char> binary{'\0', '\xff', 'b', 'i', 'n', 'a', 'r', 'y'};
    store.set("/zero/a", binary);
    EXPECT_EQ(store.get("/zero/a"), binary);
  }
  const std::vector<std::string> matched = server->queries_matched;
  server.reset();  // ends its thread
  const std::vector<std::string> expected_start{"WAIT", "VALIDATE", "PING", "SET", "CHECK"};
  ASSERT_GE(matched.size(), expected_start.size());
  // The probe (1.x's GETNUMKEYS, 2.x's WAIT byte) on the first connection, then V2's hello.
  EXPECT_EQ(std::vector<std::string>(matched.begin(), matched.begin() + 5), expected_start);
  // Every query matched one of torch's: the hello's 3, 3 SETs, 3 CHECKs, 3 ADDs, and each of the
  // 3 gets' CHECK and GET (zero checks where torch's client WAITs).
  EXPECT_EQ(matched.size(), 3u + 3 + 3 + 3 + 3 * 2);
}

}  // namespace
}  // namespace zero::detail
