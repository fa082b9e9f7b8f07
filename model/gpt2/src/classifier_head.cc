// GPT2ForSequenceClassification's head: last non-padding token → ln_f → score, its loss and
// backward, over the body's public kernels; and GPT2Compute's two hooks another head uses.
#include <algorithm>
#include <cstring>

#include "zero/core/error.h"
#include "zero/gpt2/classifier.h"
#include "zero/gpt2/layers_cpu.h"
#include "zero/gpt2/rng.h"

namespace zero::gpt2 {

const float* GPT2Compute::final_hidden_input() const { return block_input(config_.n_layer); }
float* GPT2Compute::final_hidden_grad() { return workspace("dresidual"); }

void ClassifierConfig::validate(const GPT2Config& body) const {
  ZERO_CHECK(num_labels >= 1, "classifier: num_labels must be at least 1, got ", num_labels);
  ZERO_CHECK(id2label.empty() || static_cast<std::int64_t>(id2label.size()) == num_labels,
             "classifier: id2label has ", id2label.size(), " names for num_labels ", num_labels);
  ZERO_CHECK(pad_token_id >= 0 && pad_token_id < body.vocab_size, "classifier: pad_token_id ",
             pad_token_id, " is outside the vocabulary [0, ", body.vocab_size, ")");
}

std::vector<TensorSpec> score_tensors(const GPT2Config& body, const ClassifierConfig& head) {
  return {{kScoreTensorName, {head.num_labels, body.n_embd}}};
}

void init_score_range(const GPT2Config& body, std::uint64_t seed, ElementRange range, float* out) {
  const std::uint64_t key = derive_key(seed, hash_name(kScoreTensorName));
  for (std::size_t i = range.begin; i < range.end; ++i)
    out[i - range.begin] = static_cast<float>(body.initializer_range * normal_double(key, i));
}

std::vector<std::int64_t> last_token_positions(std::span<const int> tokens, std::int64_t B,
                                               std::int64_t T, std::int64_t pad_token_id) {
  ZERO_CHECK(static_cast<std::int64_t>(tokens.size()) == B * T, "classifier: ", tokens.size(),
             " tokens for B=", B, " T=", T);
  std::vector<std::int64_t> positions(static_cast<std::size_t>(B), 0);
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t t = T - 1; t >= 0; --t)
      if (tokens[static_cast<std::size_t>(b * T + t)] != pad_token_id) {
        positions[static_cast<std::size_t>(b)] = t;
        break;
      }
  return positions;
}

namespace {
std::vector<TensorSpec> head_specs(std::int64_t B, std::int64_t C, std::int64_t K,
                                   DType param_dtype) {
  std::vector<TensorSpec> specs = {
      {"rows", {B, C}},    {"ln", {B, C}},  {"mean", {B}},      {"rstd", {B}},   {"logits", {B, K}},
      {"dlogits", {B, K}}, {"losses", {B}}, {"logsumexp", {B}}, {"dln", {B, C}}, {"drows", {B, C}}};
  if (param_dtype != DType::kFloat32) {  // fp32 copies of ln_f's and score's values and grads
    specs.push_back({"norm32", {2 * C}});
    specs.push_back({"score32", {K, C}});
    specs.push_back({"dnorm32", {2 * C}});
    specs.push_back({"dscore32", {K, C}});
  }
  return specs;
}

// `data` as fp32: itself when fp32, else its n elements widened into `scratch`.
const float* as_fp32(ConstUnitData data, std::int64_t n, float* scratch) {
  if (data.dtype == DType::kFloat32) return static_cast<const float*>(data.data);
  cpu::widen(scratch, data.data, data.dtype, n);
  return scratch;
}
// Where the head accumulates `grads`: the buffer itself when fp32, else zeroed fp32 scratch that
// finish_grads adds to it.
float* grads_fp32(UnitData grads, std::int64_t n, float* scratch) {
  if (grads.dtype == DType::kFloat32) return static_cast<float*>(grads.data);
  std::memset(scratch, 0, static_cast<std::size_t>(n) * sizeof(float));
  return scratch;
}
void finish_grads(UnitData grads, std::int64_t n, const float* scratch) {
  if (grads.dtype != DType::kFloat32) cpu::accumulate(grads.data, grads.dtype, scratch, n);
}
}  // namespace

ClassifierHead::ClassifierHead(const GPT2Config& body, const ClassifierConfig& head,
                               std::int64_t batch_size, std::int64_t seq_len, Allocator& allocator,
                               DType param_dtype)
    : body_(body), head_(head), B_(batch_size), T_(seq_len), param_dtype_(param_dtype) {
  head_.validate(body_);
  ZERO_CHECK(B_ > 0 && T_ > 0, "classifier: batch size and sequence length must be positive");
  layout_ = FlatLayout(head_specs(B_, body_.n_embd, head_.num_labels, param_dtype_), 1, 16);
  buffer_ = allocator.allocate(layout_.padded_num_elements() * sizeof(float),
                               MemoryCategory::kActivations);
}

float* ClassifierHead::view(const std::string& name) const {
  return buffer_.data_as<float>() + layout_.slot(name).offset_elements;
}
const float* ClassifierHead::logits() const { return view("logits"); }
// A 16-bit run's fp32 scratch (null, and unused, in fp32 runs).
float* ClassifierHead::scratch(const std::string& name) const {
  return param_dtype_ == DType::kFloat32 ? nullptr : view(name);
}

std::vector<int> ClassifierHead::predictions() const {
  const std::int64_t K = head_.num_labels;
  const float* logits = view("logits");
  std::vector<int> predicted(static_cast<std::size_t>(B_));
  for (std::int64_t b = 0; b < B_; ++b)
    predicted[static_cast<std::size_t>(b)] =
        static_cast<int>(std::max_element(logits + b * K, logits + (b + 1) * K) - (logits + b * K));
  return predicted;
}

void ClassifierHead::forward(const GPT2Compute& body, std::span<const int> tokens,
                             std::span<const int> labels, ConstUnitData final_norm_data,
                             ConstUnitData score_data) {
  const std::int64_t C = body_.n_embd, K = head_.num_labels;
  ZERO_CHECK(body.batch_size() == B_ && body.seq_len() == T_,
             "classifier: the body runs B=", body.batch_size(), " T=", body.seq_len(),
             ", the head was made for B=", B_, " T=", T_);
  ZERO_CHECK(final_norm_data.dtype == param_dtype_ && score_data.dtype == param_dtype_,
             "classifier: the head was made for ", name_of(param_dtype_), " parameters, given ",
             name_of(final_norm_data.dtype), " ln_f and ", name_of(score_data.dtype), " score");
  ZERO_CHECK(labels.empty() || static_cast<std::int64_t>(labels.size()) == B_,
             "classifier: ", labels.size(), " labels for B=", B_);
  for (std::size_t b = 0; b < labels.size(); ++b)
    ZERO_CHECK(labels[b] < K, "classifier: label ", labels[b], " of row ", b,
               " is outside [0, num_labels=", K, ")");
  positions_ = last_token_positions(tokens, B_, T_, head_.pad_token_id);
  labels_.assign(labels.begin(), labels.end());
  float* rows = view("rows");
  const float* hidden = body.final_hidden_input();
  for (std::int64_t b = 0; b < B_; ++b)
    std::memcpy(rows + b * C, hidden + (b * T_ + positions_[static_cast<std::size_t>(b)]) * C,
                static_cast<std::size_t>(C) * sizeof(float));
  const float* final_norm_params = as_fp32(final_norm_data, 2 * C, scratch("norm32"));
  const float* score_params = as_fp32(score_data, K * C, scratch("score32"));
  const FinalNormTensors<const float> norm(final_norm_params, body_);
  float* ln = view("ln");
  cpu::layernorm_forward(ln, view("mean"), view("rstd"), rows, norm.weight, norm.bias, B_, C,
                         static_cast<float>(body_.layer_norm_epsilon));
  // logits (B, K) = ln (B, C) · scoreᵀ, score (K, C)
  cpu::gemm(false, true, B_, K, C, 1.0f, ln, C, score_params, C, 0.0f, view("logits"), K);
  loss_ = 0.0f;
  counted_ = 0;
  if (labels_.empty()) return;
  float* losses = view("losses");
  counted_ = cpu::crossentropy_forward(losses, view("logsumexp"), view("logits"), labels_.data(),
                                       B_, K, K);
  double sum = 0.0;
  for (std::int64_t b = 0; b < B_; ++b) sum += losses[b];
  loss_ = counted_ > 0 ? static_cast<float>(sum / static_cast<double>(counted_)) : 0.0f;
}

void ClassifierHead::backward(GPT2Compute& body, ConstUnitData final_norm_data,
                              ConstUnitData score_data, UnitData final_norm_grad_data,
                              UnitData score_grad_data, float loss_scale) {
  ZERO_CHECK(!labels_.empty(), "classifier backward: forward had no labels");
  const std::int64_t C = body_.n_embd, K = head_.num_labels;
  ZERO_CHECK(final_norm_data.dtype == param_dtype_ && score_data.dtype == param_dtype_,
             "classifier backward: the head was made for ", name_of(param_dtype_),
             " parameters, given ", name_of(final_norm_data.dtype), " ln_f and ",
             name_of(score_data.dtype), " score");
  // Gradients come in the engine's gradient dtype (fp32 accumulation at stages 0-1 of a bf16
  // run, 16-bit buffers otherwise): fp32 ones are accumulated into directly.
  const float* final_norm_params = as_fp32(final_norm_data, 2 * C, scratch("norm32"));
  const float* score_params = as_fp32(score_data, K * C, scratch("score32"));
  float* final_norm_grads = grads_fp32(final_norm_grad_data, 2 * C, scratch("dnorm32"));
  float* score_grads = grads_fp32(score_grad_data, K * C, scratch("dscore32"));
  const float scale =
      loss_scale >= 0.0f ? loss_scale : (counted_ > 0 ? 1.0f / static_cast<float>(counted_) : 0.0f);
  float* dlogits = view("dlogits");
  std::memcpy(dlogits, view("logits"), static_cast<std::size_t>(B_ * K) * sizeof(float));
  cpu::crossentropy_backward(dlogits, view("logsumexp"), labels_.data(), B_, K, K, scale);
  // dscore (K, C) += dlogitsᵀ · ln; dln (B, C) = dlogits · score
  cpu::gemm(true, false, K, C, B_, 1.0f, dlogits, K, view("ln"), C, 1.0f, score_grads, C);
  float* dln = view("dln");
  cpu::gemm(false, false, B_, C, K, 1.0f, dlogits, K, score_params, C, 0.0f, dln, C);
  float* drows = view("drows");
  std::memset(drows, 0, static_cast<std::size_t>(B_ * C) * sizeof(float));
  const FinalNormTensors<const float> norm(final_norm_params, body_);
  const FinalNormTensors<float> norm_grads(final_norm_grads, body_);
  cpu::layernorm_backward(drows, norm_grads.weight, norm_grads.bias, dln, view("rows"), norm.weight,
                          view("mean"), view("rstd"), B_, C);
  float* dhidden = body.final_hidden_grad();
  std::memset(dhidden, 0, static_cast<std::size_t>(B_ * T_ * C) * sizeof(float));
  for (std::int64_t b = 0; b < B_; ++b)
    std::memcpy(dhidden + (b * T_ + positions_[static_cast<std::size_t>(b)]) * C, drows + b * C,
                static_cast<std::size_t>(C) * sizeof(float));
  finish_grads(final_norm_grad_data, 2 * C, final_norm_grads);
  finish_grads(score_grad_data, K * C, score_grads);
}

}  // namespace zero::gpt2
