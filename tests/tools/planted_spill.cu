// A kernel that keeps 64 values live: under a 24-register cap ptxas must spill (1 KiB of spill
// stores on sm_90); without a cap it compiles clean. tests/tools/cuda_spill_check_test.sh.
__global__ void planted_spill(float* out, const float* in, int n) {
  float v[64];
#pragma unroll
  for (int i = 0; i < 64; ++i) v[i] = in[(threadIdx.x + i * 37) % n];
  float s = 0.0f;
#pragma unroll
  for (int i = 0; i < 64; ++i) s += v[i] * v[63 - i] + v[(i * 5) % 64];
  out[threadIdx.x] = s;
}
