// A key-value store over TCP speaking PyTorch c10d's TCPStore wire protocol: the client half talks
// to torchrun's agent store (or any TCPStore) and to TcpStoreServer, which rank 0 hosts when no
// launcher provides a store. Gloo's rendezvous runs over it (internal).
//
// The wire format (c10d TCPStore.cpp / TCPStoreBackend.cpp): a query is one byte of query type
// followed by its arguments; strings and byte vectors are a uint64 length and the bytes, integers
// are native little-endian int64. SET key value (no reply); GET key -> value; ADD key delta ->
// new value; CHECK n key... -> one byte, 0 ready / 1 not ready; WAIT n key... -> one byte when
// all exist. PyTorch 2 numbers the queries from VALIDATE = 0 (SET = 1, ...) and ignores (the
// libuv server, torchrun's) or drops a client whose first query is not VALIDATE with the magic
// number 0x3C85F7CE; PyTorch 1.x numbers them from SET = 0 and has no VALIDATE. The client finds
// out which one it talks to (see TcpStore::connect). tests/golden/data/tcpstore_v2_*.txt hold
// torch 2.15's bytes, both sides (tests/comm/tcp_store_golden_test replays them).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "zero/comm/communicator.h"

namespace zero::detail {

// The V2 wire format's pieces, shared by the client and the server.
namespace wire {

// c10d's QueryType (TCPStoreBackend.hpp), PyTorch 2 numbering.
enum class Query : std::uint8_t {
  kValidate,
  kSet,
  kCompareSet,
  kGet,
  kAdd,
  kCheck,
  kWait,
  kGetNumKeys,
  kDeleteKey,
  kAppend,
  kMultiGet,
  kMultiSet,
  kCancelWait,
  kPing,
  kQueuePush,
  kQueuePop,
  kQueueLen
};
constexpr std::uint32_t kValidationMagic = 0x3C85F7CE;
constexpr std::uint8_t kReady = 0, kNotReady = 1;  // CHECK's answer
constexpr std::uint8_t kStopWaiting = 0;           // WAIT's answer

inline void append_bytes(std::vector<char>& out, const void* data, std::size_t size) {
  const char* bytes = static_cast<const char*>(data);
  out.insert(out.end(), bytes, bytes + size);
}
template <typename T>
void append_value(std::vector<char>& out, T value) {
  append_bytes(out, &value, sizeof value);
}
// A string or byte vector: its uint64 length, then its bytes.
inline void append_string(std::vector<char>& out, const void* data, std::size_t size) {
  append_value<std::uint64_t>(out, size);
  append_bytes(out, data, size);
}

}  // namespace wire

class TcpStore {
 public:
  enum class Protocol { kDetect, kV1, kV2 };
  // Connects to host:port, retrying until `timeout` passes (the server may start later).
  TcpStore(std::string host, int port, std::chrono::milliseconds timeout,
           Protocol protocol = Protocol::kDetect);
  ~TcpStore();
  TcpStore(const TcpStore&) = delete;
  TcpStore& operator=(const TcpStore&) = delete;

  void set(const std::string& key, const std::vector<char>& value);
  // Waits (up to the timeout) for the key, then reads it.
  std::vector<char> get(const std::string& key);
  std::int64_t add(const std::string& key, std::int64_t delta);
  bool check(const std::vector<std::string>& keys);
  // Polls check() until every key exists; throws zero::Error naming the missing keys after
  // `timeout`.
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout);
  std::chrono::milliseconds timeout() const { return timeout_; }
  Protocol protocol() const { return protocol_; }
  std::string address() const { return host_ + ":" + std::to_string(port_); }

 private:
  void connect(Protocol protocol);
  int open_socket(std::chrono::steady_clock::time_point deadline);
  void write_all(const std::vector<char>& bytes);
  void read_all(void* data, std::size_t size, std::chrono::milliseconds timeout);
  std::uint8_t query(int v1_code) const;

  std::string host_;
  int port_ = 0;
  std::chrono::milliseconds timeout_;
  Protocol protocol_ = Protocol::kDetect;
  int fd_ = -1;
  std::mutex mutex_;
};

// One client connection as the server's query parser sees it, so the parser also runs on bytes
// (tests/fuzz/tcp_store_fuzz.cc).
class StoreChannel {
 public:
  virtual ~StoreChannel() = default;
  // Reads exactly `size` bytes; false when the client ended or failed first.
  virtual bool read(void* data, std::size_t size) = 0;
  virtual bool write(const std::vector<char>& bytes) = 0;
  // Called between polls while a WAIT waits for keys: false ends the client's session.
  virtual bool keep_waiting() = 0;
};

// A store's keys and values; counters (ADD) are decimal text, as TCPStore keeps them. Queues
// (QUEUE_PUSH/POP/LEN) are apart from the values; a WAIT or CHECK on a queue's key is ready
// while the queue holds an item, as in c10d.
struct StoreData {
  std::mutex mutex;  // guards values, queues
  std::map<std::string, std::vector<char>> values;
  std::map<std::string, std::deque<std::vector<char>>> queues;
};

// Serves one client's queries (PyTorch 2 numbering, VALIDATE with the magic number first; every
// query of c10d's but CANCEL_WAIT, answered as torch 2's server answers them:
// tcp_store_queries.cc) until it ends, sends something this store does not serve or malformed (a
// string over 4 GiB, an ADD on a value that is not a decimal integer or that overflows int64), or
// keep_waiting() says stop. Never throws for anything the client sends.
void serve_store_queries(StoreChannel& channel, StoreData& data);

// A TCPStore server (PyTorch 2 numbering, VALIDATE required first) on every interface at `port`.
// Serves until destroyed.
class TcpStoreServer {
 public:
  explicit TcpStoreServer(int port);
  ~TcpStoreServer();
  TcpStoreServer(const TcpStoreServer&) = delete;
  TcpStoreServer& operator=(const TcpStoreServer&) = delete;
  int port() const { return port_; }

 private:
  void accept_loop();
  void serve(int fd);
  void serve_client(int fd);

  int port_ = 0;
  int listen_fd_ = -1;
  std::atomic<bool> stop_{false};
  std::thread acceptor_;
  std::mutex mutex_;  // guards clients_, threads_
  StoreData data_;
  std::vector<int> clients_;
  std::vector<std::thread> threads_;
};

// Rank 0's `value` on every rank of `rendezvous`, through its store: torchrun's agent store (keys
// under its prefix), else a store rank 0 hosts on master_port until every rank has acknowledged
// reading the value (so rank 0's server outlives the readers). `key` names the exchange and must
// differ between exchanges of one job (the NCCL unique id: "zero/nccl/<k>/"). Throws zero::Error
// naming the store's address and what is missing after `timeout`.
std::vector<char> share_from_rank0(const GlooRendezvous& rendezvous, const std::string& key,
                                   const std::vector<char>& value,
                                   std::chrono::milliseconds timeout);

}  // namespace zero::detail
