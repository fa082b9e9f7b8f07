// A build without liburing: make_nvme_swap_store() throws naming the package to install.
#include <gtest/gtest.h>

#include <string>

#include "zero/core/error.h"
#include "zero/offload/nvme_swap_store.h"

namespace zero {
namespace {

TEST(NvmeSwapUnavailable, ErrorNamesThePackage) {
  NvmeSwapOptions options;
  options.nvme_path = "/local_nvme";
  try {
    make_nvme_swap_store(options);
    FAIL() << "expected an error";
  } catch (const Error& error) {
    const std::string text = error.what();
    EXPECT_NE(text.find("liburing-dev"), std::string::npos) << text;
    EXPECT_NE(text.find("/local_nvme"), std::string::npos) << text;
  }
  remove_swap_directories();  // a no-op here
}

}  // namespace
}  // namespace zero
