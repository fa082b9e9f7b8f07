// TCPStore client and server (see tcp_store.h for the wire format).
#include "tcp_store.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <sstream>

#include "zero/core/error.h"

namespace zero::detail {

namespace {

using Clock = std::chrono::steady_clock;

using wire::append_string;
using wire::append_value;
// The client's queries in PyTorch 1.x's numbering; PyTorch 2 adds one (VALIDATE took 0).
constexpr int kSet = 0, kGet = 2, kAdd = 3, kCheck = 4, kGetNumKeys = 6;

std::string errno_text() { return std::strerror(errno); }

}  // namespace

TcpStore::TcpStore(std::string host, int port, std::chrono::milliseconds timeout, Protocol protocol)
    : host_(std::move(host)), port_(port), timeout_(timeout) {
  ZERO_CHECK(port > 0 && port < 65536, "store port ", port, " is not a TCP port (1..65535)");
  connect(protocol);
}

TcpStore::~TcpStore() {
  if (fd_ >= 0) ::close(fd_);
}

int TcpStore::open_socket(Clock::time_point deadline) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  std::string last_error;
  while (true) {
    addrinfo* found = nullptr;
    const int status = ::getaddrinfo(host_.c_str(), std::to_string(port_).c_str(), &hints, &found);
    if (status != 0) {
      last_error = std::string("cannot resolve host: ") + gai_strerror(status);
    } else {
      for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
        const int fd = ::socket(a->ai_family, a->ai_socktype, a->ai_protocol);
        if (fd < 0) continue;
        if (::connect(fd, a->ai_addr, a->ai_addrlen) == 0) {
          ::freeaddrinfo(found);
          int one = 1;
          ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
          return fd;
        }
        last_error = errno_text();
        ::close(fd);
      }
      ::freeaddrinfo(found);
    }
    if (Clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ZERO_THROW("cannot connect to the rendezvous store at ", address(), " within ",
             std::chrono::duration<double>(timeout_).count(), " s (", last_error,
             "); check MASTER_ADDR and MASTER_PORT, and that rank 0 (or torchrun) is running");
}

void TcpStore::connect(Protocol protocol) {
  const auto deadline = Clock::now() + timeout_;
  if (protocol == Protocol::kDetect || protocol == Protocol::kV1) {
    // PyTorch 1.x answers GETNUMKEYS (code 6) with an int64; PyTorch 2 takes a first query that is
    // not VALIDATE as a stray client and closes the connection.
    fd_ = open_socket(deadline);
    std::vector<char> probe{static_cast<char>(kGetNumKeys)};
    write_all(probe);
    std::int64_t keys = 0;
    try {
      read_all(&keys, sizeof keys, std::chrono::milliseconds(2000));
      protocol_ = Protocol::kV1;
      return;
    } catch (const Error&) {
      ::close(fd_);
      fd_ = -1;
      ZERO_CHECK(protocol == Protocol::kDetect, "the store at ", address(),
                 " does not speak PyTorch 1.x's TCPStore protocol");
    }
  }
  fd_ = open_socket(deadline);
  protocol_ = Protocol::kV2;
  std::vector<char> hello;
  append_value(hello, wire::Query::kValidate);
  append_value<std::uint32_t>(hello, wire::kValidationMagic);
  // A ping proves the server accepted the validation (it echoes the nonce).
  const std::uint32_t nonce = static_cast<std::uint32_t>(::getpid());
  append_value(hello, wire::Query::kPing);
  append_value<std::uint32_t>(hello, nonce);
  write_all(hello);
  std::uint32_t echoed = 0;
  read_all(&echoed, sizeof echoed, timeout_);
  ZERO_CHECK(echoed == nonce, "the store at ", address(),
             " answered the TCPStore ping with the wrong nonce: not a TCPStore server?");
}

std::uint8_t TcpStore::query(int v1_code) const {
  return static_cast<std::uint8_t>(protocol_ == Protocol::kV2 ? v1_code + 1 : v1_code);
}

void TcpStore::write_all(const std::vector<char>& bytes) {
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::send(fd_, bytes.data() + done, bytes.size() - done, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    ZERO_CHECK(n > 0, "lost the connection to the rendezvous store at ", address(), ": ",
               errno_text());
    done += static_cast<std::size_t>(n);
  }
}

void TcpStore::read_all(void* data, std::size_t size, std::chrono::milliseconds timeout) {
  char* out = static_cast<char*>(data);
  const auto deadline = Clock::now() + timeout;
  std::size_t done = 0;
  while (done < size) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    ZERO_CHECK(left > 0, "the rendezvous store at ", address(), " did not answer within ",
               timeout.count(), " ms");
    pollfd p{fd_, POLLIN, 0};
    const int ready = ::poll(&p, 1, static_cast<int>(left));
    if (ready < 0 && errno == EINTR) continue;
    if (ready == 0) continue;
    const ssize_t n = ::recv(fd_, out + done, size - done, 0);
    if (n < 0 && errno == EINTR) continue;
    ZERO_CHECK(n > 0, "the rendezvous store at ", address(), " closed the connection",
               n < 0 ? " (" + errno_text() + ")" : std::string());
    done += static_cast<std::size_t>(n);
  }
}

void TcpStore::set(const std::string& key, const std::vector<char>& value) {
  std::vector<char> message;
  append_value(message, query(kSet));
  append_string(message, key.data(), key.size());
  append_string(message, value.data(), value.size());
  std::lock_guard lock(mutex_);
  write_all(message);
}

std::vector<char> TcpStore::get(const std::string& key) {
  wait({key}, timeout_);
  std::vector<char> message;
  append_value(message, query(kGet));
  append_string(message, key.data(), key.size());
  std::lock_guard lock(mutex_);
  write_all(message);
  std::uint64_t size = 0;
  read_all(&size, sizeof size, timeout_);
  std::vector<char> value(size);
  read_all(value.data(), value.size(), timeout_);
  return value;
}

std::int64_t TcpStore::add(const std::string& key, std::int64_t delta) {
  std::vector<char> message;
  append_value(message, query(kAdd));
  append_string(message, key.data(), key.size());
  append_value<std::int64_t>(message, delta);
  std::lock_guard lock(mutex_);
  write_all(message);
  std::int64_t value = 0;
  read_all(&value, sizeof value, timeout_);
  return value;
}

bool TcpStore::check(const std::vector<std::string>& keys) {
  std::vector<char> message;
  append_value(message, query(kCheck));
  append_value<std::uint64_t>(message, keys.size());
  for (const std::string& key : keys) append_string(message, key.data(), key.size());
  std::lock_guard lock(mutex_);
  write_all(message);
  std::uint8_t answer = wire::kNotReady;
  read_all(&answer, 1, timeout_);
  return answer == wire::kReady;
}

void TcpStore::wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  auto pause = std::chrono::milliseconds(1);
  while (!check(keys)) {
    if (Clock::now() >= deadline) {
      std::ostringstream names;
      for (std::size_t i = 0; i < keys.size(); ++i)
        names << (i ? ", " : "") << "'" << keys[i] << "'";
      ZERO_THROW("rendezvous: key(s) ", names.str(), " did not appear in the store at ", address(),
                 " within ", std::chrono::duration<double>(timeout).count(),
                 " s (a rank did not start, or died)");
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(50));
  }
}

// ----- server -----

namespace {

bool read_exact(int fd, void* data, std::size_t size) {
  char* out = static_cast<char*>(data);
  std::size_t done = 0;
  while (done < size) {
    const ssize_t n = ::recv(fd, out + done, size - done, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<std::size_t>(n);
  }
  return true;
}

bool write_exact(int fd, const std::vector<char>& bytes) {
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::send(fd, bytes.data() + done, bytes.size() - done, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<std::size_t>(n);
  }
  return true;
}

// A client socket of TcpStoreServer.
class SocketChannel final : public StoreChannel {
 public:
  SocketChannel(int fd, const std::atomic<bool>& stop) : fd_(fd), stop_(stop) {}
  bool read(void* data, std::size_t size) override { return !stop_ && read_exact(fd_, data, size); }
  bool write(const std::vector<char>& bytes) override { return write_exact(fd_, bytes); }
  bool keep_waiting() override {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    return !stop_;
  }

 private:
  int fd_;
  const std::atomic<bool>& stop_;
};

}  // namespace

TcpStoreServer::TcpStoreServer(int port) : port_(port) {
  ZERO_CHECK(port > 0 && port < 65536, "MASTER_PORT=", port, " is not a TCP port (1..65535)");
  listen_fd_ = ::socket(AF_INET6, SOCK_STREAM, 0);
  bool ipv6 = listen_fd_ >= 0;
  if (!ipv6) listen_fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
  ZERO_CHECK(listen_fd_ >= 0, "cannot create the rendezvous store's socket: ", errno_text());
  int one = 1, zero = 0;
  ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  int bound = -1;
  if (ipv6) {
    ::setsockopt(listen_fd_, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
    sockaddr_in6 address{};
    address.sin6_family = AF_INET6;
    address.sin6_addr = in6addr_any;
    address.sin6_port = htons(static_cast<std::uint16_t>(port));
    bound = ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&address), sizeof address);
  } else {
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_ANY);
    address.sin_port = htons(static_cast<std::uint16_t>(port));
    bound = ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&address), sizeof address);
  }
  if (bound != 0 || ::listen(listen_fd_, 128) != 0) {
    const std::string why = errno_text();
    ::close(listen_fd_);
    ZERO_THROW("rank 0 cannot host the rendezvous store on port ", port, " (MASTER_PORT): ", why,
               "; pick a free port");
  }
  acceptor_ = std::thread([this] { accept_loop(); });
}

TcpStoreServer::~TcpStoreServer() {
  stop_ = true;
  ::shutdown(listen_fd_, SHUT_RDWR);
  acceptor_.join();
  ::close(listen_fd_);
  std::vector<std::thread> threads;
  {
    std::lock_guard lock(mutex_);
    for (int fd : clients_) ::shutdown(fd, SHUT_RDWR);
    threads.swap(threads_);
  }
  for (std::thread& thread : threads) thread.join();
  for (int fd : clients_) ::close(fd);
}

void TcpStoreServer::accept_loop() {
  while (!stop_) {
    pollfd p{listen_fd_, POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) continue;
    const int fd = ::accept(listen_fd_, nullptr, nullptr);
    if (fd < 0) continue;
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    std::lock_guard lock(mutex_);
    if (stop_) {
      ::close(fd);
      break;
    }
    clients_.push_back(fd);
    threads_.emplace_back([this, fd] { serve(fd); });
  }
}

void TcpStoreServer::serve(int fd) {
  serve_client(fd);
  ::shutdown(fd, SHUT_RDWR);  // the client sees the end at once (a stray client, or an error)
}

void TcpStoreServer::serve_client(int fd) {
  SocketChannel channel(fd, stop_);
  serve_store_queries(channel, data_);
}

std::vector<char> share_from_rank0(const GlooRendezvous& rendezvous, const std::string& key,
                                   const std::vector<char>& value,
                                   std::chrono::milliseconds timeout) {
  ZERO_CHECK(rendezvous.rank >= 0 && rendezvous.rank < rendezvous.world_size, "rank ",
             rendezvous.rank, " is outside world of size ", rendezvous.world_size);
  ZERO_CHECK(!rendezvous.master_addr.empty() && rendezvous.master_port > 0, "sharing '", key,
             "' through the launcher's store needs MASTER_ADDR and MASTER_PORT (got '",
             rendezvous.master_addr, "':", rendezvous.master_port, ")");
  const std::string prefix = rendezvous.key_prefix + key;
  std::unique_ptr<TcpStoreServer> server;
  if (rendezvous.rank == 0 && !rendezvous.agent_store)
    server = std::make_unique<TcpStoreServer>(rendezvous.master_port);
  TcpStore store(rendezvous.master_addr, rendezvous.master_port, timeout);
  std::vector<char> result = value;
  if (rendezvous.rank == 0) {
    store.set(prefix + "value", value);
  } else {
    result = store.get(prefix + "value");
  }
  std::int64_t seen = store.add(prefix + "read", 1);
  if (rendezvous.rank == 0) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (seen < rendezvous.world_size) {
      ZERO_CHECK(std::chrono::steady_clock::now() < deadline, "only ", seen, " of ",
                 rendezvous.world_size, " ranks read '", prefix, "value' from the store at ",
                 store.address(), " within ", timeout.count(), " ms");
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      seen = store.add(prefix + "read", 0);
    }
  }
  return result;
}

}  // namespace zero::detail
