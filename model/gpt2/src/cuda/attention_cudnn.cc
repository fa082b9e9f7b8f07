// cuDNN's fused causal SDPA for the model's attention (attention_cudnn.h), through the
// cudnn_frontend graph API: one forward and one backward graph per shape, validated, planned by
// heuristics mode A, checked for support and built once, then executed on the caller's stream with
// the model's buffers bound by uid. Without the frontend headers (configure did not find them) the
// class exists and throws, and cudnn_attention_built() says so. cuDNN is dlopen'ed
// (libcudnn.so.<major>) at the first attention, not linked, as cuBLASLt is (gemm_cublaslt.cc): CPU
// runs and dry runs never map its libraries, and the frontend's shim (built with
// NV_CUDNN_FRONTEND_USE_DYNAMIC_LOADING) finds every cuDNN, CUDA runtime and NVRTC symbol at run
// time.
#include "attention_cudnn.h"

#include <dlfcn.h>

#include <cmath>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "zero/core/error.h"

#ifdef ZERO_GPT2_WITH_CUDNN_FRONTEND
#include <cudnn.h>
#include <cudnn_frontend.h>

// The frontend's dynamic-loading shim resolves cuDNN's symbols in this handle (its contract: the
// program sets it before the first call).
namespace cudnn_frontend {
void* cudnn_dlhandle = nullptr;
}  // namespace cudnn_frontend
#endif

namespace zero::gpt2::cuda {

AttentionChoice attention_choice_from_environment() {
  const char* value = std::getenv("ZERO_ATTENTION");
  if (value == nullptr || *value == '\0' || std::string_view(value) == "auto")
    return AttentionChoice::kAuto;
  if (std::string_view(value) == "cudnn") return AttentionChoice::kCudnn;
  if (std::string_view(value) == "tiled") return AttentionChoice::kTiled;
  ZERO_THROW("ZERO_ATTENTION='", value, "': expected auto, cudnn or tiled");
}

bool native_gqa_from_environment() {
  const char* value = std::getenv("ZERO_CUDNN_NATIVE_GQA");
  if (value == nullptr || *value == '\0' || std::string_view(value) == "0") return false;
  if (std::string_view(value) == "1") return true;
  ZERO_THROW("ZERO_CUDNN_NATIVE_GQA='", value, "': expected 0 or 1");
}

#ifndef ZERO_GPT2_WITH_CUDNN_FRONTEND

bool cudnn_attention_built() { return false; }
struct CudnnAttention::Impl {};
CudnnAttention::CudnnAttention() = default;
CudnnAttention::~CudnnAttention() = default;
namespace {
[[noreturn]] void not_built() {
  ZERO_THROW(
      "cuDNN attention: this build has no cudnn_frontend headers (configure with "
      "-DZERO_CUDNN_FRONTEND_INCLUDE=DIR; scripts/cudnn_frontend.sh fetches them)");
}
}  // namespace
bool CudnnAttention::supports(std::int64_t, std::int64_t, std::int64_t, std::int64_t,
                              std::string* why, std::int64_t) {
  if (why != nullptr) *why = "this build has no cudnn_frontend headers";
  return false;
}
std::size_t CudnnAttention::forward_workspace(std::int64_t, std::int64_t, std::int64_t,
                                              std::int64_t, std::int64_t) {
  not_built();
}
std::size_t CudnnAttention::backward_workspace(std::int64_t, std::int64_t, std::int64_t,
                                               std::int64_t, std::int64_t) {
  not_built();
}
void CudnnAttention::forward(void*, float*, const void*, std::int64_t, std::int64_t, std::int64_t,
                             std::int64_t, void*, cudaStream_t, std::int64_t) {
  not_built();
}
void CudnnAttention::backward(void*, const void*, const void*, const void*, const float*,
                              std::int64_t, std::int64_t, std::int64_t, std::int64_t, void*,
                              cudaStream_t, std::int64_t) {
  not_built();
}
std::string CudnnAttention::version() { return "not built"; }

#else

namespace fe = cudnn_frontend;

namespace {

// The uids the graphs' tensors carry and execute() binds pointers by.
enum Uid : std::int64_t { kQ = 1, kK, kV, kO, kStats, kDO, kDQ, kDK, kDV };

// B, T, C = NH·HS (q's and out's width), NH query heads, KVH key/value heads (shape_of: 0 is NH).
struct Shape {
  std::int64_t B, T, C, NH, KVH;
  std::int64_t head_size() const { return C / NH; }
  std::int64_t qkv_width() const { return C + 2 * KVH * head_size(); }  // a row of qkv
  bool operator<(const Shape& other) const {
    return std::tie(B, T, C, NH, KVH) < std::tie(other.B, other.T, other.C, other.NH, other.KVH);
  }
};

struct BuiltGraph {
  std::shared_ptr<fe::graph::Graph> graph;
  std::int64_t workspace = 0;
};

struct Plans {
  bool supported = false;
  std::string why;
  BuiltGraph forward, backward;
};

void check_cudnn(cudnnStatus_t status, const char* what) {
  ZERO_CHECK(status == CUDNN_STATUS_SUCCESS, "cuDNN attention: ", what, ": ",
             fe::detail::get_error_string(status));
}

// cuDNN's library, opened once per process; empty when it is there, else why not.
std::string load_cudnn() {
  static const std::string why = [] {
    const std::string name = "libcudnn.so." + std::to_string(CUDNN_MAJOR);
    fe::cudnn_dlhandle = dlopen(name.c_str(), RTLD_NOW | RTLD_GLOBAL);
    if (fe::cudnn_dlhandle != nullptr) return std::string();
    const char* error = dlerror();
    return "cannot load " + name + " (" + (error != nullptr ? error : "?") +
           "); set LD_LIBRARY_PATH to cuDNN's lib folder";
  }();
  return why;
}

Shape shape_of(std::int64_t B, std::int64_t T, std::int64_t C, std::int64_t NH, std::int64_t KVH) {
  return {B, T, C, NH, KVH == 0 ? NH : KVH};
}

// The (B, heads, T, HS) views of the model's row-major buffers: q (NH heads), k and v (KVH heads)
// side by side in one (B, T, C + 2·KVH·HS) row, out and dout (B, T, C); stats (B, NH, T, 1).
std::vector<std::int64_t> dims(const Shape& s) { return {s.B, s.NH, s.T, s.head_size()}; }
std::vector<std::int64_t> kv_dims(const Shape& s) { return {s.B, s.KVH, s.T, s.head_size()}; }
std::vector<std::int64_t> qkv_strides(const Shape& s) {
  return {s.T * s.qkv_width(), s.head_size(), s.qkv_width(), 1};
}
std::vector<std::int64_t> out_strides(const Shape& s) { return {s.T * s.C, s.head_size(), s.C, 1}; }

std::shared_ptr<fe::graph::Tensor_attributes> input(fe::graph::Graph& graph, const char* name,
                                                    Uid uid, std::vector<std::int64_t> dim,
                                                    std::vector<std::int64_t> stride) {
  return graph.tensor(fe::graph::Tensor_attributes()
                          .set_name(name)
                          .set_uid(uid)
                          .set_dim(std::move(dim))
                          .set_stride(std::move(stride)));
}

std::shared_ptr<fe::graph::Tensor_attributes> stats_tensor(fe::graph::Graph& graph,
                                                           const Shape& s) {
  return graph.tensor(fe::graph::Tensor_attributes()
                          .set_name("stats")
                          .set_uid(kStats)
                          .set_dim({s.B, s.NH, s.T, 1})
                          .set_stride({s.NH * s.T, s.T, 1, 1})
                          .set_data_type(fe::DataType_t::FLOAT));
}

std::shared_ptr<fe::graph::Graph> new_graph() {
  auto graph = std::make_shared<fe::graph::Graph>();
  graph->set_io_data_type(fe::DataType_t::BFLOAT16)
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  return graph;
}

float attention_scale(const Shape& s) { return 1.0f / std::sqrt(static_cast<float>(s.C / s.NH)); }

std::shared_ptr<fe::graph::Graph> forward_graph(const Shape& s) {
  auto graph = new_graph();
  auto q = input(*graph, "q", kQ, dims(s), qkv_strides(s));
  auto k = input(*graph, "k", kK, kv_dims(s), qkv_strides(s));
  auto v = input(*graph, "v", kV, kv_dims(s), qkv_strides(s));
  auto options = fe::graph::SDPA_attributes()
                     .set_name("attention")
                     .set_generate_stats(true)
                     .set_causal_mask(true)
                     .set_attn_scale(attention_scale(s));
  auto [out, stats] = graph->sdpa(q, k, v, options);
  out->set_output(true).set_dim(dims(s)).set_stride(out_strides(s)).set_uid(kO);
  stats->set_output(true)
      .set_data_type(fe::DataType_t::FLOAT)
      .set_dim({s.B, s.NH, s.T, 1})
      .set_stride({s.NH * s.T, s.T, 1, 1})
      .set_uid(kStats);
  return graph;
}

std::shared_ptr<fe::graph::Graph> backward_graph(const Shape& s) {
  auto graph = new_graph();
  auto q = input(*graph, "q", kQ, dims(s), qkv_strides(s));
  auto k = input(*graph, "k", kK, kv_dims(s), qkv_strides(s));
  auto v = input(*graph, "v", kV, kv_dims(s), qkv_strides(s));
  auto out = input(*graph, "out", kO, dims(s), out_strides(s));
  auto dout = input(*graph, "dout", kDO, dims(s), out_strides(s));
  auto stats = stats_tensor(*graph, s);
  auto options = fe::graph::SDPA_backward_attributes()
                     .set_name("attention_backward")
                     .set_causal_mask(true)
                     .set_attn_scale(attention_scale(s));
  auto [dq, dk, dv] = graph->sdpa_backward(q, k, v, out, dout, stats, options);
  dq->set_output(true).set_dim(dims(s)).set_stride(qkv_strides(s)).set_uid(kDQ);
  dk->set_output(true).set_dim(kv_dims(s)).set_stride(qkv_strides(s)).set_uid(kDK);
  dv->set_output(true).set_dim(kv_dims(s)).set_stride(qkv_strides(s)).set_uid(kDV);
  return graph;
}

// Validates, plans and builds `graph`; an empty string when it is ready, else cuDNN's reason.
std::string build(fe::graph::Graph& graph, cudnnHandle_t handle, std::int64_t& workspace) {
  const auto step = [](fe::error_t status, const char* what) -> std::string {
    if (status.is_good()) return {};
    return std::string(what) + ": " + status.get_message();
  };
  std::string why = step(graph.validate(), "validate");
  if (why.empty()) why = step(graph.build_operation_graph(handle), "build_operation_graph");
  if (why.empty())
    why = step(graph.create_execution_plans({fe::HeurMode_t::A}), "create_execution_plans");
  if (why.empty()) why = step(graph.check_support(handle), "check_support");
  if (why.empty()) why = step(graph.build_plans(handle), "build_plans");
  if (why.empty()) why = step(graph.get_workspace_size(workspace), "get_workspace_size");
  return why;
}

}  // namespace

bool cudnn_attention_built() { return true; }

struct CudnnAttention::Impl {
  std::mutex mutex;
  cudnnHandle_t handle = nullptr;
  std::map<Shape, Plans> plans;

  ~Impl() {
    if (handle != nullptr) fe::detail::destroy_handle(handle);
  }

  Plans& plans_for(const Shape& s) {
    auto found = plans.find(s);
    if (found != plans.end()) return found->second;
    Plans built;
    built.why = load_cudnn();
    if (!built.why.empty()) {
      // cuDNN's library is not there: the reason is the answer.
    } else if (s.NH <= 0 || s.C % s.NH != 0) {
      built.why = "n_embd is not a multiple of n_head";
    } else if (s.KVH <= 0 || s.NH % s.KVH != 0) {
      built.why = std::to_string(s.KVH) + " key/value heads do not divide " + std::to_string(s.NH) +
                  " query heads";
    } else if ((s.C / s.NH) % 8 != 0 || s.C / s.NH > 256) {
      built.why = "head size " + std::to_string(s.C / s.NH) +
                  " (cuDNN's SDPA takes multiples of 8 up to 256)";
    } else {
      if (handle == nullptr) check_cudnn(fe::detail::create_handle(&handle), "cudnnCreate");
      built.forward.graph = forward_graph(s);
      built.why = build(*built.forward.graph, handle, built.forward.workspace);
      if (built.why.empty()) {
        built.backward.graph = backward_graph(s);
        built.why = build(*built.backward.graph, handle, built.backward.workspace);
        if (!built.why.empty()) built.why = "backward: " + built.why;
      } else {
        built.why = "forward: " + built.why;
      }
    }
    built.supported = built.why.empty();
    return plans.emplace(s, std::move(built)).first->second;
  }

  const Plans& ready(const Shape& s) {
    const Plans& p = plans_for(s);
    ZERO_CHECK(p.supported, "cuDNN attention: B ", s.B, " T ", s.T, " C ", s.C, " NH ", s.NH,
               " KVH ", s.KVH, " is not supported: ", p.why);
    return p;
  }

  void execute(const BuiltGraph& built, std::unordered_map<std::int64_t, void*>& pack,
               void* workspace, cudaStream_t stream, const char* what) {
    check_cudnn(fe::detail::set_stream(handle, stream), "cudnnSetStream");
    ZERO_CHECK(built.workspace == 0 || workspace != nullptr, "cuDNN attention ", what, ": needs ",
               built.workspace, " bytes of workspace and got none");
    fe::error_t status = built.graph->execute(handle, pack, workspace);
    ZERO_CHECK(status.is_good(), "cuDNN attention ", what, ": execute: ", status.get_message());
  }
};

CudnnAttention::CudnnAttention() : impl_(std::make_unique<Impl>()) {}
CudnnAttention::~CudnnAttention() = default;

bool CudnnAttention::supports(std::int64_t B, std::int64_t T, std::int64_t C, std::int64_t NH,
                              std::string* why, std::int64_t KVH) {
  std::lock_guard lock(impl_->mutex);
  const Plans& p = impl_->plans_for(shape_of(B, T, C, NH, KVH));
  if (why != nullptr) *why = p.why;
  return p.supported;
}

std::size_t CudnnAttention::forward_workspace(std::int64_t B, std::int64_t T, std::int64_t C,
                                              std::int64_t NH, std::int64_t KVH) {
  std::lock_guard lock(impl_->mutex);
  return static_cast<std::size_t>(impl_->ready(shape_of(B, T, C, NH, KVH)).forward.workspace);
}

std::size_t CudnnAttention::backward_workspace(std::int64_t B, std::int64_t T, std::int64_t C,
                                               std::int64_t NH, std::int64_t KVH) {
  std::lock_guard lock(impl_->mutex);
  return static_cast<std::size_t>(impl_->ready(shape_of(B, T, C, NH, KVH)).backward.workspace);
}

void CudnnAttention::forward(void* out16, float* stats, const void* qkv16, std::int64_t B,
                             std::int64_t T, std::int64_t C, std::int64_t NH, void* workspace,
                             cudaStream_t stream, std::int64_t KVH) {
  std::lock_guard lock(impl_->mutex);
  const Shape s = shape_of(B, T, C, NH, KVH);
  const Plans& p = impl_->ready(s);
  using Bf16 = std::uint16_t;
  auto* qkv = static_cast<Bf16*>(const_cast<void*>(qkv16));
  const std::int64_t kv = s.KVH * s.head_size();  // k's and v's width
  std::unordered_map<std::int64_t, void*> pack{
      {kQ, qkv}, {kK, qkv + C}, {kV, qkv + C + kv}, {kO, out16}, {kStats, stats}};
  impl_->execute(p.forward, pack, workspace, stream, "forward");
}

void CudnnAttention::backward(void* dqkv16, const void* qkv16, const void* out16,
                              const void* dout16, const float* stats, std::int64_t B,
                              std::int64_t T, std::int64_t C, std::int64_t NH, void* workspace,
                              cudaStream_t stream, std::int64_t KVH) {
  std::lock_guard lock(impl_->mutex);
  const Shape s = shape_of(B, T, C, NH, KVH);
  const Plans& p = impl_->ready(s);
  using Bf16 = std::uint16_t;
  auto* qkv = static_cast<Bf16*>(const_cast<void*>(qkv16));
  auto* dqkv = static_cast<Bf16*>(dqkv16);
  const std::int64_t kv = s.KVH * s.head_size();
  std::unordered_map<std::int64_t, void*> pack{{kQ, qkv},
                                               {kK, qkv + C},
                                               {kV, qkv + C + kv},
                                               {kO, const_cast<void*>(out16)},
                                               {kDO, const_cast<void*>(dout16)},
                                               {kStats, const_cast<float*>(stats)},
                                               {kDQ, dqkv},
                                               {kDK, dqkv + C},
                                               {kDV, dqkv + C + kv}};
  impl_->execute(p.backward, pack, workspace, stream, "backward");
}

std::string CudnnAttention::version() {
  if (!load_cudnn().empty()) return load_cudnn();
  const std::size_t v = fe::detail::get_backend_version();
  return "cuDNN " + std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." +
         std::to_string(v % 100) + " (frontend " + std::to_string(CUDNN_FRONTEND_MAJOR_VERSION) +
         "." + std::to_string(CUDNN_FRONTEND_MINOR_VERSION) + "." +
         std::to_string(CUDNN_FRONTEND_PATCH_VERSION) + ")";
}

#endif

}  // namespace zero::gpt2::cuda
