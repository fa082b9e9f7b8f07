// Sequence classification as Hugging Face's GPT2ForSequenceClassification,
// LlamaForSequenceClassification, MistralForSequenceClassification and
// Qwen2ForSequenceClassification: the body's last hidden state at each row's last non-padding
// token, through the final norm (the family's: ln_f's LayerNorm, norm's RMSNorm), times
// score.weight (K, C), no bias; the loss is Hugging Face's for the config's problem_type: the mean
// cross-entropy over the rows' label ids (single_label_classification), the mean squared error
// over the logits and float targets (regression: MSELoss), or the mean binary cross-entropy of
// the logits against multi-hot targets (multi_label_classification: BCEWithLogitsLoss). The
// head's parameters are one unit of their own ("score"), so an LM checkpoint's units keep their
// layout and the head never needs the embeddings (a tied LM head does).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "zero/core/allocator.h"
#include "zero/core/flat_buffer.h"
#include "zero/core/partition.h"
#include "zero/gpt2/checkpoint_hf.h"
#include "zero/gpt2/compute.h"
#include "zero/gpt2/config.h"
#include "zero/gpt2/model.h"

namespace zero::gpt2 {

// Hugging Face's config.problem_type: which loss the labels give.
enum class ProblemType : std::uint8_t { kSingleLabel, kMultiLabel, kRegression };
// "single_label_classification", "multi_label_classification", "regression" (config.json's).
std::string_view name_of(ProblemType type);
// The type config.json's value names; nullopt for another value.
std::optional<ProblemType> problem_type_named(std::string_view name);

// K = num_labels. Single-label: labels are ids in [0, K); a negative label is ignored (no loss, no
// gradient). Regression and multi-label: targets are K floats per row (a value per label, or 0/1);
// a row whose first target is NaN is ignored.
struct ClassifierConfig {
  std::int64_t num_labels = 2;  // K
  // Unset (config.json's null): chosen from the labels as transformers'
  // ...ForSequenceClassification chooses (resolved_problem_type).
  std::optional<ProblemType> problem_type;
  // Rows end at their last token != pad_token_id. kNoPadToken (config.json's null, Hugging
  // Face's None): every row ends at its last token, and only one row per batch can be classified.
  std::int64_t pad_token_id = 50256;
  std::vector<std::string> id2label;            // K names in id order (Hugging Face's id2label)
  void validate(const GPT2Config& body) const;  // throws zero::Error naming the bad field
};

inline constexpr std::int64_t kNoPadToken = -1;

// transformers' choice of loss: the config's problem_type when set, else regression when
// num_labels is 1, single-label classification for integer labels, multi-label for float ones.
ProblemType resolved_problem_type(const ClassifierConfig& head, bool integer_labels);

// The body a classifier runs: the decoder without an LM head (the ...ForSequenceClassification
// models have no lm_head), so its final unit is the final norm alone. That is `config` with
// tie_word_embeddings true, which a model without output embeddings ignores.
GPT2Config classifier_body(const GPT2Config& config);

// The head's unit: "score" holding score.weight (K, C) (the Hugging Face name).
std::vector<TensorSpec> score_tensors(const GPT2Config& body, const ClassifierConfig& head);
inline constexpr const char* kScoreUnitName = "score";
inline constexpr const char* kScoreTensorName = "score.weight";

// Hugging Face's initialisation of score.weight, N(0, initializer_range), as init_unit_range:
// element values depend only on (seed, "score.weight", element index), whatever the sharding.
void init_score_range(const GPT2Config& body, std::uint64_t seed, ElementRange range, float* out);

// Row b's position: the last t with tokens[b, t] != pad_token_id, else 0 (Hugging Face's argmax
// over (t × non-pad mask)); T - 1 for every row when pad_token_id is kNoPadToken. tokens are
// (B, T).
std::vector<std::int64_t> last_token_positions(std::span<const int> tokens, std::int64_t B,
                                               std::int64_t T, std::int64_t pad_token_id);

// One micro-batch's head: forward after the body's last forward_block, backward before its
// backward_block(L - 1). Keeps (B, C) rows of its own (one kActivations allocation); the
// body's (B, T, C) activations are read and its residual gradient written through
// GPT2Compute::final_hidden_input / final_hidden_grad.
class ClassifierHead {
 public:
  // body: classifier_body's. Throws zero::Error when batch_size > 1 and head has no pad token
  // (Hugging Face refuses that batch too). param_dtype: the dtype of the final unit's and score's
  // parameters it will be given (fp32, or bf16/fp16:
  // then they are widened to fp32 scratch of its own). Gradients may be fp32 or 16-bit; 16-bit
  // ones are accumulated in fp32 scratch and added with one rounding, as the body does.
  ClassifierHead(const GPT2Config& body, const ClassifierConfig& head, std::int64_t batch_size,
                 std::int64_t seq_len, Allocator& allocator, DType param_dtype = DType::kFloat32);

  // tokens (B, T) as given to the body's set_inputs; labels (B) in [0, K) or negative (ignored),
  // or empty for logits only. final_norm_params: the final unit (ln_f / norm, its vectors only:
  // classifier_body); score_params: the score unit; in
  // the constructor's param_dtype. Activations and arithmetic are fp32. Labels given, the problem
  // type resolves as transformers' does (resolved_problem_type); one that is not single-label
  // throws zero::Error naming it (regression and multi-label take float targets).
  void forward(const GPT2Compute& body, std::span<const int> tokens, std::span<const int> labels,
               ConstUnitData final_norm_params, ConstUnitData score_params);
  // Float targets (B, K): regression values or multi-hot labels (a row whose first target is NaN
  // is ignored); the loss is computed on the host from the logits in double (off the host, after
  // waiting for their copy). Throws zero::Error when the config's problem_type is single-label.
  void forward(const GPT2Compute& body, std::span<const int> tokens, std::span<const float> targets,
               ConstUnitData final_norm_params, ConstUnitData score_params);
  ProblemType problem_type() const { return problem_; }  // of the last forward with labels
  // Accumulates (+=) d(loss_scale × sum of row losses) into the final norm's and score's
  // gradients and
  // writes the body's final_hidden_grad (zero except at the rows' last tokens). loss_scale < 0
  // means 1 / counted rows (the gradient of loss()).
  void backward(GPT2Compute& body, ConstUnitData final_norm_params, ConstUnitData score_params,
                UnitData final_norm_grads, UnitData score_grads, float loss_scale = -1.0f);

  // Mean over counted rows (0 when none). Where the body's model does not run on the host,
  // loss(), logits() and predictions() wait for the copy of the outputs forward enqueued.
  float loss() const;
  std::int64_t num_counted() const { return counted_; }
  const float* logits() const;  // (B, K) host memory, valid after forward
  // argmax over K of each row's logits (the first maximum, as torch.argmax).
  std::vector<int> predictions() const;
  const std::vector<std::int64_t>& positions() const { return positions_; }

 private:
  void forward_logits(const GPT2Compute& body, std::span<const int> tokens,
                      ConstUnitData final_norm_data, ConstUnitData score_data);
  void float_loss();
  void upload_float_dlogits(const GPT2Compute& body, float* dlogits, float scale);
  float* view(const std::string& name) const;
  float* scratch(const std::string& name) const;
  const int* kernel_labels(const GPT2Compute& body);
  void copy_outputs(const GPT2Compute& body);
  void wait_for_outputs() const;
  GPT2Config body_;
  ClassifierConfig head_;
  std::int64_t B_, T_;
  DType param_dtype_;
  FlatLayout layout_;
  Buffer buffer_;
  std::vector<std::int64_t> positions_;
  std::vector<int> labels_;
  ProblemType problem_ = ProblemType::kSingleLabel;
  std::vector<float> targets_;             // (B, K): regression and multi-label
  std::vector<float> float_dlogits_;       // (B, K): d(row loss)/d(logits), unscaled
  Buffer pinned_dlogits_;                  // off the host: float_dlogits_ scaled, for their upload
  std::vector<std::int64_t> hidden_rows_;  // b·T + positions_[b]: the body's rows read
  Allocator* buffer_allocator_ = nullptr;
  bool on_host_ = true;  // the body's kernels run on the calling thread
  // Off the host only: the labels' upload, the outputs' pinned copy [logits (B, K) | losses (B)],
  // the event of that copy, and the event after which the host vectors may be rewritten.
  Buffer pinned_labels_, device_labels_, pinned_outputs_;
  mutable Event outputs_copied_;
  Event inputs_released_;
  mutable bool outputs_pending_ = false;
  mutable float loss_ = 0.0f;
  std::int64_t counted_ = 0;
};

// A sequence classifier's checkpoint folder: config.json (the body's keys plus architectures
// [the family's classifier_architecture, family.h], num_labels, id2label, label2id, pad_token_id,
// problem_type: null when unset) and model.safetensors (the body's Hugging Face names,
// "transformer." / "model.", plus "score.weight").
struct ClassifierCheckpoint {
  GPT2Config body;  // config.json's; the classifier runs classifier_body(body)
  ClassifierConfig head;
  bool has_score = false;  // false: an LM (or bare GPT2Model) checkpoint, the body only
};

// Reads config.json: the body's config, and the head's when it has id2label (else num_labels 2,
// labels "LABEL_0", ... as Hugging Face names them; pad_token_id from the file, kNoPadToken when
// it is null or absent). has_score: architectures names the family's classifier.
ClassifierCheckpoint load_classifier_config(const std::filesystem::path& folder);

// Loads the body's tensors into `body` (names with or without "transformer.", lm_head.weight and
// attention buffers skipped) and score.weight (K, C) into `score` when the file has it; returns
// whether it had. Single or sharded (model.safetensors.index.json) files. Missing body tensors,
// wrong shapes or unknown tensors throw zero::Error naming them.
bool load_classifier_weights(GPT2Model& body, std::span<float> score, std::int64_t num_labels,
                             const std::filesystem::path& folder);

// Writes config.json and model.safetensors (fp32) as above, creating the folder. The body is
// classifier_body's (a body with an LM head of its own throws zero::Error).
void save_classifier_checkpoint(const GPT2Model& body, const ClassifierConfig& head,
                                std::span<const float> score, const std::filesystem::path& folder);
// The same files, byte for byte, with the body's parameters from `source` one unit at a time
// (UnitSource in checkpoint_hf.h): memory for one unit and the writer's buffers. The weights in
// options.dtype (config.json's torch_dtype naming it), sharded as options says.
void save_classifier_checkpoint(const GPT2Config& body, const ClassifierConfig& head,
                                const UnitSource& source, std::span<const float> score,
                                const std::filesystem::path& folder, SaveOptions options = {});

}  // namespace zero::gpt2
