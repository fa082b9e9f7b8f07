// The TCPStore client and the store rank 0 hosts: the operations Gloo's rendezvous and the
// watchdog use, protocol detection, and the errors for a store that is absent or a key that never
// comes; share_from_rank0, the NCCL store bootstrap's exchange. (The PyTorch 1.x side of the
// protocol runs against torchrun's own store in comm_gloo_test_torchrun_np*.)
#include "comm/tcp_store.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <thread>

#include "../common/free_port.h"
#include "zero/core/error.h"

namespace zero::detail {
namespace {

using namespace std::chrono_literals;

int free_port() {
  const int port = zero::testing::free_port();
  EXPECT_GT(port, 0) << "no free port on 127.0.0.1";
  return port;
}

std::vector<char> bytes(std::string_view text) { return {text.begin(), text.end()}; }

TEST(TcpStore, SetGetAddCheckBetweenTwoClients) {
  TcpStoreServer server(free_port());
  TcpStore a("127.0.0.1", server.port(), 5s, TcpStore::Protocol::kV2);
  TcpStore b("localhost", server.port(), 5s);  // detects PyTorch 2's protocol
  EXPECT_EQ(b.protocol(), TcpStore::Protocol::kV2);
  EXPECT_FALSE(b.check({"x"}));
  // SET has no reply (as in c10d): a's next answered query proves the server applied it.
  a.set("x", bytes("hello"));
  a.add("sync", 0);
  EXPECT_TRUE(b.check({"x"}));
  EXPECT_EQ(b.get("x"), bytes("hello"));
  a.set("x", bytes(""));
  a.add("sync", 0);
  EXPECT_EQ(b.get("x"), bytes(""));
  EXPECT_EQ(a.add("n", 3), 3);
  EXPECT_EQ(b.add("n", -1), 2);
  EXPECT_EQ(a.add("n", 0), 2);
  EXPECT_FALSE(a.check({"x", "y"}));
  std::thread late([&] {
    std::this_thread::sleep_for(100ms);
    a.set("y", bytes("later"));
  });
  EXPECT_EQ(b.get("y"), bytes("later"));  // waits for the key
  late.join();
  const std::string big(1 << 20, 'z');
  a.set("big", bytes(big));
  EXPECT_EQ(b.get("big").size(), big.size());
}

TEST(TcpStore, WaitNamesTheMissingKey) {
  TcpStoreServer server(free_port());
  TcpStore client("127.0.0.1", server.port(), 5s, TcpStore::Protocol::kV2);
  try {
    client.wait({"rank_3"}, 200ms);
    FAIL() << "no error";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("'rank_3' did not appear"), std::string::npos)
        << error.what();
  }
}

TEST(TcpStore, NoServerIsAnErrorNamingTheAddress) {
  const int port = free_port();
  try {
    TcpStore client("127.0.0.1", port, 300ms, TcpStore::Protocol::kV2);
    FAIL() << "no error";
  } catch (const Error& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find("127.0.0.1:" + std::to_string(port)), std::string::npos) << message;
    EXPECT_NE(message.find("MASTER_ADDR and MASTER_PORT"), std::string::npos) << message;
  }
  EXPECT_THROW(TcpStore("127.0.0.1", 0, 100ms), Error);
}

TEST(TcpStore, PortTakenIsAnErrorNamingMasterPort) {
  TcpStoreServer first(free_port());
  try {
    TcpStoreServer second(first.port());
    FAIL() << "no error";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("(MASTER_PORT)"), std::string::npos) << error.what();
  }
}

// The NCCL store bootstrap's exchange: rank 0's bytes reach every rank, through a store rank 0
// hosts on MASTER_PORT and through an agent store (as torchrun's) with its key prefix; twice in a
// row on one port (rank 0's server stays until every rank has read, then goes).
std::vector<std::vector<char>> share_among(int world, int port, bool agent,
                                           const std::string& key) {
  std::vector<std::vector<char>> results(world);
  std::vector<std::thread> ranks;
  for (int r = 0; r < world; ++r) {
    ranks.emplace_back([&, r] {
      GlooRendezvous rendezvous;
      rendezvous.rank = r;
      rendezvous.world_size = world;
      rendezvous.master_addr = "127.0.0.1";
      rendezvous.master_port = port;
      rendezvous.agent_store = agent;
      rendezvous.key_prefix = agent ? "/worker/attempt_0/" : "";
      // Non-zero ranks must not see their own bytes: only rank 0's.
      results[r] = share_from_rank0(rendezvous, key, bytes("from rank " + std::to_string(r)), 10s);
    });
  }
  for (auto& rank : ranks) rank.join();
  return results;
}

TEST(TcpStore, ShareFromRankZeroReachesEveryRank) {
  const int port = free_port();
  for (const std::string key : {"zero/nccl/0/", "zero/nccl/1/"}) {
    for (const auto& result : share_among(3, port, /*agent=*/false, key))
      EXPECT_EQ(result, bytes("from rank 0")) << key;
  }
  TcpStoreServer agent(free_port());
  for (const auto& result : share_among(2, agent.port(), /*agent=*/true, "zero/nccl/0/"))
    EXPECT_EQ(result, bytes("from rank 0"));
  TcpStore look("127.0.0.1", agent.port(), 5s, TcpStore::Protocol::kV2);
  EXPECT_TRUE(look.check({"/worker/attempt_0/zero/nccl/0/value"}));
}

TEST(TcpStore, ShareFromRankZeroNamesAMissingMasterAddress) {
  GlooRendezvous rendezvous;
  rendezvous.rank = 1;
  rendezvous.world_size = 2;
  try {
    share_from_rank0(rendezvous, "zero/nccl/0/", {}, 100ms);
    FAIL() << "no error";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("MASTER_ADDR and MASTER_PORT"), std::string::npos)
        << error.what();
  }
}

TEST(TcpStore, ShareFromRankZeroNamesTheRanksThatNeverRead) {
  GlooRendezvous rendezvous;
  rendezvous.rank = 0;
  rendezvous.world_size = 2;
  rendezvous.master_addr = "127.0.0.1";
  rendezvous.master_port = free_port();
  try {
    share_from_rank0(rendezvous, "zero/nccl/0/", bytes("id"), 300ms);
    FAIL() << "no error";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("only 1 of 2 ranks read"), std::string::npos)
        << error.what();
  }
}

// The bytes of one client, as the server's query parser reads them (serve_store_queries).
class ScriptedChannel final : public StoreChannel {
 public:
  explicit ScriptedChannel(std::vector<char> bytes) : bytes_(std::move(bytes)) {}
  bool read(void* data, std::size_t size) override {
    if (size > bytes_.size() - offset_) return false;
    std::memcpy(data, bytes_.data() + offset_, size);
    offset_ += size;
    return true;
  }
  bool write(const std::vector<char>& reply) override {
    replies.insert(replies.end(), reply.begin(), reply.end());
    return true;
  }
  bool keep_waiting() override { return false; }
  std::vector<char> replies;

 private:
  std::vector<char> bytes_;
  std::size_t offset_ = 0;
};

template <typename T>
void put(std::vector<char>& out, T value) {
  const char* raw = reinterpret_cast<const char*>(&value);
  out.insert(out.end(), raw, raw + sizeof value);
}

std::vector<char> validated() {
  std::vector<char> out;
  put<std::uint8_t>(out, 0);  // VALIDATE
  put<std::uint32_t>(out, 0x3C85F7CE);
  return out;
}

// Serves a client that sends a string's size field of 4 GiB and goes away, in an address space
// far below 4 GiB; exits 0 when the server allocated nothing for it and stored nothing.
void serve_a_string_size_without_its_bytes() {
  const rlimit limit{256u << 20, 256u << 20};
  ::setrlimit(RLIMIT_AS, &limit);
  std::vector<char> client = validated();
  put<std::uint8_t>(client, 1);  // SET
  put<std::uint64_t>(client, std::uint64_t{1} << 32);
  client.insert(client.end(), 100, 'k');
  ScriptedChannel channel(client);
  StoreData data;
  serve_store_queries(channel, data);
  std::exit(data.values.empty() ? 0 : 1);
}

// Found by tests/fuzz (findings/tcp_store/oom-string-size-before-bytes): a string's size field
// made the server allocate that size (up to 4 GiB) before any byte of it came.
TEST(TcpStoreServer, AStringSizeWithoutItsBytesAllocatesNothing) {
  EXPECT_EXIT(serve_a_string_size_without_its_bytes(), ::testing::ExitedWithCode(0), "");
}

void put_string(std::vector<char>& out, std::string_view text) {
  put<std::uint64_t>(out, text.size());
  out.insert(out.end(), text.begin(), text.end());
}

std::vector<char> add_query(std::string_view key, std::int64_t delta) {
  std::vector<char> out;
  put<std::uint8_t>(out, 4);  // ADD
  put_string(out, key);
  put<std::int64_t>(out, delta);
  return out;
}

// Found by tests/fuzz (findings/tcp_store/crash-add-on-a-non-number): ADD on a value that is not
// a decimal integer threw std::invalid_argument on the server thread (std::terminate for the
// job); a sum past int64 was undefined. Both now drop the client and leave the value alone.
TEST(TcpStoreServer, AddOnANonNumberOrPastInt64DropsTheClient) {
  std::vector<char> client = validated();
  put<std::uint8_t>(client, 1);  // SET k "v"
  put_string(client, "k");
  put_string(client, "v");
  const std::vector<char> add = add_query("k", 1);
  client.insert(client.end(), add.begin(), add.end());
  ScriptedChannel channel(client);
  StoreData data;
  serve_store_queries(channel, data);
  EXPECT_EQ(data.values["k"], bytes("v"));
  EXPECT_TRUE(channel.replies.empty());

  std::vector<char> counter = validated();
  for (const std::int64_t delta : {std::int64_t{9223372036854775807}, std::int64_t{1}}) {
    const std::vector<char> query = add_query("n", delta);
    counter.insert(counter.end(), query.begin(), query.end());
  }
  ScriptedChannel overflowing(counter);
  serve_store_queries(overflowing, data);
  EXPECT_EQ(data.values["n"], bytes("9223372036854775807"));
  EXPECT_EQ(overflowing.replies.size(), sizeof(std::int64_t));  // the first ADD only
}

}  // namespace
}  // namespace zero::detail
