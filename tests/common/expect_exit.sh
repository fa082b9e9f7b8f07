#!/bin/sh
# Runs a test's command, then prints its exit status as the output's last line. ctest ignores the
# exit status of a test that passes on its output (PASS_REGULAR_EXPRESSION), so such a test runs
# under this script (zero_add_output_test, cmake/ZeroTesting.cmake), whose regex ends in
# "expect_exit: exit status CODE as expected": a crash or an error after the expected output
# fails it. Exit 77 (a test's own skip) passes through for SKIP_RETURN_CODE.
#   expect_exit.sh CODE COMMAND [ARGUMENT...]
expected=$1
shift
"$@"
status=$?
if [ "$status" -eq "$expected" ]; then
  echo "expect_exit: exit status $status as expected"
  exit 0
fi
if [ "$status" -eq 77 ]; then
  echo "expect_exit: skipped (exit 77)"
  exit 77
fi
echo "expect_exit: FAILED: exit status $status, expected $expected"
exit 1
