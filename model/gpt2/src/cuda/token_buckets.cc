// encoder_backward's grouping of rows by token (token_buckets.h).
#include "token_buckets.h"

#include <algorithm>
#include <numeric>

#include "zero/core/error.h"

namespace zero::gpt2::cuda {

TokenBuckets token_buckets(const int* host_tokens, std::int64_t N) {
  // A stable sort of row indices by token.
  std::vector<int> order(static_cast<std::size_t>(N));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return host_tokens[a] < host_tokens[b]; });
  std::vector<int> bucket_token, bucket_begin;
  for (std::int64_t k = 0; k < N; ++k) {
    const int token = host_tokens[order[k]];
    ZERO_CHECK(token >= 0, "encoder_backward: token ", token, " at row ", order[k], " is negative");
    if (bucket_token.empty() || bucket_token.back() != token) {
      bucket_token.push_back(token);
      bucket_begin.push_back(static_cast<int>(k));
    }
  }
  bucket_begin.push_back(static_cast<int>(N));
  TokenBuckets result;
  result.buckets = static_cast<std::int64_t>(bucket_token.size());
  result.table.reserve(bucket_token.size() + bucket_begin.size() + order.size());
  result.table.insert(result.table.end(), bucket_token.begin(), bucket_token.end());
  result.table.insert(result.table.end(), bucket_begin.begin(), bucket_begin.end());
  result.table.insert(result.table.end(), order.begin(), order.end());
  return result;
}

}  // namespace zero::gpt2::cuda
