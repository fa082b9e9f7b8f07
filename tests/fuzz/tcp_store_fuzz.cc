// Fuzzes the TCPStore server's query parser (serve_store_queries, the loop each client socket of
// TcpStoreServer runs): the input is the bytes one client sends. Replies go nowhere; a WAIT for
// keys that do not exist ends the session instead of waiting, as a server stopping would.
#include <cstring>

#include "comm/tcp_store.h"
#include "fuzz_input.h"

namespace {

class BytesChannel final : public zero::detail::StoreChannel {
 public:
  explicit BytesChannel(std::string_view bytes) : bytes_(bytes) {}
  bool read(void* data, std::size_t size) override {
    if (size > bytes_.size()) return false;
    std::memcpy(data, bytes_.data(), size);
    bytes_.remove_prefix(size);
    return true;
  }
  bool write(const std::vector<char>&) override { return true; }
  bool keep_waiting() override { return false; }

 private:
  std::string_view bytes_;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  BytesChannel channel(zero::fuzz::as_text(data, size));
  zero::detail::StoreData store;
  // No catch, not even of zero::Error: the parser runs on a server thread, where any exception
  // would end the job (its contract is never to throw for what a client sends).
  zero::detail::serve_store_queries(channel, store);
  return 0;
}
