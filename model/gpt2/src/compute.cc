// GPT2Compute: activation layout (one allocation, named views), inputs and loss (compute_passes.cc
// has the forward and backward passes).
#include "zero/gpt2/compute.h"

#include <algorithm>
#include <cstring>

#include "compute_internal.h"
#include "zero/core/error.h"
#include "zero/gpt2/family.h"
#include "zero/gpt2/units.h"

namespace zero::gpt2 {
namespace {

constexpr const char* kRecomputePrefix = "recompute.";
constexpr std::int64_t kInternalsAlignment = 16;  // elements: 64 bytes, an AVX-512 vector

// The block activation names, in layout order, with their row widths (elements per (b, t)) and
// dtypes: fp32, or 16-bit for those only GEMMs read (gemm_input_dtype) and the attention's input
// and output (attention_io_dtype). GPT-2: LayerNorm (output, mean, rstd), q/k/v of 3C, GELU's
// input and output (H each). The Llama family (family.h): RMSNorm (output, rstd), q/k/v of
// (NH + 2·KVH)·HS with
// RoPE applied in place on q and k (its backward rotates the gradients back: nothing more kept),
// the attention's output NH·HS, SwiGLU's gate and up (2H, fp32) and their product (H, the down
// projection's GEMM input).
struct BlockTensorShape {
  const char* name;
  std::int64_t per_row;
  DType dtype = DType::kFloat32;
};
std::vector<BlockTensorShape> block_internal_shapes(const GPT2Config& config, std::int64_t B,
                                                    std::int64_t T, const ComputeOptions& options) {
  const std::int64_t C = config.n_embd, H = config.hidden_size(), NH = config.n_head;
  const BlockWidths widths = block_widths(config);
  const std::int64_t att = attention_layout(options.device, B, T, widths.q, NH).saved_per_row;
  const DType gemm = gemm_input_dtype(options.device, options.param_dtype);
  const DType io =
      attention_io_dtype(options.device, options.param_dtype, widths.q, NH, config.attn_pdrop);
  if (config.family == ModelFamily::kGpt2)
    return {{"ln_1", C, gemm}, {"ln_1.mean", 1}, {"ln_1.rstd", 1}, {"qkv", 3 * C, io},
            {"att", att},      {"atty", C, io},  {"residual2", C}, {"ln_2", C, gemm},
            {"ln_2.mean", 1},  {"ln_2.rstd", 1}, {"fch", H},       {"mlp_act", H, gemm}};
  return {{"ln_1", C, gemm},       {"ln_1.rstd", 1},
          {"qkv", widths.qkv, io}, {"att", att},
          {"atty", widths.q, io},  {"residual2", C},
          {"ln_2", C, gemm},       {"ln_2.rstd", 1},
          {"fch", widths.mlp_in},  {"mlp_act", widths.mlp_hidden, gemm}};
}

// A tensor of rows × per_row elements, as floats of the layout: 16-bit elements (a GEMM input in
// gemm_input_dtype, or 16-bit logits) take half as many, rounded up.
TensorSpec rows_spec(std::string name, std::int64_t rows, std::int64_t per_row, DType dtype) {
  if (size_of(dtype) == sizeof(float)) return {std::move(name), {rows, per_row}};
  return {std::move(name), {(rows * per_row + 1) / 2}};
}

// Activation tensors: "encoded", per block "h.l.<name>" (none for the first k recomputed blocks;
// one shared "recompute.<name>" set when all L are) and "h.l.residual3", then the head's "ln_f*",
// "logits", "losses", "logsumexp".
std::vector<TensorSpec> activation_specs(const GPT2Config& config, std::int64_t B, std::int64_t T,
                                         const ComputeOptions& options) {
  const int recomputed = recomputed_blocks(config, options);
  const std::int64_t N = B * T, C = config.n_embd;
  const DType gemm_input = gemm_input_dtype(options.device, options.param_dtype);
  std::vector<TensorSpec> specs;
  specs.push_back({"encoded", {N, C}});
  // Every set of block internals starts at a multiple of kInternalsAlignment elements, so that a
  // block computing into another block's set (or the shared one) sees its tensors at the same
  // alignment: the CPU kernels' vector loops round by it (a loop peeled to an aligned address
  // sums in another order), and recomputing must give the kept run's numbers bit for bit.
  std::int64_t offset = N * C;
  auto block_specs = [&](const std::string& prefix) {
    const std::int64_t pad =
        (kInternalsAlignment - offset % kInternalsAlignment) % kInternalsAlignment;
    if (pad > 0) specs.push_back({prefix + "align", {pad}});
    offset += pad;
    for (const auto& shape : block_internal_shapes(config, B, T, options)) {
      specs.push_back(rows_spec(prefix + shape.name, N, shape.per_row, shape.dtype));
      offset += static_cast<std::int64_t>(specs.back().num_elements());
    }
  };
  for (int layer = 0; layer < config.n_layer; ++layer) {
    const std::string prefix = "h." + std::to_string(layer) + ".";
    if (layer >= recomputed) block_specs(prefix);
    offset += N * C;
    specs.push_back({prefix + "residual3", {N, C}});
  }
  if (recomputed == config.n_layer) block_specs(kRecomputePrefix);
  specs.push_back(rows_spec("ln_f", N, C, gemm_input));
  if (family_spec(config.family).norm == NormKind::kLayerNorm) specs.push_back({"ln_f.mean", {N}});
  specs.push_back({"ln_f.rstd", {N}});
  specs.push_back(rows_spec("logits", N, config.padded_vocab_size(),
                            logits_dtype(options.device, options.param_dtype)));
  specs.push_back({"losses", {N}});
  specs.push_back({"logsumexp", {N}});
  return specs;
}

// Rows of wte whose gradient one staged GEMM computes when gradients are 16-bit.
constexpr std::int64_t kHeadGradRows = 2048;

// GPT-2's scratch; the Llama family's with its widths (q/k/v, the attention's output, SwiGLU's
// 2H gradient of gate and up and the H gradient of its output), RoPE's cos/sin table (T × HS) and,
// with grouped-query attention, the NH heads the attention runs on and their gradient (3·NH·HS
// each: kernels.h repeat_kv_*).
std::vector<TensorSpec> workspace_specs(const GPT2Config& config, std::int64_t B, std::int64_t T,
                                        const ComputeOptions& options) {
  const std::int64_t N = B * T, C = config.n_embd, H = config.hidden_size();
  const BlockWidths widths = block_widths(config);
  std::vector<TensorSpec> specs = {
      {"proj", {N, C}},
      {"dresidual", {N, C}},
      {"dproj", {N, C}},
      {"dhidden", {N, widths.mlp_in}},
      {"dln", {N, C}},
      {"datty", {N, widths.q}},
      {"dqkv", {N, widths.qkv}},
      {"datt", {attention_layout(options.device, B, T, widths.q, config.n_head).scratch}}};
  const FamilySpec& family = family_spec(config.family);
  if (family.mlp == MlpKind::kSwiGlu) specs.push_back({"dswiglu", {N, widths.mlp_hidden}});
  if (family.positions == PositionKind::kRope) specs.push_back({"rope", {T, config.head_size()}});
  if (config.kv_heads() != config.n_head) {
    const std::int64_t heads = 3 * widths.q;
    specs.push_back(rows_spec("qkv_heads", N, heads,
                              attention_io_dtype(options.device, options.param_dtype, widths.q,
                                                 config.n_head, config.attn_pdrop)));
    specs.push_back({"dqkv_heads", {N, heads}});
  }
  // The attention's own workspace (kernels.h attention_layout: cuDNN's on CUDA with bf16, the CPU
  // kernels' per-thread blocks of scores).
  const std::int64_t library =
      attention_layout(options.device, B, T, widths.q, config.n_head, options.param_dtype)
          .library_workspace_bytes;
  if (library > 0) specs.push_back({"attention_library", {(library + 3) / 4}});
  if (options.param_dtype == DType::kFloat32) return specs;
  // 16-bit storage: bf16 copies of GEMM activations (two bf16 per fp32 element of the spec; at
  // least 4·N·C each, what 16-bit attention stages: GemmScratch), the unit's vectors (and the
  // batch's wte rows and wpe) widened to fp32, and fp32 gradients staged before they are added to
  // 16-bit ones.
  const std::int64_t Vp = config.padded_vocab_size();
  const std::int64_t attention = 4 * std::max(C, widths.q);  // 16-bit attention's staging
  const std::int64_t widest = std::max({Vp, widths.mlp_in, 3 * widths.q, widths.qkv, attention});
  const std::int64_t vectors = std::max(block_vector_elements(config), (N + T) * C);
  const std::int64_t staged =
      std::max({C * widths.mlp_in, C * widths.qkv, kHeadGradRows * C, (N + T) * C});
  specs.push_back({"act16_a", {(N * widest + 1) / 2}});
  specs.push_back({"act16_b", {(N * std::max({H, widths.mlp_in, attention}) + 1) / 2}});
  specs.push_back({"param32", {vectors}});
  specs.push_back({"gradvec32", {block_vector_elements(config)}});
  specs.push_back({"grad32", {staged}});
  return specs;
}

}  // namespace

int recomputed_blocks(const GPT2Config& config, const ComputeOptions& options) {
  ZERO_CHECK(options.recompute_blocks >= 0 && options.recompute_blocks <= config.n_layer,
             "GPT-2 compute: recompute_blocks ", options.recompute_blocks, " is not in [0, ",
             config.n_layer, "] (the model's blocks)");
  return options.activation_checkpointing ? static_cast<int>(config.n_layer)
                                          : options.recompute_blocks;
}

std::size_t ActivationPlan::total_bytes() const {
  std::size_t total = recompute_bytes + workspace_bytes;
  for (std::size_t bytes : kept_bytes) total += bytes;
  return total;
}

ActivationPlan GPT2Compute::plan(const GPT2Config& config, std::int64_t batch_size,
                                 std::int64_t seq_len, ComputeOptions options) {
  ActivationPlan plan;
  plan.kept_bytes.assign(static_cast<std::size_t>(config.n_layer) + 2, 0);
  plan.recomputed_blocks = recomputed_blocks(config, options);
  for (const TensorSpec& spec : activation_specs(config, batch_size, seq_len, options)) {
    const std::size_t bytes = spec.num_elements() * sizeof(float);
    if (spec.name == "encoded")
      plan.kept_bytes[embeddings_unit()] += bytes;
    else if (spec.name.starts_with(kRecomputePrefix))
      plan.recompute_bytes += bytes;
    else if (spec.name.starts_with("h."))
      plan.kept_bytes[block_unit(std::stoi(spec.name.substr(2)))] += bytes;
    else
      plan.kept_bytes[final_norm_unit(config)] += bytes;
  }
  for (const TensorSpec& spec : workspace_specs(config, batch_size, seq_len, options))
    plan.workspace_bytes += spec.num_elements() * sizeof(float);
  return plan;
}

GPT2Compute::GPT2Compute(const GPT2Config& config, std::int64_t batch_size, std::int64_t seq_len,
                         DeviceContext& context, ComputeOptions options)
    : GPT2Compute(config, batch_size, seq_len, context, context.allocator(MemorySpace::kDevice),
                  options) {}

GPT2Compute::GPT2Compute(const GPT2Config& config, std::int64_t batch_size, std::int64_t seq_len,
                         DeviceContext& context, Allocator& allocator, ComputeOptions options)
    : config_(config),
      B_(batch_size),
      T_(seq_len),
      options_(options),
      context_(context),
      kernels_(make_kernels(context)),
      planning_(allocator.planning() || context.planning()),
      on_host_(context.model_runs_on_host() || planning_) {
  config_.validate();
  ZERO_CHECK(B_ > 0 && T_ > 0,
             "GPT-2 compute: batch size and sequence length must be positive, got B=", B_,
             " T=", T_);
  ZERO_CHECK(T_ <= config_.n_positions, "GPT-2 compute: sequence length ", T_,
             " exceeds n_positions ", config_.n_positions);
  ZERO_CHECK(options_.label_smoothing >= 0.0f && options_.label_smoothing < 1.0f,
             "GPT-2 compute: label smoothing must be in [0, 1), got ", options_.label_smoothing);
  ZERO_CHECK(options_.label_smoothing == 0.0f || kernels_->supports_label_smoothing(),
             "GPT-2 compute: label smoothing ", options_.label_smoothing,
             " (--label_smoothing_factor): the ", kernels_->backend(),
             " kernels this model runs on (", context.device().to_string(),
             ") do not implement it");
  ZERO_CHECK(on_host_ || allocator.space() == MemorySpace::kDevice,
             "GPT-2 compute: activations must be device memory on a ", context.backend(),
             " context, given an allocator of ", name_of(allocator.space()));
  if (!planning_) options_.device = context.device().kind;  // whose kernels run (make_kernels)
  activation_layout_ = FlatLayout(activation_specs(config_, B_, T_, options_), 1, 16);
  workspace_layout_ = FlatLayout(workspace_specs(config_, B_, T_, options_), 1, 16);
  activation_buffer_ = allocator.allocate(activation_layout_.padded_num_elements() * sizeof(float),
                                          MemoryCategory::kActivations);
  workspace_buffer_ = allocator.allocate(workspace_layout_.padded_num_elements() * sizeof(float),
                                         MemoryCategory::kWorkspace);
  if (!on_host_) {  // the inputs' upload and the losses' read-back, through pinned memory
    const std::size_t input_bytes = 3 * static_cast<std::size_t>(B_ * T_) * sizeof(int);
    Allocator& pinned = context.allocator(MemorySpace::kHostPinned);
    pinned_inputs_ = pinned.allocate(input_bytes, MemoryCategory::kActivations);
    device_inputs_ = allocator.allocate(input_bytes, MemoryCategory::kActivations);
    pinned_losses_ = pinned.allocate(static_cast<std::size_t>(B_ * T_) * sizeof(float),
                                     MemoryCategory::kActivations);
  }
  block_layout_ = std::make_shared<const BlockLayout>(block_layout(config_));
  const bool layer_norm = family_spec(config_.family).norm == NormKind::kLayerNorm;
  const int recomputed = recomputed_blocks(config_, options_);
  for (int layer = 0; layer < config_.n_layer; ++layer) {
    // A recomputed block computes into the shared set, or (some blocks kept) into the last
    // block's internals, which its backward has finished with by then (ComputeOptions).
    const int internals = layer < recomputed ? static_cast<int>(config_.n_layer) - 1 : layer;
    const std::string prefix = recomputed == config_.n_layer
                                   ? std::string(kRecomputePrefix)
                                   : "h." + std::to_string(internals) + ".";
    auto get = [&](const char* name) { return activation(prefix + name); };
    auto mean = [&](const char* name) { return layer_norm ? get(name) : nullptr; };
    auto gemm_input = [&](const char* name) { return gemm_input_activation(prefix + name); };
    auto attention_io = [&](const char* name) { return attention_activation(prefix + name); };
    blocks_.push_back({gemm_input("ln_1"), mean("ln_1.mean"), get("ln_1.rstd"), attention_io("qkv"),
                       get("att"), attention_io("atty"), get("residual2"), gemm_input("ln_2"),
                       mean("ln_2.mean"), get("ln_2.rstd"), get("fch"), gemm_input("mlp_act"),
                       activation("h." + std::to_string(layer) + ".residual3")});
  }
  // RoPE's cos/sin table, once for the shape (kept in its workspace slot).
  if (!planning_ && family_spec(config_.family).positions == PositionKind::kRope)
    kernels_->rope_table(stream(), workspace("rope"), rope_parameters(), T_);
}

RopeParameters GPT2Compute::rope_parameters() const {
  return {config_.head_size(), config_.rope_theta, config_.rope_scaling};
}

RopeLayout GPT2Compute::rope_layout() const {
  const BlockWidths widths = block_widths(config_);
  return {B_, T_, config_.n_head + config_.kv_heads(), config_.head_size(), widths.qkv, 0};
}

// The buffers go back to their allocators only once the stream has run what reads them.
GPT2Compute::~GPT2Compute() {
  if (on_host_) return;
  try {
    stream().synchronize();
  } catch (...) {  // a failed stream: its error was the step's to report
  }
}

float* GPT2Compute::activation(const std::string& name) const {
  if (planning_) return nullptr;  // planned buffers have no memory
  return activation_buffer_.data_as<float>() + activation_layout_.slot(name).offset_elements;
}
float* GPT2Compute::activation_or_null(const std::string& name) const {
  for (const TensorSlot& slot : activation_layout_.slots())
    if (slot.name == name) return activation(name);
  return nullptr;
}
ActivationOut GPT2Compute::gemm_input_activation(const std::string& name) const {
  return {activation(name), gemm_input_dtype()};
}
DType GPT2Compute::gemm_input_dtype() const {
  return gpt2::gemm_input_dtype(options_.device, options_.param_dtype);
}
ActivationOut GPT2Compute::attention_activation(const std::string& name) const {
  return {activation(name),
          attention_io_dtype(options_.device, options_.param_dtype, block_widths(config_).q,
                             config_.n_head, config_.attn_pdrop)};
}
float* GPT2Compute::workspace(const std::string& name) const {
  if (planning_) return nullptr;
  return workspace_buffer_.data_as<float>() + workspace_layout_.slot(name).offset_elements;
}
float* GPT2Compute::workspace_or_null(const std::string& name) const {
  return options_.param_dtype == DType::kFloat32 ? nullptr : workspace(name);
}
const float* GPT2Compute::logits() const {
  ZERO_CHECK(logits_dtype() == DType::kFloat32, "GPT-2 compute: logits() are fp32, but this ",
             kernels_->backend(), " compute keeps its logits in ", name_of(logits_dtype()),
             " (read logits_data())");
  return activation("logits");
}
const void* GPT2Compute::logits_data() const { return activation("logits"); }
DType GPT2Compute::logits_dtype() const {
  return gpt2::logits_dtype(options_.device, options_.param_dtype);
}
const float* GPT2Compute::losses() const { return activation("losses"); }

const float* GPT2Compute::block_input(int layer) const {
  return layer == 0 ? activation("encoded") : blocks_[layer - 1].residual3;
}

DropoutSite GPT2Compute::dropout_site(std::uint32_t site, double probability) const {
  DropoutSite result;
  result.probability = dropout_.training ? static_cast<float>(probability) : 0.0f;
  result.key = derive_key(derive_key(derive_key(dropout_.seed, dropout_.step), site), 0x5eed);
  result.sample_offset = dropout_.sample_offset;
  return result;
}

void GPT2Compute::set_inputs(std::span<const int> tokens, std::span<const int> targets,
                             DropoutKey dropout) {
  const std::size_t count = static_cast<std::size_t>(B_ * T_);
  ZERO_CHECK(tokens.size() == count, "GPT-2 inputs: ", tokens.size(), " tokens for B=", B_,
             " T=", T_);
  ZERO_CHECK(targets.empty() || targets.size() == count, "GPT-2 inputs: ", targets.size(),
             " targets for B=", B_, " T=", T_);
  if (planning_) {  // the tokens are never read in a plan
    dropout_ = dropout;
    loss_ = 0.0f;
    counted_ = 0;
    return;
  }
  for (std::size_t i = 0; i < count; ++i)
    ZERO_CHECK(tokens[i] >= 0 && tokens[i] < config_.vocab_size, "GPT-2 inputs: token ", tokens[i],
               " at index ", i, " is outside the vocabulary [0, ", config_.vocab_size, ")");
  for (std::size_t i = 0; i < targets.size(); ++i)
    ZERO_CHECK(targets[i] < config_.vocab_size, "GPT-2 inputs: target ", targets[i], " at index ",
               i, " is outside the vocabulary [0, ", config_.vocab_size, ")");
  // Off the host, the previous step's kernels may still read the host vectors and the upload
  // buffer (CpuKernels submitted to a stream): the event of their last reader is awaited.
  if (!on_host_) inputs_released_.synchronize();
  tokens_.assign(tokens.begin(), tokens.end());
  targets_.assign(targets.begin(), targets.end());
  targets_in_range_ = std::count_if(targets_.begin(), targets_.end(), [&](int target) {
    return target >= 0 && target < config_.vocab_size;
  });
  unique_tokens_ = tokens_;
  std::sort(unique_tokens_.begin(), unique_tokens_.end());
  unique_tokens_.erase(std::unique(unique_tokens_.begin(), unique_tokens_.end()),
                       unique_tokens_.end());
  token_slots_.resize(tokens_.size());
  for (std::size_t i = 0; i < tokens_.size(); ++i)
    token_slots_[i] = static_cast<int>(
        std::lower_bound(unique_tokens_.begin(), unique_tokens_.end(), tokens_[i]) -
        unique_tokens_.begin());
  dropout_ = dropout;
  loss_ = 0.0f;
  loss_pending_ = false;
  counted_ = 0;
  if (!on_host_) upload_inputs();
}

void GPT2Compute::upload_inputs() {
  const std::size_t N = static_cast<std::size_t>(B_ * T_);
  int* staged = pinned_inputs_.data_as<int>();
  std::copy(tokens_.begin(), tokens_.end(), staged);
  std::fill(staged + N, staged + 2 * N, -1);
  std::copy(targets_.begin(), targets_.end(), staged + N);
  std::copy(token_slots_.begin(), token_slots_.end(), staged + 2 * N);
  context_.copy(stream(), staged, device_inputs_.data(), 3 * N * sizeof(int));
}

const int* GPT2Compute::kernel_tokens() const {
  return on_host_ ? tokens_.data() : device_inputs_.data_as<const int>();
}
const int* GPT2Compute::kernel_targets() const {
  return on_host_ ? targets_.data() : device_inputs_.data_as<const int>() + B_ * T_;
}
const int* GPT2Compute::kernel_slots() const {
  return on_host_ ? token_slots_.data() : device_inputs_.data_as<const int>() + 2 * B_ * T_;
}

namespace {
// The mean of the per-row losses over the counted rows, summed in double in row order.
float mean_loss(const float* losses, std::int64_t rows, std::int64_t counted) {
  double sum = 0.0;
  for (std::int64_t row = 0; row < rows; ++row) sum += losses[row];
  return counted > 0 ? static_cast<float>(sum / static_cast<double>(counted)) : 0.0f;
}
}  // namespace

// The head's loss: summed now on the host, or once the losses' copy to pinned memory has run.
void GPT2Compute::finish_loss(const float* losses) {
  if (!on_host_) {
    context_.copy(stream(), losses, pinned_losses_.data(),
                  static_cast<std::size_t>(B_ * T_) * sizeof(float));
    losses_copied_ = stream().record();
    loss_pending_ = true;
    return;
  }
  loss_ = mean_loss(losses, B_ * T_, counted_);
}

float GPT2Compute::loss() const {
  if (loss_pending_) {
    losses_copied_.synchronize();
    loss_ = mean_loss(pinned_losses_.data_as<const float>(), B_ * T_, counted_);
    loss_pending_ = false;
  }
  return loss_;
}

void GPT2Compute::check_params(const ConstUnitData& params, const char* what) const {
  ZERO_CHECK(params.data != nullptr, "GPT-2 ", what, ": null parameters");
  ZERO_CHECK(params.dtype == options_.param_dtype, "GPT-2 ", what, ": parameters are ",
             name_of(params.dtype), " but this GPT2Compute was built for ",
             name_of(options_.param_dtype), " (ComputeOptions::param_dtype)");
}

void GPT2Compute::check_grads(const UnitData& grads, const char* what) const {
  ZERO_CHECK(grads.data != nullptr, "GPT-2 ", what, ": null gradients");
  ZERO_CHECK(grads.dtype == DType::kFloat32 || grads.dtype == options_.param_dtype, "GPT-2 ", what,
             ": gradients are ", name_of(grads.dtype), "; expected fp32 or the parameters' ",
             name_of(options_.param_dtype));
}

GemmScratch GPT2Compute::gemm_scratch() const {
  GemmScratch scratch;
  if (options_.param_dtype != DType::kFloat32)
    scratch = {workspace("act16_a"),
               workspace("act16_b"),
               workspace("grad32"),
               static_cast<std::int64_t>(workspace_layout_.slot("grad32").num_elements),
               2 * static_cast<std::int64_t>(workspace_layout_.slot("act16_a").num_elements),
               2 * static_cast<std::int64_t>(workspace_layout_.slot("act16_b").num_elements)};
  for (const TensorSlot& slot : workspace_layout_.slots())
    if (slot.name == "attention_library") {
      scratch.library_workspace = workspace("attention_library");
      scratch.library_workspace_bytes = static_cast<std::int64_t>(4 * slot.num_elements);
    }
  return scratch;
}

}  // namespace zero::gpt2
