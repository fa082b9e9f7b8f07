// Checks the CPU kernel tests share (GPT-2's, the Llama family's): every element near its scalar
// twin's, and central differences of a scalar loss against an analytic gradient, in double.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <vector>

namespace zero::testing {

// Every element within tolerance · (1 + |expected|).
inline void expect_near_all(const std::vector<float>& actual, const std::vector<float>& expected,
                            double tolerance, const char* what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  for (std::size_t i = 0; i < actual.size(); ++i)
    ASSERT_NEAR(actual[i], expected[i], tolerance * (1.0 + std::abs(expected[i])))
        << what << " element " << i;
}

// Central differences of loss(x) = Σ f(x)·probe against the analytic gradient, for every element
// of x (changed and restored in place).
inline void check_gradient(std::vector<double>& x, const std::vector<double>& analytic,
                           const std::function<double()>& loss, const char* what) {
  ASSERT_EQ(x.size(), analytic.size());
  constexpr double kStep = 1e-6;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double saved = x[i];
    x[i] = saved + kStep;
    const double plus = loss();
    x[i] = saved - kStep;
    const double minus = loss();
    x[i] = saved;
    const double numeric = (plus - minus) / (2 * kStep);
    ASSERT_NEAR(analytic[i], numeric, 1e-6 * (1.0 + std::abs(numeric))) << what << " element " << i;
  }
}

inline double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double sum = 0;
  for (std::size_t i = 0; i < a.size(); ++i) sum += a[i] * b[i];
  return sum;
}

}  // namespace zero::testing
