// The ...ForSequenceClassification head: last non-padding token → the final norm → score, its
// loss and backward, through the body's kernel seam (GPT2Compute::kernels(), kernels.h) on its
// compute stream; and GPT2Compute's two hooks another head uses.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "compute_internal.h"
#include "zero/core/error.h"
#include "zero/gpt2/classifier.h"
#include "zero/gpt2/rng.h"

namespace zero::gpt2 {

const float* GPT2Compute::final_hidden_input() const { return block_input(config_.n_layer); }
float* GPT2Compute::final_hidden_grad() { return workspace("dresidual"); }

void ClassifierConfig::validate(const GPT2Config& body) const {
  ZERO_CHECK(num_labels >= 1, "classifier: num_labels must be at least 1, got ", num_labels);
  ZERO_CHECK(id2label.empty() || static_cast<std::int64_t>(id2label.size()) == num_labels,
             "classifier: id2label has ", id2label.size(), " names for num_labels ", num_labels);
  ZERO_CHECK(pad_token_id == kNoPadToken || (pad_token_id >= 0 && pad_token_id < body.vocab_size),
             "classifier: pad_token_id ", pad_token_id, " is outside the vocabulary [0, ",
             body.vocab_size, ")");
}

std::string_view name_of(ProblemType type) {
  switch (type) {
    case ProblemType::kSingleLabel: return "single_label_classification";
    case ProblemType::kMultiLabel: return "multi_label_classification";
    case ProblemType::kRegression: return "regression";
  }
  return "?";
}

std::optional<ProblemType> problem_type_named(std::string_view name) {
  for (const ProblemType type :
       {ProblemType::kSingleLabel, ProblemType::kMultiLabel, ProblemType::kRegression})
    if (name == name_of(type)) return type;
  return std::nullopt;
}

ProblemType resolved_problem_type(const ClassifierConfig& head, bool integer_labels) {
  if (head.problem_type) return *head.problem_type;
  if (head.num_labels == 1) return ProblemType::kRegression;
  return integer_labels ? ProblemType::kSingleLabel : ProblemType::kMultiLabel;
}

GPT2Config classifier_body(const GPT2Config& config) {
  GPT2Config body = config;
  body.tie_word_embeddings = true;
  return body;
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
  if (pad_token_id == kNoPadToken)
    return std::vector<std::int64_t>(static_cast<std::size_t>(B), T - 1);
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
// norm_elements: the final norm's vectors (final_norm_elements).
std::vector<TensorSpec> head_specs(std::int64_t B, std::int64_t C, std::int64_t K,
                                   std::int64_t norm_elements, DType param_dtype) {
  std::vector<TensorSpec> specs = {
      {"rows", {B, C}},    {"ln", {B, C}},  {"mean", {B}},      {"rstd", {B}},   {"logits", {B, K}},
      {"dlogits", {B, K}}, {"losses", {B}}, {"logsumexp", {B}}, {"dln", {B, C}}, {"drows", {B, C}}};
  if (param_dtype != DType::kFloat32) {  // fp32 copies of the norm's and score's values and grads
    specs.push_back({"norm32", {norm_elements}});
    specs.push_back({"score32", {K, C}});
    specs.push_back({"dnorm32", {norm_elements}});
    specs.push_back({"dscore32", {K, C}});
  }
  return specs;
}

// `data` as fp32: itself when fp32, else its n elements widened into `scratch`.
const float* as_fp32(Kernels& kernels, Stream& stream, ConstUnitData data, std::int64_t n,
                     float* scratch) {
  if (data.dtype == DType::kFloat32) return static_cast<const float*>(data.data);
  kernels.widen(stream, scratch, data.data, data.dtype, n);
  return scratch;
}
// Where the head accumulates `grads`: the buffer itself when fp32, else zeroed fp32 scratch that
// finish_grads adds to it.
float* grads_fp32(Kernels& kernels, Stream& stream, UnitData grads, std::int64_t n,
                  float* scratch) {
  if (grads.dtype == DType::kFloat32) return static_cast<float*>(grads.data);
  kernels.zero(stream, scratch, n);
  return scratch;
}
void finish_grads(Kernels& kernels, Stream& stream, UnitData grads, std::int64_t n,
                  const float* scratch) {
  if (grads.dtype != DType::kFloat32)
    kernels.accumulate(stream, grads.data, grads.dtype, scratch, n);
}
}  // namespace

ClassifierHead::ClassifierHead(const GPT2Config& body, const ClassifierConfig& head,
                               std::int64_t batch_size, std::int64_t seq_len, Allocator& allocator,
                               DType param_dtype)
    : body_(body), head_(head), B_(batch_size), T_(seq_len), param_dtype_(param_dtype) {
  head_.validate(body_);
  ZERO_CHECK(B_ > 0 && T_ > 0, "classifier: batch size and sequence length must be positive");
  ZERO_CHECK(head_.pad_token_id != kNoPadToken || B_ == 1, "classifier: the config has no ",
             "pad_token_id, so a row's last real token cannot be found in a batch of ", B_,
             " rows (Hugging Face: cannot handle batch sizes > 1 if no padding token is defined);",
             " set pad_token_id in config.json or classify one row per batch");
  layout_ = FlatLayout(
      head_specs(B_, body_.n_embd, head_.num_labels, final_norm_elements(body_), param_dtype_), 1,
      16);
  buffer_ = allocator.allocate(layout_.padded_num_elements() * sizeof(float),
                               MemoryCategory::kActivations);
  buffer_allocator_ = &allocator;
}

float* ClassifierHead::view(const std::string& name) const {
  return buffer_.data_as<float>() + layout_.slot(name).offset_elements;
}
// Off the host, the logits and losses forward copied to pinned memory, once that copy has run.
void ClassifierHead::wait_for_outputs() const {
  if (!outputs_pending_) return;
  outputs_copied_.synchronize();
  const std::int64_t K = head_.num_labels;
  const float* losses = pinned_outputs_.data_as<const float>() + B_ * K;
  double sum = 0.0;
  for (std::int64_t b = 0; b < B_; ++b) sum += losses[b];
  loss_ = counted_ > 0 ? static_cast<float>(sum / static_cast<double>(counted_)) : 0.0f;
  outputs_pending_ = false;
}
float ClassifierHead::loss() const {
  wait_for_outputs();
  return loss_;
}
const float* ClassifierHead::logits() const {
  if (on_host_) return view("logits");
  wait_for_outputs();
  return pinned_outputs_.data_as<const float>();
}
// A 16-bit run's fp32 scratch (null, and unused, in fp32 runs).
float* ClassifierHead::scratch(const std::string& name) const {
  return param_dtype_ == DType::kFloat32 ? nullptr : view(name);
}

std::vector<int> ClassifierHead::predictions() const {
  const std::int64_t K = head_.num_labels;
  const float* rows = logits();
  std::vector<int> predicted(static_cast<std::size_t>(B_));
  for (std::int64_t b = 0; b < B_; ++b)
    predicted[static_cast<std::size_t>(b)] =
        static_cast<int>(std::max_element(rows + b * K, rows + (b + 1) * K) - (rows + b * K));
  return predicted;
}

void ClassifierHead::forward_logits(const GPT2Compute& body, std::span<const int> tokens,
                                    ConstUnitData final_norm_data, ConstUnitData score_data) {
  const std::int64_t C = body_.n_embd, K = head_.num_labels;
  ZERO_CHECK(body.batch_size() == B_ && body.seq_len() == T_,
             "classifier: the body runs B=", body.batch_size(), " T=", body.seq_len(),
             ", the head was made for B=", B_, " T=", T_);
  ZERO_CHECK(final_norm_data.dtype == param_dtype_ && score_data.dtype == param_dtype_,
             "classifier: the head was made for ", name_of(param_dtype_), " parameters, given ",
             name_of(final_norm_data.dtype), " final norm and ", name_of(score_data.dtype),
             " score");
  Kernels& k = body.kernels();
  Stream& s = body.stream();
  on_host_ = body.runs_on_host();
  // Off the host, the previous step's copies of positions_ and labels_ must have run.
  if (!on_host_) inputs_released_.synchronize();
  positions_ = last_token_positions(tokens, B_, T_, head_.pad_token_id);
  hidden_rows_.resize(positions_.size());
  for (std::int64_t b = 0; b < B_; ++b)
    hidden_rows_[static_cast<std::size_t>(b)] = b * T_ + positions_[static_cast<std::size_t>(b)];
  float* rows = view("rows");
  k.copy_rows(s, rows, body.final_hidden_input(), hidden_rows_.data(), B_, C, false);
  const Norm norm = final_unit_norm(
      body_, as_fp32(k, s, final_norm_data, final_norm_elements(body_), scratch("norm32")));
  const float* score_params = as_fp32(k, s, score_data, K * C, scratch("score32"));
  float* ln = view("ln");
  k.norm_forward(s, ln, {view("mean"), view("rstd")}, rows, norm, B_, C);
  // logits (B, K) = ln (B, C) · scoreᵀ, score (K, C)
  k.gemm(s, false, true, B_, K, C, ln, C, score_params, C, 0.0f, view("logits"), K);
  loss_ = 0.0f;
  outputs_pending_ = false;
  counted_ = 0;
}

void ClassifierHead::forward(const GPT2Compute& body, std::span<const int> tokens,
                             std::span<const int> labels, ConstUnitData final_norm_data,
                             ConstUnitData score_data) {
  const std::int64_t K = head_.num_labels;
  ZERO_CHECK(labels.empty() || static_cast<std::int64_t>(labels.size()) == B_,
             "classifier: ", labels.size(), " labels for B=", B_);
  for (std::size_t b = 0; b < labels.size(); ++b)
    ZERO_CHECK(labels[b] < K, "classifier: label ", labels[b], " of row ", b,
               " is outside [0, num_labels=", K, ")");
  problem_ = resolved_problem_type(head_, /*integer_labels=*/true);
  ZERO_CHECK(labels.empty() || problem_ == ProblemType::kSingleLabel, "classifier: problem_type ",
             name_of(problem_), " takes float targets, given integer labels",
             head_.num_labels == 1 ? " (num_labels 1 is regression)" : "");
  targets_.clear();
  labels_.assign(labels.begin(), labels.end());
  forward_logits(body, tokens, final_norm_data, score_data);
  Kernels& k = body.kernels();
  Stream& s = body.stream();
  if (!labels_.empty()) {
    float* losses = view("losses");
    k.smoothed_crossentropy_forward(s, losses, view("logsumexp"), view("logits"),
                                    kernel_labels(body), B_, K, K, body.label_smoothing());
    counted_ = std::count_if(labels_.begin(), labels_.end(),
                             [K](int label) { return label >= 0 && label < K; });
    if (on_host_) {
      double sum = 0.0;
      for (std::int64_t b = 0; b < B_; ++b) sum += losses[b];
      loss_ = counted_ > 0 ? static_cast<float>(sum / static_cast<double>(counted_)) : 0.0f;
    }
  }
  if (!on_host_) copy_outputs(body);
}

void ClassifierHead::forward(const GPT2Compute& body, std::span<const int> tokens,
                             std::span<const float> targets, ConstUnitData final_norm_data,
                             ConstUnitData score_data) {
  const std::int64_t K = head_.num_labels;
  ZERO_CHECK(static_cast<std::int64_t>(targets.size()) == B_ * K, "classifier: ", targets.size(),
             " targets for B=", B_, " rows of num_labels=", K);
  problem_ = resolved_problem_type(head_, /*integer_labels=*/false);
  ZERO_CHECK(problem_ != ProblemType::kSingleLabel, "classifier: problem_type ", name_of(problem_),
             " takes integer label ids, given float targets");
  labels_.clear();
  targets_.assign(targets.begin(), targets.end());
  forward_logits(body, tokens, final_norm_data, score_data);
  if (!on_host_) {
    copy_outputs(body);
    outputs_copied_.synchronize();
    outputs_pending_ = false;
  }
  float_loss();
}

// Hugging Face's MSELoss or BCEWithLogitsLoss (mean over the counted rows' B·K elements), in
// double on the host: loss_, counted_ and each logit's gradient of its row's mean.
void ClassifierHead::float_loss() {
  const std::int64_t K = head_.num_labels;
  const float* logits = on_host_ ? view("logits") : pinned_outputs_.data_as<const float>();
  float_dlogits_.assign(static_cast<std::size_t>(B_ * K), 0.0f);
  double sum = 0.0;
  counted_ = 0;
  for (std::int64_t b = 0; b < B_; ++b) {
    const std::size_t row = static_cast<std::size_t>(b * K);
    if (std::isnan(targets_[row])) continue;
    ++counted_;
    for (std::int64_t j = 0; j < K; ++j) {
      const double z = logits[row + static_cast<std::size_t>(j)];
      const double y = targets_[row + static_cast<std::size_t>(j)];
      double loss = 0.0, gradient = 0.0;
      if (problem_ == ProblemType::kRegression) {
        loss = (z - y) * (z - y);
        gradient = 2.0 * (z - y);
      } else {  // max(z, 0) - z·y + log(1 + exp(-|z|)), torch's stable form
        loss = std::max(z, 0.0) - z * y + std::log1p(std::exp(-std::abs(z)));
        gradient = 1.0 / (1.0 + std::exp(-z)) - y;
      }
      sum += loss / static_cast<double>(K);
      float_dlogits_[row + static_cast<std::size_t>(j)] =
          static_cast<float>(gradient / static_cast<double>(K));
    }
  }
  loss_ = counted_ > 0 ? static_cast<float>(sum / static_cast<double>(counted_)) : 0.0f;
}

// float_loss's gradients × scale into dlogits: written on the host, else through pinned memory
// (forward waited for the previous step's uploads: inputs_released_).
void ClassifierHead::upload_float_dlogits(const GPT2Compute& body, float* dlogits, float scale) {
  const std::size_t count = float_dlogits_.size();
  float* out = dlogits;
  if (!on_host_) {
    if (!pinned_dlogits_.allocated())
      pinned_dlogits_ = body.context()
                            .allocator(MemorySpace::kHostPinned)
                            .allocate(count * sizeof(float), MemoryCategory::kActivations);
    out = pinned_dlogits_.data_as<float>();
  }
  for (std::size_t i = 0; i < count; ++i) out[i] = float_dlogits_[i] * scale;
  if (!on_host_) body.context().copy(body.stream(), out, dlogits, count * sizeof(float));
}

// The labels as the kernels read them: labels_ on the host, else uploaded through pinned memory.
const int* ClassifierHead::kernel_labels(const GPT2Compute& body) {
  if (on_host_) return labels_.data();
  const std::size_t bytes = static_cast<std::size_t>(B_) * sizeof(int);
  if (!device_labels_.allocated()) {
    pinned_labels_ = body.context()
                         .allocator(MemorySpace::kHostPinned)
                         .allocate(bytes, MemoryCategory::kActivations);
    device_labels_ = buffer_allocator_->allocate(bytes, MemoryCategory::kActivations);
  }
  std::copy(labels_.begin(), labels_.end(), pinned_labels_.data_as<int>());
  body.context().copy(body.stream(), pinned_labels_.data(), device_labels_.data(), bytes);
  return device_labels_.data_as<const int>();
}

// Off the host: the logits (and losses) copied to pinned memory, read by loss(), logits() and
// predictions() once the copy has run.
void ClassifierHead::copy_outputs(const GPT2Compute& body) {
  const std::int64_t K = head_.num_labels;
  if (!pinned_outputs_.allocated())
    pinned_outputs_ = body.context()
                          .allocator(MemorySpace::kHostPinned)
                          .allocate(static_cast<std::size_t>(B_ * (K + 1)) * sizeof(float),
                                    MemoryCategory::kActivations);
  float* outputs = pinned_outputs_.data_as<float>();
  body.context().copy(body.stream(), view("logits"), outputs,
                      static_cast<std::size_t>(B_ * K) * sizeof(float));
  if (!labels_.empty())
    body.context().copy(body.stream(), view("losses"), outputs + B_ * K,
                        static_cast<std::size_t>(B_) * sizeof(float));
  outputs_copied_ = body.stream().record();
  outputs_pending_ = true;
  inputs_released_ = outputs_copied_;
}

void ClassifierHead::backward(GPT2Compute& body, ConstUnitData final_norm_data,
                              ConstUnitData score_data, UnitData final_norm_grad_data,
                              UnitData score_grad_data, float loss_scale) {
  ZERO_CHECK(!labels_.empty() || !targets_.empty(), "classifier backward: forward had no labels");
  const std::int64_t C = body_.n_embd, K = head_.num_labels;
  ZERO_CHECK(final_norm_data.dtype == param_dtype_ && score_data.dtype == param_dtype_,
             "classifier backward: the head was made for ", name_of(param_dtype_),
             " parameters, given ", name_of(final_norm_data.dtype), " final norm and ",
             name_of(score_data.dtype), " score");
  Kernels& k = body.kernels();
  Stream& s = body.stream();
  // Gradients come in the engine's gradient dtype (fp32 accumulation at stages 0-1 of a bf16
  // run, 16-bit buffers otherwise): fp32 ones are accumulated into directly.
  const std::int64_t norm_elements = final_norm_elements(body_);
  const Norm norm =
      final_unit_norm(body_, as_fp32(k, s, final_norm_data, norm_elements, scratch("norm32")));
  const float* score_params = as_fp32(k, s, score_data, K * C, scratch("score32"));
  float* final_norm_grads =
      grads_fp32(k, s, final_norm_grad_data, norm_elements, scratch("dnorm32"));
  float* score_grads = grads_fp32(k, s, score_grad_data, K * C, scratch("dscore32"));
  const float scale =
      loss_scale >= 0.0f ? loss_scale : (counted_ > 0 ? 1.0f / static_cast<float>(counted_) : 0.0f);
  float* dlogits = view("dlogits");
  if (targets_.empty()) {
    k.copy(s, dlogits, view("logits"), B_ * K);
    // The labels forward uploaded (off the host) are still on the device.
    const int* labels = on_host_ ? labels_.data() : device_labels_.data_as<const int>();
    k.smoothed_crossentropy_backward(s, dlogits, view("logsumexp"), labels, B_, K, K, scale,
                                     body.label_smoothing());
  } else {
    upload_float_dlogits(body, dlogits, scale);
  }
  // dscore (K, C) += dlogitsᵀ · ln; dln (B, C) = dlogits · score
  k.gemm(s, true, false, K, C, B_, dlogits, K, view("ln"), C, 1.0f, score_grads, C);
  float* dln = view("dln");
  k.gemm(s, false, false, B_, C, K, dlogits, K, score_params, C, 0.0f, dln, C);
  float* drows = view("drows");
  k.zero(s, drows, B_ * C);
  // The norm's gradients lead like its vectors: the weight's, then a layer norm's bias's.
  float* norm_bias_grads = norm.bias != nullptr ? final_norm_grads + C : nullptr;
  k.norm_backward(s, drows, final_norm_grads, norm_bias_grads, dln, view("rows"), norm,
                  view("mean"), view("rstd"), B_, C);
  float* dhidden = body.final_hidden_grad();
  k.zero(s, dhidden, B_ * T_ * C);
  k.copy_rows(s, dhidden, drows, hidden_rows_.data(), B_, C, /*scatter=*/true);
  finish_grads(k, s, final_norm_grad_data, norm_elements, final_norm_grads);
  finish_grads(k, s, score_grad_data, K * C, score_grads);
  if (!on_host_) inputs_released_ = s.record();
}

}  // namespace zero::gpt2
