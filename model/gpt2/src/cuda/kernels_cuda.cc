// CudaKernels' GEMMs (kernels_cuda.h): linear forward and backward, the LM head's products,
// weight and gradient GEMMs through cuBLASLt, and make_cuda_kernels.
#include "kernels_cuda.h"

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string_view>
#include <utility>
#include <vector>

#include "../kernels_internal.h"
#include "zero/core/error.h"

namespace zero::gpt2 {
void CudaKernels::linear_forward(Stream& stream, const LinearForward& c,
                                 const GemmScratch& scratch) {
  const DType dtype = c.weight.dtype;
  const bool gelu = c.gelu_out.data != nullptr;
  if (c.out.dtype != DType::kFloat32) {
    linear_forward_16bit_out(stream, c, scratch);
    return;
  }
  float* out = static_cast<float*>(c.out.data);
  const bool out_in = c.weight_layout == WeightLayout::kOutIn;
  if (dtype == DType::kFloat32 && !gelu && !out_in) {
    cuda::matmul_forward(out, c.inp.fp32("GPT-2 CUDA linear_forward (inp)"),
                         static_cast<const float*>(c.weight.data), c.bias, c.N, c.C, c.OC,
                         native(stream));
    return;
  }
  // out (N, OC) = inp · weight + bias, through cuBLASLt's bias (and GELU_AUX) epilogues.
  const void* A = operand(stream, c.inp, c.N * c.C, dtype, scratch.staged_a);
  cuda::GemmEpilogue epilogue;
  epilogue.bias = c.bias;
  float* destination = out;
  // cuBLASLt's GELU_AUX stores the pre-activation (its aux) in D's type and wants the aux
  // matrix's leading dimension a multiple of 8: fused for an fp32 gelu_out only; a 16-bit one
  // (gemm_input_dtype) is written by GELU's own pass from the fp32 pre-activation, rounded once.
  const bool fused_gelu = gelu && c.gelu_out.dtype == DType::kFloat32 && c.OC % 8 == 0;
  if (fused_gelu) {
    epilogue.gelu = true;
    epilogue.pre_gelu = out;
    destination = static_cast<float*>(c.gelu_out.data);
  }
  cuda::gemm(false, out_in, c.N, c.OC, c.C, A, c.C, c.weight.data, out_in ? c.C : c.OC, dtype, 0.0f,
             destination, c.OC, DType::kFloat32, epilogue, native(stream));
  if (gelu && !fused_gelu)
    cuda::gelu_forward(c.gelu_out.data, c.gelu_out.dtype, out, c.N * c.OC, native(stream));
}

// A 16-bit out (attention_io_dtype's qkv): the GEMM writes it in the weight's dtype, rounded once
// from the fp32 sums, with the unit's own 16-bit bias in its epilogue (cuBLASLt's bias is of D's
// type; the fp32 bias is that bias widened, so the sum is the same).
void CudaKernels::linear_forward_16bit_out(Stream& stream, const LinearForward& c,
                                           const GemmScratch& scratch) {
  const DType dtype = c.weight.dtype;
  ZERO_CHECK(c.out.dtype == dtype && c.gelu_out.data == nullptr, "GPT-2 CUDA linear_forward: a ",
             name_of(c.out.dtype), " out needs ", name_of(c.out.dtype), " weights (got ",
             name_of(dtype), ") and no GELU");
  ZERO_CHECK(c.bias == nullptr || c.stored_bias != nullptr, "GPT-2 CUDA linear_forward: a ",
             name_of(dtype), " out with a bias needs the bias in ", name_of(dtype),
             " (LinearForward::stored_bias)");
  const void* A = operand(stream, c.inp, c.N * c.C, dtype, scratch.staged_a);
  cuda::GemmEpilogue epilogue;
  epilogue.bias = c.bias != nullptr ? c.stored_bias : nullptr;
  const bool out_in = c.weight_layout == WeightLayout::kOutIn;
  cuda::gemm(false, out_in, c.N, c.OC, c.C, A, c.C, c.weight.data, out_in ? c.C : c.OC, dtype, 0.0f,
             c.out.data, c.OC, dtype, epilogue, native(stream));
}

// 16-bit parameters: dout is read once, by one pass that rounds it into staged_b (both GEMMs' dout
// operand) and sums dbias's columns; an fp32 inp is rounded into staged_a (a 16-bit one, the
// forward's gemm_input_dtype activation, is the operand as it is). With gelu_preactivation that
// pass computes g = dout ⊙ gelu'(gelu_preactivation) as it reads dout (gelu_bias_backward_staged);
// without a dbias to sum, and with fp32 parameters, GELU's backward runs in place on dout first.
void CudaKernels::linear_backward(Stream& stream, const LinearBackward& c,
                                  const GemmScratch& scratch) {
  const DType dtype = c.weight.dtype;
  const bool staged = dtype != DType::kFloat32;
  const bool gelu_in_staging = c.gelu_preactivation != nullptr && staged && c.dbias != nullptr;
  if (c.gelu_preactivation != nullptr && !gelu_in_staging)
    cuda::gelu_backward(c.dout, c.gelu_preactivation, c.dout, c.N * c.OC, native(stream));
  const bool out_in = c.weight_layout == WeightLayout::kOutIn;
  if (!staged && c.dweight.dtype == DType::kFloat32 && !out_in) {
    with_scratch(stream, [&](const cuda::Scratch& sums) {
      cuda::matmul_backward(c.dinp, static_cast<float*>(c.dweight.data), c.dbias, c.dout,
                            c.inp.fp32("GPT-2 CUDA linear_backward (inp)"),
                            static_cast<const float*>(c.weight.data), c.N, c.C, c.OC,
                            native(stream), sums);
    });
    return;
  }
  const void* dout = c.dout;
  if (staged) {
    check_staging(scratch, c.N * c.C, c.N * c.OC);
    dout = scratch.staged_b;
    if (c.dbias != nullptr) {
      with_scratch(stream, [&](const cuda::Scratch& sums) {
        if (gelu_in_staging)
          cuda::gelu_bias_backward_staged(c.dbias, scratch.staged_b, dtype, c.dout,
                                          c.gelu_preactivation, c.N, c.OC, native(stream), sums);
        else
          cuda::bias_backward_staged(c.dbias, scratch.staged_b, dtype, c.dout, c.N, c.OC,
                                     native(stream), sums);
      });
    } else {
      context_.convert(stream, c.dout, DType::kFloat32, scratch.staged_b, dtype,
                       static_cast<std::size_t>(c.N * c.OC));
    }
  } else if (c.dbias != nullptr) {
    with_scratch(stream, [&](const cuda::Scratch& sums) {
      cuda::bias_backward(c.dbias, c.dout, c.N, c.OC, native(stream), sums);
    });
  }
  // dinp (N, C) = g · weightᵀ (weight (C, OC)), or g · weight (weight (OC, C), kOutIn)
  if (c.dinp != nullptr)
    cuda::gemm(false, !out_in, c.N, c.C, c.OC, dout, c.OC, c.weight.data, out_in ? c.C : c.OC,
               dtype, 0.0f, c.dinp, c.C, DType::kFloat32, {}, native(stream));
  // dweight (C, OC) += inpᵀ · g, or (OC, C) += gᵀ · inp, rounded once into dweight's dtype.
  const void* inp = operand(stream, c.inp, c.N * c.C, dtype, scratch.staged_a);
  if (out_in)
    cuda::gemm(true, false, c.OC, c.C, c.N, dout, c.OC, inp, c.C, dtype, 1.0f, c.dweight.data, c.C,
               c.dweight.dtype, {}, native(stream));
  else
    cuda::gemm(true, false, c.C, c.OC, c.N, inp, c.C, dout, c.OC, dtype, 1.0f, c.dweight.data, c.OC,
               c.dweight.dtype, {}, native(stream));
}

// fp32 logits: Kernels' two calls. bf16 (logits_dtype): ln_f (bf16 already, gemm_input_dtype, or
// rounded into staged_a), the GEMM
// writes the logits in bf16, and the cross-entropy reads them widened.
void CudaKernels::logits_forward(Stream& stream, const LogitsForward& c,
                                 const GemmScratch& scratch) {
  if (c.logits_dtype == DType::kFloat32) {
    Kernels::logits_forward(stream, c, scratch);
    return;
  }
  ZERO_CHECK(c.wte.dtype == c.logits_dtype, "GPT-2 CUDA logits_forward: ", name_of(c.logits_dtype),
             " logits from ", name_of(c.wte.dtype),
             " embeddings (the GEMM writes its operands' dtype)");
  check_staging(scratch, c.N * c.C, 0);
  const void* ln_f = operand(stream, c.ln_f, c.N * c.C, c.wte.dtype, scratch.staged_a);
  // logits (N, Vp) = ln_f (N, C) · wteᵀ, rounded once into bf16
  cuda::gemm(false, true, c.N, c.Vp, c.C, ln_f, c.C, c.wte.data, c.C, c.wte.dtype, 0.0f, c.logits,
             c.Vp, c.logits_dtype, {}, native(stream));
  if (c.targets != nullptr)
    cuda::crossentropy_forward(c.losses, c.logsumexp, c.logits, c.logits_dtype, c.targets, c.N, c.V,
                               c.Vp, native(stream), c.label_smoothing);
}

// 16-bit embeddings: the cross-entropy's gradient is written once, rounded, into staged_a (N, Vp),
// the operand of both products; an fp32 ln_f is rounded into staged_b. fp32: Kernels' three
// calls.
void CudaKernels::logits_backward(Stream& stream, const LogitsBackward& c,
                                  const GemmScratch& scratch) {
  const DType dtype = c.param_dtype;
  if (dtype == DType::kFloat32 || c.wte.dtype != dtype) {
    Kernels::logits_backward(stream, c, scratch);
    return;
  }
  check_staging(scratch, c.N * c.Vp, c.N * c.C);
  cuda::crossentropy_backward(scratch.staged_a, dtype, c.logits, c.logits_dtype, c.logsumexp,
                              c.targets, c.N, c.V, c.Vp, c.scale, native(stream),
                              c.label_smoothing);
  // dln (N, C) = dlogits (N, Vp) · wte (Vp, C)
  cuda::gemm(false, false, c.N, c.C, c.Vp, scratch.staged_a, c.Vp, c.wte.data, c.C, dtype, 0.0f,
             c.dln, c.C, DType::kFloat32, {}, native(stream));
  // dwte (Vp, C) += dlogitsᵀ · ln_f
  const void* ln_f = operand(stream, c.ln_f, c.N * c.C, dtype, scratch.staged_b);
  cuda::gemm(true, false, c.Vp, c.C, c.N, scratch.staged_a, c.Vp, ln_f, c.C, dtype, 1.0f,
             c.dwte.data, c.C, c.dwte.dtype, {}, native(stream));
}

void CudaKernels::weight_gemm(Stream& stream, const WeightGemm& c, const GemmScratch& scratch) {
  const void* A = operand(stream, c.A, c.M * c.K, c.W.dtype, scratch.staged_a);
  cuda::gemm(false, c.trans_w, c.M, c.N, c.K, A, c.K, c.W.data, c.ldw, c.W.dtype, c.beta, c.out,
             c.N, DType::kFloat32, {}, native(stream));
}

void CudaKernels::grad_gemm(Stream& stream, const GradGemm& c, const GemmScratch& scratch) {
  const DType dtype = c.param_dtype;
  const void* A = c.a_is_staged && dtype != DType::kFloat32
                      ? scratch.staged_a
                      : operand(stream, c.A, c.K * c.lda, dtype, scratch.staged_a);
  const void* B = operand(stream, c.B, c.K * c.N, dtype, scratch.staged_b);
  // G += Aᵀ · B with one rounding into G's dtype (fp32, or the parameters' 16 bits).
  cuda::gemm(true, false, c.M, c.N, c.K, A, c.lda, B, c.N, dtype, 1.0f, c.G.data, c.N, c.G.dtype,
             {}, native(stream));
}

// Computed on the host (rope.h: transformers' fp32 arithmetic), staged in pinned memory from the
// context's allocator (in the ledger) and copied in the stream's order; the staging is released
// once the copy has run.
void CudaKernels::rope_table(Stream& stream, float* table, const RopeParameters& parameters,
                             std::int64_t positions) {
  const std::vector<float> values = gpt2::rope_table(parameters, positions);
  if (values.empty()) return;
  const std::size_t bytes = values.size() * sizeof(float);
  auto staged = std::make_shared<Buffer>(
      context_.allocator(MemorySpace::kHostPinned).allocate(bytes, MemoryCategory::kWorkspace));
  std::memcpy(staged->data(), values.data(), bytes);
  context_.copy(stream, staged->data(), table, bytes);
  context_.release_after(stream, std::move(staged));
}

std::unique_ptr<Kernels> make_cuda_kernels(DeviceContext& context) {
  const char* profile = std::getenv("ZERO_KERNEL_PROFILE");
  if (profile != nullptr && *profile != '\0' && std::string_view(profile) != "0")
    return profile_kernels(std::make_unique<CudaKernels>(context));
  return std::make_unique<CudaKernels>(context);
}

}  // namespace zero::gpt2
