// encoder_backward's grouping of rows by token, on the host (no CUDA header: the CPU emulation
// test of the encoder kernels uses it too).
#pragma once

#include <cstdint>
#include <vector>

namespace zero::gpt2::cuda {

// encoder_backward's grouping of rows by token (host): [bucket_token (K) | bucket_begin (K + 1) |
// rows (N)], tokens ascending, each bucket's rows ascending; throws on a negative token.
struct TokenBuckets {
  std::int64_t buckets = 0;
  std::vector<int> table;
};
TokenBuckets token_buckets(const int* host_tokens, std::int64_t N);

// The three parts of a table of `buckets` buckets (a copy of TokenBuckets::table, on either side).
struct TokenTable {
  const int* bucket_token;  // (K)
  const int* bucket_begin;  // (K + 1)
  const int* rows;          // (N)
};
constexpr TokenTable token_table(const int* table, std::int64_t buckets) {
  return {table, table + buckets, table + 2 * buckets + 1};
}

}  // namespace zero::gpt2::cuda
