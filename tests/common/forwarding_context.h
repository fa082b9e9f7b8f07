// A DeviceContext that forwards every call to another one, for tests that change one behaviour of
// a real backend (a device allocator that tracks its blocks, device memory the host cannot
// address) and keep the rest. (The model's kernels off the host are the CPU backend's own
// asynchronous mode.)
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "zero/core/device_context.h"
#include "zero/core/memory_ledger.h"

namespace zero::testing {

class ForwardingContext : public DeviceContext {
 public:
  // Allocations are recorded in `inner`'s ledger (inner().ledger()), not this context's own.
  explicit ForwardingContext(std::unique_ptr<DeviceContext> inner)
      : DeviceContext(std::make_unique<MemoryLedger>()), inner_(std::move(inner)) {}
  DeviceContext& inner() { return *inner_; }

  std::string_view backend() const override { return inner_->backend(); }
  Device device() const override { return inner_->device(); }
  bool model_runs_on_host() const override { return inner_->model_runs_on_host(); }
  bool host_addressable(MemorySpace space) const override {
    return inner_->host_addressable(space);
  }
  Allocator& allocator(MemorySpace space) override { return inner_->allocator(space); }
  Stream& compute_stream() override { return inner_->compute_stream(); }
  Stream& copy_stream() override { return inner_->copy_stream(); }
  std::unique_ptr<Stream> make_stream(std::string name) override {
    return inner_->make_stream(std::move(name));
  }
  void fill(Stream& stream, void* destination, DType dtype, std::size_t count,
            float value) override {
    inner_->fill(stream, destination, dtype, count, value);
  }
  void copy(Stream& stream, const void* source, void* destination,
            std::size_t size_bytes) override {
    inner_->copy(stream, source, destination, size_bytes);
  }
  void convert(Stream& stream, const void* source, DType source_dtype, void* destination,
               DType destination_dtype, std::size_t count) override {
    inner_->convert(stream, source, source_dtype, destination, destination_dtype, count);
  }
  void scale(Stream& stream, const void* source, DType source_dtype, void* destination,
             DType destination_dtype, std::size_t count, float alpha) override {
    inner_->scale(stream, source, source_dtype, destination, destination_dtype, count, alpha);
  }
  void axpy(Stream& stream, const void* x, DType x_dtype, void* y, DType y_dtype, std::size_t count,
            float alpha) override {
    inner_->axpy(stream, x, x_dtype, y, y_dtype, count, alpha);
  }
  void sum_of_squares(Stream& stream, const void* x, DType dtype, std::size_t count,
                      SquaresResult* result) override {
    inner_->sum_of_squares(stream, x, dtype, count, result);
  }

 private:
  std::unique_ptr<DeviceContext> inner_;
};

}  // namespace zero::testing
