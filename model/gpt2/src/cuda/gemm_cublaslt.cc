// GEMMs through cuBLASLt: row-major C = op(A)·op(B) computed as the column-major Cᵀ = op(B)ᵀ·op(A)ᵀ
// (no copies), fp32 compute type (no TF32), bias, GELU and GELU-backward epilogues, one handle per
// process, one 32 MiB workspace per stream (two streams never share one while running), and the
// matrix layouts and the heuristic's algorithm cached per problem (shape, dtypes, epilogue, operand
// alignments): a training step repeats a few dozen problems, and the heuristic query costs more
// host time than the launch. cuBLASLt is loaded with dlopen at the first GEMM, not linked: its 0.5
// GiB of mappings would otherwise sit in every process of the `zero` binary, CPU runs and `zero
// train --dry_run` (whose 70B plan must fit in 1 GiB of address space) included.
#include <cublasLt.h>
#include <cuda_runtime.h>
#include <dlfcn.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <utility>

#include "layers_cuda.h"
#include "zero/core/cuda_check.h"

namespace zero::gpt2::cuda {
namespace {

// The cuBLASLt functions this file calls, resolved once from libcublasLt.so.<major>.
#define ZERO_LT_FUNCTIONS(X)              \
  X(cublasLtCreate)                       \
  X(cublasLtGetStatusString)              \
  X(cublasLtGetVersion)                   \
  X(cublasLtMatmul)                       \
  X(cublasLtMatmulAlgoGetHeuristic)       \
  X(cublasLtMatmulDescCreate)             \
  X(cublasLtMatmulDescDestroy)            \
  X(cublasLtMatmulDescSetAttribute)       \
  X(cublasLtMatmulPreferenceCreate)       \
  X(cublasLtMatmulPreferenceDestroy)      \
  X(cublasLtMatmulPreferenceSetAttribute) \
  X(cublasLtMatrixLayoutCreate)           \
  X(cublasLtMatrixLayoutDestroy)

struct LtApi {
#define ZERO_LT_MEMBER(name) decltype(&::name) name = nullptr;
  ZERO_LT_FUNCTIONS(ZERO_LT_MEMBER)
#undef ZERO_LT_MEMBER
};

const LtApi& lt() {
  static const LtApi api = [] {
    const std::string soname = "libcublasLt.so." + std::to_string(CUBLAS_VER_MAJOR);
    void* library = dlopen(soname.c_str(), RTLD_NOW | RTLD_LOCAL);  // kept for the process
    ZERO_CHECK(library != nullptr, "gemm: cannot load cuBLASLt (", soname, "): ", dlerror());
    LtApi loaded;
#define ZERO_LT_LOAD(name)                                                  \
  loaded.name = reinterpret_cast<decltype(&::name)>(dlsym(library, #name)); \
  ZERO_CHECK(loaded.name != nullptr, "gemm: ", soname, " has no ", #name);
    ZERO_LT_FUNCTIONS(ZERO_LT_LOAD)
#undef ZERO_LT_LOAD
    return loaded;
  }();
  return api;
}

#define ZERO_CUBLAS_CHECK(call)                                                      \
  do {                                                                               \
    const cublasStatus_t zero_cublas_status = (call);                                \
    ZERO_CHECK(zero_cublas_status == CUBLAS_STATUS_SUCCESS, "cuBLASLt call ", #call, \
               " failed: ", lt().cublasLtGetStatusString(zero_cublas_status));       \
  } while (false)

constexpr std::size_t kWorkspaceBytes = std::size_t{32} << 20;

cudaDataType_t cuda_type(DType dtype) {
  switch (dtype) {
    case DType::kFloat32: return CUDA_R_32F;
    case DType::kBFloat16: return CUDA_R_16BF;
    case DType::kFloat16: return CUDA_R_16F;
  }
  return CUDA_R_32F;
}

// Everything that decides cuBLASLt's algorithm for one call, pointers aside.
struct PlanKey {
  int device = 0;
  bool first_transposed = false, second_transposed = false;
  std::array<std::int64_t, 9> dims{};  // first, second and output (rows, cols, ld)
  DType ab_dtype = DType::kFloat32, c_dtype = DType::kFloat32;
  cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  std::int64_t aux_ld = 0;
  std::array<std::uint32_t, 4> alignments{};  // B, A, C, D
  auto tie() const {
    return std::tie(device, first_transposed, second_transposed, dims, ab_dtype, c_dtype, epilogue,
                    aux_ld, alignments);
  }
  bool operator<(const PlanKey& other) const { return tie() < other.tie(); }
};

// A problem's layouts and the algorithm cuBLASLt's heuristic chose for it; read-only once made
// (cublasLtMatmul only reads layouts and the algorithm, so concurrent calls may share them).
struct Plan {
  cublasLtMatrixLayout_t first = nullptr, second = nullptr, output = nullptr;
  cublasLtMatmulAlgo_t algorithm{};
  ~Plan() {
    for (cublasLtMatrixLayout_t layout : {first, second, output})
      if (layout != nullptr) lt().cublasLtMatrixLayoutDestroy(layout);
  }
};

// The process's handle, the workspace of each (device, stream) and the plans, made on first use
// and kept for the process's life (cuBLASLt handles are not tied to a stream).
struct Library {
  std::mutex mutex;
  cublasLtHandle_t handle = nullptr;
  std::map<std::pair<int, cudaStream_t>, void*> workspaces;
  std::map<PlanKey, std::unique_ptr<Plan>> plans;
};

Library& library() {
  static Library* instance = new Library;  // never destroyed: usable from static destructors
  return *instance;
}

std::pair<cublasLtHandle_t, void*> handle_and_workspace(int device, cudaStream_t stream) {
  Library& lib = library();
  std::lock_guard lock(lib.mutex);
  if (lib.handle == nullptr) ZERO_CUBLAS_CHECK(lt().cublasLtCreate(&lib.handle));
  void*& workspace = lib.workspaces[{device, stream}];
  if (workspace == nullptr) ZERO_CUDA_CHECK(cudaMalloc(&workspace, kWorkspaceBytes));
  return {lib.handle, workspace};
}

// The largest power of two (at most 256) dividing the address: cuBLASLt's heuristic assumes 256
// unless told.
std::uint32_t alignment_of(const void* data) {
  const auto address = reinterpret_cast<std::uintptr_t>(data);
  if (address == 0) return 256;
  return static_cast<std::uint32_t>(std::min<std::uintptr_t>(256, address & (~address + 1)));
}

// Owning wrappers for the descriptors of one call.
struct MatmulDesc {
  cublasLtMatmulDesc_t desc = nullptr;
  ~MatmulDesc() {
    if (desc != nullptr) lt().cublasLtMatmulDescDestroy(desc);
  }
};
struct Preference {
  cublasLtMatmulPreference_t preference = nullptr;
  ~Preference() {
    if (preference != nullptr) lt().cublasLtMatmulPreferenceDestroy(preference);
  }
};

// The cached plan of `key`, made on first use: layouts and the heuristic's first algorithm for
// `operation` (whose attributes besides the bias and aux pointers the key determines).
const Plan* plan_for(const PlanKey& key, cublasLtHandle_t handle, cublasLtMatmulDesc_t operation) {
  Library& lib = library();
  std::lock_guard lock(lib.mutex);
  auto [entry, inserted] = lib.plans.try_emplace(key);
  std::unique_ptr<Plan>& slot = entry->second;
  if (!inserted && slot) return slot.get();
  auto plan = std::make_unique<Plan>();
  const cudaDataType_t ab_type = cuda_type(key.ab_dtype), c_type = cuda_type(key.c_dtype);
  const auto& d = key.dims;
  ZERO_CUBLAS_CHECK(lt().cublasLtMatrixLayoutCreate(&plan->first, ab_type, d[0], d[1], d[2]));
  ZERO_CUBLAS_CHECK(lt().cublasLtMatrixLayoutCreate(&plan->second, ab_type, d[3], d[4], d[5]));
  ZERO_CUBLAS_CHECK(lt().cublasLtMatrixLayoutCreate(&plan->output, c_type, d[6], d[7], d[8]));
  Preference preference;
  ZERO_CUBLAS_CHECK(lt().cublasLtMatmulPreferenceCreate(&preference.preference));
  const std::size_t workspace_bytes = kWorkspaceBytes;
  ZERO_CUBLAS_CHECK(lt().cublasLtMatmulPreferenceSetAttribute(
      preference.preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace_bytes,
      sizeof(workspace_bytes)));
  const cublasLtMatmulPreferenceAttributes_t alignment_attributes[4] = {
      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
  for (int k = 0; k < 4; ++k)
    ZERO_CUBLAS_CHECK(lt().cublasLtMatmulPreferenceSetAttribute(
        preference.preference, alignment_attributes[k], &key.alignments[k], sizeof(std::uint32_t)));
  cublasLtMatmulHeuristicResult_t heuristic{};
  int found = 0;
  const cublasStatus_t status = lt().cublasLtMatmulAlgoGetHeuristic(
      handle, operation, plan->first, plan->second, plan->output, plan->output,
      preference.preference, 1, &heuristic, &found);
  ZERO_CUBLAS_CHECK(status);
  ZERO_CHECK(found > 0, "gemm: cuBLASLt has no algorithm for the column-major problem (", d[6],
             " x ", d[7], ", inner ", key.first_transposed ? d[0] : d[1], ") ",
             name_of(key.ab_dtype), " -> ", name_of(key.c_dtype), " epilogue ",
             static_cast<int>(key.epilogue));
  plan->algorithm = heuristic.algo;
  slot = std::move(plan);
  return slot.get();
}

}  // namespace

LtProblem lt_problem(bool trans_a, bool trans_b, std::int64_t M, std::int64_t N, std::int64_t K,
                     std::int64_t lda, std::int64_t ldb, std::int64_t ldc) {
  // A row-major (r, c) matrix with row stride ld is a column-major (c, r) one with the same ld.
  LtProblem p;
  p.first_transposed = trans_b;  // B stored (K, N) row-major = (N, K) column-major: op N
  p.first_rows = trans_b ? K : N;
  p.first_cols = trans_b ? N : K;
  p.first_ld = ldb;
  p.second_transposed = trans_a;
  p.second_rows = trans_a ? M : K;
  p.second_cols = trans_a ? K : M;
  p.second_ld = lda;
  p.output_rows = N;
  p.output_cols = M;
  p.output_ld = ldc;
  return p;
}

void gemm(bool trans_a, bool trans_b, std::int64_t M, std::int64_t N, std::int64_t K, const void* A,
          std::int64_t lda, const void* B, std::int64_t ldb, DType ab_dtype, float beta, void* C,
          std::int64_t ldc, DType c_dtype, const GemmEpilogue& epilogue, cudaStream_t stream) {
  ZERO_CHECK(c_dtype == ab_dtype || c_dtype == DType::kFloat32, "gemm: C is ", name_of(c_dtype),
             " with ", name_of(ab_dtype), " operands (C must be fp32 or the operands' dtype)");
  ZERO_CHECK(M >= 0 && N >= 0 && K >= 0, "gemm: negative shape M=", M, " N=", N, " K=", K);
  ZERO_CHECK(ldc >= N && lda >= (trans_a ? M : K) && ldb >= (trans_b ? K : N),
             "gemm: leading dimensions lda=", lda, " ldb=", ldb, " ldc=", ldc,
             " too small for M=", M, " N=", N, " K=", K);
  const bool has_epilogue = epilogue.bias != nullptr || epilogue.gelu;
  ZERO_CHECK(!has_epilogue || beta == 0.0f, "gemm: beta = ", beta,
             " with a bias/GELU epilogue (the epilogue needs beta = 0)");
  ZERO_CHECK(epilogue.pre_gelu == nullptr || (epilogue.gelu && ldc % 8 == 0),
             "gemm: pre_gelu needs gelu and ldc (", ldc, ") a multiple of 8 (cuBLASLt's AUX_LD)");
  if (M == 0 || N == 0) return;

  MatmulDesc operation;
  ZERO_CUBLAS_CHECK(lt().cublasLtMatmulDescCreate(&operation.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  // Column-major view (lt_problem): Cᵀ (N, M) = op(B)ᵀ (N, K) · op(A)ᵀ (K, M), B first.
  const LtProblem shape = lt_problem(trans_a, trans_b, M, N, K, lda, ldb, ldc);
  const cublasOperation_t op_first = shape.first_transposed ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_second = shape.second_transposed ? CUBLAS_OP_T : CUBLAS_OP_N;
  ZERO_CUBLAS_CHECK(lt().cublasLtMatmulDescSetAttribute(operation.desc, CUBLASLT_MATMUL_DESC_TRANSA,
                                                        &op_first, sizeof(op_first)));
  ZERO_CUBLAS_CHECK(lt().cublasLtMatmulDescSetAttribute(operation.desc, CUBLASLT_MATMUL_DESC_TRANSB,
                                                        &op_second, sizeof(op_second)));
  cublasLtEpilogue_t mode = CUBLASLT_EPILOGUE_DEFAULT;
  if (epilogue.gelu && epilogue.pre_gelu != nullptr)
    mode = epilogue.bias != nullptr ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_GELU_AUX;
  else if (epilogue.gelu)
    mode = epilogue.bias != nullptr ? CUBLASLT_EPILOGUE_GELU_BIAS : CUBLASLT_EPILOGUE_GELU;
  else if (epilogue.bias != nullptr)
    mode = CUBLASLT_EPILOGUE_BIAS;
  ZERO_CUBLAS_CHECK(lt().cublasLtMatmulDescSetAttribute(
      operation.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &mode, sizeof(mode)));
  if (epilogue.bias != nullptr)
    ZERO_CUBLAS_CHECK(lt().cublasLtMatmulDescSetAttribute(
        operation.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &epilogue.bias, sizeof(void*)));
  const void* aux = epilogue.pre_gelu;
  if (aux != nullptr) {
    ZERO_CUBLAS_CHECK(lt().cublasLtMatmulDescSetAttribute(
        operation.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux, sizeof(void*)));
    const std::int64_t aux_ld = ldc;
    ZERO_CUBLAS_CHECK(lt().cublasLtMatmulDescSetAttribute(
        operation.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &aux_ld, sizeof(aux_ld)));
  }

  PlanKey key;
  ZERO_CUDA_CHECK(cudaGetDevice(&key.device));
  key.first_transposed = shape.first_transposed;
  key.second_transposed = shape.second_transposed;
  key.dims = {shape.first_rows,  shape.first_cols,  shape.first_ld,
              shape.second_rows, shape.second_cols, shape.second_ld,
              shape.output_rows, shape.output_cols, shape.output_ld};
  key.ab_dtype = ab_dtype;
  key.c_dtype = c_dtype;
  key.epilogue = mode;
  key.aux_ld = aux != nullptr ? ldc : 0;
  key.alignments = {alignment_of(B), alignment_of(A), alignment_of(C), alignment_of(C)};
  auto [handle, workspace] = handle_and_workspace(key.device, stream);
  const Plan* plan = plan_for(key, handle, operation.desc);
  const float alpha = 1.0f;
  ZERO_CUBLAS_CHECK(lt().cublasLtMatmul(handle, operation.desc, &alpha, B, plan->first, A,
                                        plan->second, &beta, C, plan->output, C, plan->output,
                                        &plan->algorithm, workspace, kWorkspaceBytes, stream));
}

std::size_t gemm_plans_cached() {
  Library& lib = library();
  std::lock_guard lock(lib.mutex);
  return lib.plans.size();
}

void matmul_forward(float* out, const float* inp, const float* weight, const float* bias,
                    std::int64_t N, std::int64_t C, std::int64_t OC, cudaStream_t stream) {
  GemmEpilogue epilogue;
  epilogue.bias = bias;
  gemm(false, false, N, OC, C, inp, C, weight, OC, DType::kFloat32, 0.0f, out, OC, DType::kFloat32,
       epilogue, stream);
}

void matmul_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                     const float* weight, std::int64_t N, std::int64_t C, std::int64_t OC,
                     cudaStream_t stream, const Scratch& scratch) {
  if (dinp != nullptr)
    gemm(false, true, N, C, OC, dout, OC, weight, OC, DType::kFloat32, 0.0f, dinp, C,
         DType::kFloat32, {}, stream);
  gemm(true, false, C, OC, N, inp, C, dout, OC, DType::kFloat32, 1.0f, dweight, OC, DType::kFloat32,
       {}, stream);
  if (dbias != nullptr) bias_backward(dbias, dout, N, OC, stream, scratch);
}

const char* cublaslt_version() {
  static const std::string version = [] {
    const std::size_t v = lt().cublasLtGetVersion();  // major·10000 + minor·100 + patch
    return "cuBLASLt " + std::to_string(v / 10000) + "." + std::to_string((v / 100) % 100) + "." +
           std::to_string(v % 100);
  }();
  return version.c_str();
}

}  // namespace zero::gpt2::cuda
