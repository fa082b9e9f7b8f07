// GPT-2 CUDA row kernels: gather-widen, scatter-accumulate and fp32 row copies, one launch each
// (the CUDA Kernels' widen_rows, accumulate_rows and copy_rows). Each kernel is a wrapper over its
// body in rows_body.h, which the CPU emulation test runs.
#include "layers_cuda.h"
#include "rows_body.h"
#include "storage_elements.h"
#include "zero/core/cuda_check.h"
#include "zero/core/error.h"

namespace zero::gpt2::cuda {
namespace {

using kernels::DeviceThread;
using kernels::launch_kernel;

template <typename T>
__global__ void widen_rows_kernel(float* out, const T* table, const int* rows, std::int64_t count,
                                  std::int64_t C) {
  widen_rows_body(DeviceThread{}, out, table, rows, count, C);
}

template <typename T>
__global__ void accumulate_rows_kernel(T* table, const float* in, const int* rows,
                                       std::int64_t count, std::int64_t C) {
  accumulate_rows_body(DeviceThread{}, table, in, rows, count, C);
}

__global__ void copy_rows_kernel(float* out, const float* in, const std::int64_t* rows,
                                 std::int64_t count, std::int64_t C, bool scatter) {
  copy_rows_body(DeviceThread{}, out, in, rows, count, C, scatter);
}

// False when there is nothing to move; throws when one launch cannot cover the rows.
bool rows_to_launch(const char* what, std::int64_t count, std::int64_t C) {
  ZERO_CHECK(count >= 0 && C >= 0, what, ": negative shape, ", count, " rows of ", C, " columns");
  if (count == 0 || C == 0) return false;
  ZERO_CHECK(count <= kMaxRowsElements / C, what, ": ", count, " rows of ", C,
             " columns exceed one launch's ", kMaxRowsElements, " elements");
  return true;
}

template <typename T>
void launch_widen(float* out, const void* table, const int* rows, std::int64_t count,
                  std::int64_t C, cudaStream_t stream) {
  launch_kernel(widen_rows_kernel<T>, rows_launch(count, C), stream, out,
                static_cast<const T*>(table), rows, count, C);
}

template <typename T>
void launch_accumulate(void* table, const float* in, const int* rows, std::int64_t count,
                       std::int64_t C, cudaStream_t stream) {
  launch_kernel(accumulate_rows_kernel<T>, rows_launch(count, C), stream, static_cast<T*>(table),
                in, rows, count, C);
}

}  // namespace

void widen_rows(float* out, const void* table, DType dtype, const int* rows, std::int64_t count,
                std::int64_t C, cudaStream_t stream) {
  if (!rows_to_launch("widen_rows", count, C)) return;
  switch (dtype) {
    case DType::kFloat32: launch_widen<float>(out, table, rows, count, C, stream); break;
    case DType::kBFloat16: launch_widen<Bf16Element>(out, table, rows, count, C, stream); break;
    case DType::kFloat16: launch_widen<Fp16Element>(out, table, rows, count, C, stream); break;
  }
  ZERO_CUDA_CHECK(cudaGetLastError());
}

void accumulate_rows(void* table, DType dtype, const float* in, const int* rows, std::int64_t count,
                     std::int64_t C, cudaStream_t stream) {
  if (!rows_to_launch("accumulate_rows", count, C)) return;
  switch (dtype) {
    case DType::kFloat32: launch_accumulate<float>(table, in, rows, count, C, stream); break;
    case DType::kBFloat16: launch_accumulate<Bf16Element>(table, in, rows, count, C, stream); break;
    case DType::kFloat16: launch_accumulate<Fp16Element>(table, in, rows, count, C, stream); break;
  }
  ZERO_CUDA_CHECK(cudaGetLastError());
}

void copy_rows(float* out, const float* in, const std::int64_t* rows, std::int64_t count,
               std::int64_t C, bool scatter, cudaStream_t stream) {
  if (!rows_to_launch("copy_rows", count, C)) return;
  launch_kernel(copy_rows_kernel, rows_launch(count, C), stream, out, in, rows, count, C, scatter);
  ZERO_CUDA_CHECK(cudaGetLastError());
}

}  // namespace zero::gpt2::cuda
