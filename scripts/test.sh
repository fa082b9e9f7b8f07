#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test (unit, mpi at 2 and 4 ranks, cuda tests
# skip without a GPU, golden tests skip without their Python reference), then the Python module's
# pytest suite (bindings/python/tests) on the module the build made. ctest prints its summary
# line; then this script lists the skipped tests, and its closing line counts both suites. Under
# CI=true (what the CI runner sets) a skipped test that is not labelled cuda fails the run: only
# GPU tests may skip in CI (and tests missing the shared data folder, both suites). In CI the
# sanitizer builds run too (scripts/sanitize.sh; ZERO_SANITIZERS, below). Extra arguments go to
# scripts/build.sh (CMake); ZERO_PARSE_ONLY=1 (scripts/check_doc_commands.py) checks them there
# and runs nothing.
set -euo pipefail
cd "$(dirname "$0")/.."
[ "${ZERO_PARSE_ONLY:-0}" != 1 ] || exec bash scripts/build.sh "$@"
# One venv path for setup (scripts/setup_venv.sh) and cmake (cmake/ZeroTesting.cmake), even where
# HOME is unset (bash's ~ then reads the password database).
export ZERO_VENV=${ZERO_VENV:-${HOME:-$(cd ~ && pwd)}/.cache/zero/venv}
bash scripts/setup.sh
bash scripts/build.sh "$@"
source_dir=$(pwd)
cd "${ZERO_BUILD_DIR:-build}"
log=$(mktemp)
py_report=$(mktemp)
trap 'rm -f "$log" "$py_report"' EXIT
status=0
read -ra extra <<<"${ZERO_CTEST_ARGS:-}"  # e.g. ZERO_CTEST_ARGS="-L golden"
ctest --output-on-failure -j "$(nproc)" --timeout 900 "${extra[@]}" 2>&1 | tee "$log" || status=$?
# ctest's "did not run" list: "  12 - name (Skipped)".
mapfile -t skipped < <(sed -n 's/^[[:space:]]*[0-9]\+ - \([^ ]*\) (Skipped)$/\1/p' "$log")
# The Python module's tests, with the interpreter the module was built for. Prints "passed failed
# skipped not_allowed" into $py_report (not_allowed: skipped for another reason than an absent
# shared data folder); the module not built counts as one failed test under CI.
run_pytest() {
  if [ ! -f bindings/python/python_executable ] || [ ! -d bindings/python/zero ]; then
    echo "test.sh: the Python module was not built (nanobind or python3-dev missing): its tests did not run"
    if [ "${CI:-}" = true ]; then echo "0 1 0 0" >"$py_report"; else echo "0 0 0 0" >"$py_report"; fi
    return
  fi
  local python junit
  python=$(cat bindings/python/python_executable)
  junit=$(mktemp)
  echo "test.sh: bindings/python/tests (pytest, $python)"
  PYTHONPATH="$(pwd)/bindings/python${PYTHONPATH:+:$PYTHONPATH}" ZERO_CLI="$(pwd)/tools/zero" \
    ZERO_SHARED_DATA="${ZERO_SHARED_DATA:-$source_dir/../shared/data}" \
    "$python" -m pytest -q -rs -p no:cacheprovider --junitxml="$junit" \
    "$source_dir/bindings/python/tests" || true
  "$python" - "$junit" >"$py_report" <<'PY' || echo "0 1 0 0" >"$py_report"
import sys
import xml.etree.ElementTree as ElementTree
cases = ElementTree.parse(sys.argv[1]).getroot().iter("testcase")
passed = failed = skipped = not_allowed = 0
for case in cases:
    if case.find("failure") is not None or case.find("error") is not None:
        failed += 1
    elif case.find("skipped") is not None:
        skipped += 1
        message = case.find("skipped").get("message", "")
        not_allowed += not ("shared data" in message and "not present" in message)
    else:
        passed += 1
print(passed, failed, skipped, not_allowed)
PY
  rm -f "$junit"
}
run_pytest
read -r py_passed py_failed py_skipped py_not_allowed <"$py_report"
if [ "$py_failed" -gt 0 ]; then status=1; fi
if [ "${CI:-}" = true ] && [ "$py_not_allowed" -gt 0 ]; then
  echo "test.sh: FAILED: in CI pytest may skip only for absent shared data; $py_not_allowed other skip(s) (listed above)" >&2
  status=1
fi
# The sanitizer builds (scripts/sanitize.sh: ASan+UBSan and TSan over a subset of the tests, each
# in its own build folder), in CI by default: ZERO_SANITIZERS="asan tsan" (CI), "" elsewhere;
# "none" skips them. Their tests count in the closing line. Under CI sanitize.sh itself fails on a
# target of its subset that was not made, a listed test that did not run, and a skip its
# allowed_skips does not name with that reason (no summary line then counts as one failure here).
san_passed=0 san_failed=0 san_skipped=0
read -ra sanitizers <<<"${ZERO_SANITIZERS-$([ "${CI:-}" = true ] && echo "asan tsan")}"
for kind in "${sanitizers[@]}"; do
  [ "$kind" = none ] && continue
  san_log=$(mktemp)
  bash "$source_dir/scripts/sanitize.sh" "$kind" 2>&1 | tee "$san_log" || status=1
  p="" f="" k=""
  read -r p f k < <(sed -n "s/^sanitize.sh $kind: \([0-9]*\) passed, \([0-9]*\) failed, \([0-9]*\) skipped$/\1 \2 \3/p" "$san_log") || true
  san_passed=$((san_passed + ${p:-0}))
  san_failed=$((san_failed + ${f:-1}))  # no count: the build failed
  san_skipped=$((san_skipped + ${k:-0}))
  rm -f "$san_log"
done
# The closing line counts skipped tests apart from passed ones (ctest's own line does not), ctest's,
# pytest's and the sanitizer builds' together.
summary() {
  local total failed
  read -r failed total < <(sed -n 's/.* tests passed, \([0-9]*\) tests\? failed out of \([0-9]*\).*/\1 \2/p' "$log")
  echo "test.sh: $((${total:-0} - ${failed:-0} - ${#skipped[@]} + py_passed + san_passed)) passed, $((${failed:-0} + py_failed + san_failed)) failed, $((${#skipped[@]} + py_skipped + san_skipped)) skipped"
}
if [ ${#skipped[@]} -eq 0 ]; then
  summary
  exit "$status"
fi
echo "test.sh: ${#skipped[@]} test(s) skipped:"
# Labels of every test, from ctest's own listing.
labels=$(ctest --show-only=json-v1 | python3 -c '
import json, sys
for test in json.load(sys.stdin)["tests"]:
    labels = [p["value"] for p in test.get("properties", []) if p["name"] == "LABELS"]
    print(test["name"], ",".join(labels[0] if labels else []))')
not_allowed=()
for name in "${skipped[@]}"; do
  test_labels=$(awk -v n="$name" '$1 == n { print $2 }' <<<"$labels")
  echo "  $name (labels: ${test_labels:-none})"
  case ",$test_labels," in
    *,cuda,*) ;;
    *) not_allowed+=("$name") ;;
  esac
done
if [ "${CI:-}" = true ] && [ ${#not_allowed[@]} -gt 0 ]; then
  # ctest does not show a skipped test's output: run each again (a skip is quick) for the reason.
  # A test whose every skipped case names an absent shared data folder (ZERO_REQUIRE_SHARED_DATA:
  # "shared data ... not present") is excused: that folder lives beside the checkout on the
  # development machines only. Any other reason (a Python package setup should have installed, a
  # reference that failed) fails the run.
  failing=()
  for name in "${not_allowed[@]}"; do
    # (no `head` in these pipelines: under pipefail its SIGPIPE would end the script)
    reasons=$(ctest -R "^${name}\$" -V 2>&1 | sed -n 's/^[0-9]*: //; /zero: skipped \|: Skipped$/p') || true
    skipped_cases=$(grep -c 'zero: skipped [^ ]*: ' <<<"$reasons" || true)
    data_cases=$(grep -c 'zero: skipped [^ ]*: shared data .* not present' <<<"$reasons" || true)
    if [ "$skipped_cases" -gt 0 ] && [ "$skipped_cases" -eq "$data_cases" ]; then
      echo "test.sh: $name skipped for absent shared data only (allowed)"
    else
      echo "test.sh: why $name skipped:"
      sed -n '1,20s/^/    /p' <<<"$reasons"
      failing+=("$name")
    fi
  done
  if [ ${#failing[@]} -gt 0 ]; then
    echo "test.sh: FAILED: in CI only cuda tests (and tests missing the shared data folder) may skip; these skipped: ${failing[*]}" >&2
    [ "$status" -ne 0 ] || status=1
  fi
fi
summary
exit "$status"
