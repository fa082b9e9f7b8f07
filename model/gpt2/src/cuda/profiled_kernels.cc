// ZERO_KERNEL_PROFILE=1: the CUDA kernels wrapped in a decorator that brackets every call with
// CUDA events on its stream and, when the model's kernels are destroyed, prints to stderr each
// operation's calls and device milliseconds (GEMMs and attention keyed by shape), their sum and
// the device span from the first call to the last: what the model's operations cost on the device,
// and how much of the span went elsewhere (the engine's work, host waits, idle gaps). Each key's
// first call (cuDNN's graph builds, cuBLASLt's heuristics) is counted apart. A call's time runs
// from its start event to its end event, so it includes host time while the device waited for the
// call's launches. The decorator adds one event pair per call; numbers are for finding where time
// goes, not for headlines (gpt2_cuda_bench and zero train's tokens/s are those).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "../kernels_internal.h"
#include "zero/core/cuda_ops.h"

namespace zero::gpt2 {
namespace {

std::string shape(const char* name, std::int64_t a, std::int64_t b, std::int64_t c) {
  return std::string(name) + " " + std::to_string(a) + "x" + std::to_string(b) + "x" +
         std::to_string(c);
}

class ProfiledKernels final : public Kernels {
 public:
  explicit ProfiledKernels(std::unique_ptr<Kernels> inner) : inner_(std::move(inner)) {}
  ~ProfiledKernels() override {
    drain();
    print();
    if (first_ != nullptr) cudaEventDestroy(first_);
    if (last_ != nullptr) cudaEventDestroy(last_);
  }
  std::string_view backend() const override { return inner_->backend(); }

  void encoder_forward(Stream& s, float* out, const int* tokens, const float* wte, const float* wpe,
                       std::int64_t B, std::int64_t T, std::int64_t C,
                       const DropoutSite& d) override {
    timed("encoder_forward", s,
          [&] { inner_->encoder_forward(s, out, tokens, wte, wpe, B, T, C, d); });
  }
  void encoder_backward(Stream& s, float* dwte, float* dwpe, const float* dout, const int* tokens,
                        const int* host_tokens, std::int64_t B, std::int64_t T, std::int64_t C,
                        const DropoutSite& d) override {
    timed("encoder_backward", s,
          [&] { inner_->encoder_backward(s, dwte, dwpe, dout, tokens, host_tokens, B, T, C, d); });
  }
  void layernorm_forward(Stream& s, ActivationOut out, float* mean, float* rstd, const float* inp,
                         const float* weight, const float* bias, std::int64_t N, std::int64_t C,
                         float epsilon) override {
    timed("layernorm_forward", s,
          [&] { inner_->layernorm_forward(s, out, mean, rstd, inp, weight, bias, N, C, epsilon); });
  }
  void residual_layernorm_forward(Stream& s, float* residual_out, ActivationOut out, float* mean,
                                  float* rstd, const float* residual, const float* inp,
                                  const float* weight, const float* bias, std::int64_t B,
                                  std::int64_t T, std::int64_t C, float epsilon,
                                  const DropoutSite& d) override {
    timed("residual_layernorm_forward", s, [&] {
      inner_->residual_layernorm_forward(s, residual_out, out, mean, rstd, residual, inp, weight,
                                         bias, B, T, C, epsilon, d);
    });
  }
  void residual_forward(Stream& s, float* out, const float* residual, const float* inp,
                        std::int64_t B, std::int64_t T, std::int64_t C,
                        const DropoutSite& d) override {
    timed("residual_forward", s,
          [&] { inner_->residual_forward(s, out, residual, inp, B, T, C, d); });
  }
  void layernorm_backward(Stream& s, float* dinp, float* dweight, float* dbias, const float* dout,
                          const float* inp, const float* weight, const float* mean,
                          const float* rstd, std::int64_t N, std::int64_t C) override {
    timed("layernorm_backward", s, [&] {
      inner_->layernorm_backward(s, dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C);
    });
  }
  void dropout_backward(Stream& s, float* dinp, const float* dout, std::int64_t B, std::int64_t T,
                        std::int64_t C, const DropoutSite& d) override {
    timed("dropout_backward", s, [&] { inner_->dropout_backward(s, dinp, dout, B, T, C, d); });
  }
  void rmsnorm_forward(Stream& s, ActivationOut out, float* rstd, const float* inp,
                       const float* weight, std::int64_t N, std::int64_t C,
                       float epsilon) override {
    timed("rmsnorm_forward", s,
          [&] { inner_->rmsnorm_forward(s, out, rstd, inp, weight, N, C, epsilon); });
  }
  void residual_rmsnorm_forward(Stream& s, float* residual_out, ActivationOut out, float* rstd,
                                const float* residual, const float* inp, const float* weight,
                                std::int64_t B, std::int64_t T, std::int64_t C, float epsilon,
                                const DropoutSite& d) override {
    timed("residual_rmsnorm_forward", s, [&] {
      inner_->residual_rmsnorm_forward(s, residual_out, out, rstd, residual, inp, weight, B, T, C,
                                       epsilon, d);
    });
  }
  void rmsnorm_backward(Stream& s, float* dinp, float* dweight, const float* dout, const float* inp,
                        const float* weight, const float* rstd, std::int64_t N,
                        std::int64_t C) override {
    timed("rmsnorm_backward", s,
          [&] { inner_->rmsnorm_backward(s, dinp, dweight, dout, inp, weight, rstd, N, C); });
  }
  void rope_table(Stream& s, float* table, const RopeParameters& p,
                  std::int64_t positions) override {
    timed("rope_table", s, [&] { inner_->rope_table(s, table, p, positions); });
  }
  void rope_forward(Stream& s, ActivationOut x, const float* table, std::int64_t positions,
                    const RopeLayout& l) override {
    timed(shape("rope_forward", l.B * l.T, l.heads, l.head_dim), s,
          [&] { inner_->rope_forward(s, x, table, positions, l); });
  }
  void rope_backward(Stream& s, float* dx, const float* table, std::int64_t positions,
                     const RopeLayout& l) override {
    timed(shape("rope_backward", l.B * l.T, l.heads, l.head_dim), s,
          [&] { inner_->rope_backward(s, dx, table, positions, l); });
  }
  void swiglu_forward(Stream& s, ActivationOut out, const float* inp, std::int64_t N,
                      std::int64_t H) override {
    timed("swiglu_forward", s, [&] { inner_->swiglu_forward(s, out, inp, N, H); });
  }
  void repeat_kv_forward(Stream& s, ActivationOut heads, Activation qkv, std::int64_t N,
                         std::int64_t NH, std::int64_t KVH, std::int64_t HS) override {
    timed("repeat_kv_forward", s,
          [&] { inner_->repeat_kv_forward(s, heads, qkv, N, NH, KVH, HS); });
  }
  void repeat_kv_backward(Stream& s, float* dqkv, const float* dheads, std::int64_t N,
                          std::int64_t NH, std::int64_t KVH, std::int64_t HS) override {
    timed("repeat_kv_backward", s,
          [&] { inner_->repeat_kv_backward(s, dqkv, dheads, N, NH, KVH, HS); });
  }
  void cached_attention_forward(Stream& s, const CachedAttention& c) override {
    timed(shape("cached_attention_forward", c.Q, c.first_position + c.Q, c.NH), s,
          [&] { inner_->cached_attention_forward(s, c); });
  }
  void swiglu_backward(Stream& s, float* dinp, const float* dout, const float* inp, std::int64_t N,
                       std::int64_t H) override {
    timed("swiglu_backward", s, [&] { inner_->swiglu_backward(s, dinp, dout, inp, N, H); });
  }
  void linear_forward(Stream& s, const LinearForward& c, const GemmScratch& g) override {
    timed(shape(c.gelu_out.data ? "linear_forward+gelu" : "linear_forward", c.N, c.C, c.OC), s,
          [&] { inner_->linear_forward(s, c, g); });
  }
  void linear_backward(Stream& s, const LinearBackward& c, const GemmScratch& g) override {
    // "gelu+linear_backward": GELU's backward applied to dout in the linear's own pass (fc's).
    timed(shape(c.gelu_preactivation ? "gelu+linear_backward" : "linear_backward", c.N, c.C, c.OC),
          s, [&] { inner_->linear_backward(s, c, g); });
  }
  void weight_gemm(Stream& s, const WeightGemm& c, const GemmScratch& g) override {
    timed(shape("weight_gemm", c.M, c.N, c.K), s, [&] { inner_->weight_gemm(s, c, g); });
  }
  void logits_forward(Stream& s, const LogitsForward& c, const GemmScratch& g) override {
    timed(shape("logits_forward", c.N, c.Vp, c.C), s, [&] { inner_->logits_forward(s, c, g); });
  }
  void logits_backward(Stream& s, const LogitsBackward& c, const GemmScratch& g) override {
    timed(shape("logits_backward", c.N, c.Vp, c.C), s, [&] { inner_->logits_backward(s, c, g); });
  }
  void grad_gemm(Stream& s, const GradGemm& c, const GemmScratch& g) override {
    timed(shape("grad_gemm", c.M, c.N, c.K), s, [&] { inner_->grad_gemm(s, c, g); });
  }
  void gemm(Stream& s, bool trans_a, bool trans_b, std::int64_t M, std::int64_t N, std::int64_t K,
            const float* A, std::int64_t lda, const float* B, std::int64_t ldb, float beta,
            float* C, std::int64_t ldc) override {
    timed(shape("gemm", M, N, K), s,
          [&] { inner_->gemm(s, trans_a, trans_b, M, N, K, A, lda, B, ldb, beta, C, ldc); });
  }
  void attention_forward(Stream& s, ActivationOut out, float* att, Activation qkv, std::int64_t B,
                         std::int64_t T, std::int64_t C, std::int64_t NH, const DropoutSite& d,
                         DType precision, const GemmScratch& g) override {
    timed(shape("attention_forward", B, T, C), s,
          [&] { inner_->attention_forward(s, out, att, qkv, B, T, C, NH, d, precision, g); });
  }
  void attention_backward(Stream& s, float* dqkv, float* datt, const float* dout, Activation out,
                          Activation qkv, const float* att, std::int64_t B, std::int64_t T,
                          std::int64_t C, std::int64_t NH, const DropoutSite& d, DType precision,
                          const GemmScratch& g) override {
    timed(shape("attention_backward", B, T, C), s, [&] {
      inner_->attention_backward(s, dqkv, datt, dout, out, qkv, att, B, T, C, NH, d, precision, g);
    });
  }
  bool grouped_attention_forward(Stream& s, ActivationOut out, float* att, Activation qkv,
                                 std::int64_t B, std::int64_t T, std::int64_t C, std::int64_t NH,
                                 std::int64_t KVH, const DropoutSite& d, DType precision,
                                 const GemmScratch& g) override {
    bool ran = false;
    timed(shape("grouped_attention_forward", B, T, C), s, [&] {
      ran = inner_->grouped_attention_forward(s, out, att, qkv, B, T, C, NH, KVH, d, precision, g);
    });
    return ran;
  }
  bool grouped_attention_backward(Stream& s, float* dqkv, const float* dout, Activation out,
                                  Activation qkv, const float* att, std::int64_t B, std::int64_t T,
                                  std::int64_t C, std::int64_t NH, std::int64_t KVH,
                                  const DropoutSite& d, DType precision,
                                  const GemmScratch& g) override {
    bool ran = false;
    timed(shape("grouped_attention_backward", B, T, C), s, [&] {
      ran = inner_->grouped_attention_backward(s, dqkv, dout, out, qkv, att, B, T, C, NH, KVH, d,
                                               precision, g);
    });
    return ran;
  }
  void crossentropy_forward(Stream& s, float* losses, float* logsumexp, const float* logits,
                            const int* targets, std::int64_t N, std::int64_t V,
                            std::int64_t Vp) override {
    timed("crossentropy_forward", s,
          [&] { inner_->crossentropy_forward(s, losses, logsumexp, logits, targets, N, V, Vp); });
  }
  void crossentropy_backward(Stream& s, float* logits, const float* logsumexp, const int* targets,
                             std::int64_t N, std::int64_t V, std::int64_t Vp,
                             float scale) override {
    timed("crossentropy_backward", s,
          [&] { inner_->crossentropy_backward(s, logits, logsumexp, targets, N, V, Vp, scale); });
  }
  bool supports_label_smoothing() const override { return inner_->supports_label_smoothing(); }
  void smoothed_crossentropy_forward(Stream& s, float* losses, float* logsumexp,
                                     const float* logits, const int* targets, std::int64_t N,
                                     std::int64_t V, std::int64_t Vp, float epsilon) override {
    timed("crossentropy_forward", s, [&] {
      inner_->smoothed_crossentropy_forward(s, losses, logsumexp, logits, targets, N, V, Vp,
                                            epsilon);
    });
  }
  void smoothed_crossentropy_backward(Stream& s, float* logits, const float* logsumexp,
                                      const int* targets, std::int64_t N, std::int64_t V,
                                      std::int64_t Vp, float scale, float epsilon) override {
    timed("crossentropy_backward", s, [&] {
      inner_->smoothed_crossentropy_backward(s, logits, logsumexp, targets, N, V, Vp, scale,
                                             epsilon);
    });
  }
  void widen(Stream& s, float* out, const void* in, DType dtype, std::int64_t n) override {
    timed("widen", s, [&] { inner_->widen(s, out, in, dtype, n); });
  }
  void accumulate(Stream& s, void* out, DType dtype, const float* in, std::int64_t n) override {
    timed("accumulate", s, [&] { inner_->accumulate(s, out, dtype, in, n); });
  }
  void widen_rows(Stream& s, float* out, const void* table, DType dtype, const int* host_rows,
                  std::int64_t count, std::int64_t C) override {
    timed("widen_rows", s, [&] { inner_->widen_rows(s, out, table, dtype, host_rows, count, C); });
  }
  void accumulate_rows(Stream& s, void* table, DType dtype, const float* in, const int* host_rows,
                       std::int64_t count, std::int64_t C) override {
    timed("accumulate_rows", s,
          [&] { inner_->accumulate_rows(s, table, dtype, in, host_rows, count, C); });
  }
  void zero(Stream& s, float* out, std::int64_t n) override {
    timed("zero", s, [&] { inner_->zero(s, out, n); });
  }
  void copy(Stream& s, float* out, const float* in, std::int64_t n) override {
    timed("copy", s, [&] { inner_->copy(s, out, in, n); });
  }
  void copy_rows(Stream& s, float* out, const float* in, const std::int64_t* host_rows,
                 std::int64_t count, std::int64_t C, bool scatter) override {
    timed("copy_rows", s, [&] { inner_->copy_rows(s, out, in, host_rows, count, C, scatter); });
  }

 private:
  struct Pending {
    std::string name;
    cudaEvent_t start, end;
  };
  struct Total {
    std::int64_t calls = 0;  // after the first
    double ms = 0.0;
    double first_ms = -1.0;
  };

  template <typename Call>
  void timed(const std::string& name, Stream& stream, Call&& call) {
    const auto native = static_cast<cudaStream_t>(cuda_stream_handle(stream));
    Pending p{name, nullptr, nullptr};
    cudaEventCreate(&p.start);
    cudaEventCreate(&p.end);
    cudaEventRecord(p.start, native);
    call();
    cudaEventRecord(p.end, native);
    pending_.push_back(std::move(p));
    if (pending_.size() >= 4096) drain();
  }

  // Adds the finished pairs' times (waiting for the last), keeping the span's ends.
  void drain() {
    if (pending_.empty()) return;
    cudaEventSynchronize(pending_.back().end);
    for (Pending& p : pending_) {
      float ms = 0.0f;
      if (cudaEventElapsedTime(&ms, p.start, p.end) == cudaSuccess) {
        Total& total = totals_[p.name];
        if (total.first_ms < 0.0) {
          total.first_ms = ms;
          first_calls_ms_ += ms;
        } else {
          ++total.calls;
          total.ms += ms;
        }
      }
      if (first_ == nullptr) {
        first_ = p.start;
      } else {
        cudaEventDestroy(p.start);
      }
      if (last_ != nullptr) cudaEventDestroy(last_);
      last_ = p.end;
    }
    pending_.clear();
    float span = 0.0f;
    if (first_ != nullptr && last_ != nullptr) cudaEventElapsedTime(&span, first_, last_);
    span_ms_ = span;
  }

  void print() const {
    std::vector<std::pair<std::string, Total>> rows(totals_.begin(), totals_.end());
    std::sort(rows.begin(), rows.end(),
              [](const auto& a, const auto& b) { return a.second.ms > b.second.ms; });
    double sum = 0.0;
    std::int64_t calls = 0;
    for (const auto& row : rows) {
      sum += row.second.ms;
      calls += row.second.calls;
    }
    std::fprintf(stderr,
                 "zero: kernel profile (ZERO_KERNEL_PROFILE): %lld calls after each key's first, "
                 "%.1f ms inside them; first calls %.1f ms; device span %.1f ms (%.1f%% inside "
                 "calls)\n",
                 static_cast<long long>(calls), sum, first_calls_ms_, span_ms_,
                 span_ms_ > 0 ? 100.0 * (sum + first_calls_ms_) / span_ms_ : 0.0);
    for (const auto& [name, total] : rows)
      std::fprintf(
          stderr,
          "zero: kernel profile %-44s %7lld calls %10.2f ms %8.4f ms/call (first %.2f ms)\n",
          name.c_str(), static_cast<long long>(total.calls), total.ms,
          total.calls > 0 ? total.ms / static_cast<double>(total.calls) : 0.0, total.first_ms);
  }

  std::unique_ptr<Kernels> inner_;
  std::vector<Pending> pending_;
  std::map<std::string, Total> totals_;
  cudaEvent_t first_ = nullptr, last_ = nullptr;
  float span_ms_ = 0.0f;
  double first_calls_ms_ = 0.0;
};

}  // namespace

std::unique_ptr<Kernels> profile_kernels(std::unique_ptr<Kernels> inner) {
  return std::make_unique<ProfiledKernels>(std::move(inner));
}

}  // namespace zero::gpt2
