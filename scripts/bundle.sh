#!/usr/bin/env bash
# Bundles executables with the shared libraries they need into one folder that runs on a Linux
# x86-64 machine without this machine's packages (the GPU machine: no Debian packages, its own
# NVIDIA driver):
#
#   scripts/bundle.sh --output DIR [options] EXECUTABLE...
#
#   DIR/bin/NAME       wrapper: puts DIR/lib first on the library path and runs DIR/libexec/NAME
#   DIR/libexec/NAME   the executable, as built (debug info stripped unless --keep-debug)
#   DIR/lib/           every library ldd resolves for the executables (all of them transitively),
#                      copied under its soname, symlinks resolved (Debian's alternatives)
#   DIR/MANIFEST       each file's source path, the newest GLIBC_x.y symbol version the bundle needs
#
# Which libraries are the target's own and never bundled:
#   - glibc (ld-linux, libc, libm, libdl, libpthread, librt, libutil, libresolv, libanl, libmvec,
#     libnss_*): the loader and libc must come from one glibc, and every Linux has one. The
#     wrapper refuses, naming both versions, when the target's glibc is older than the newest
#     GLIBC_ version the bundle needs; --with-glibc bundles glibc too and runs the executables
#     through the bundled loader, for targets with an older glibc (then /proc/self/exe names the
#     loader: the programs that re-exec themselves through it, such as gpt2_bench's OpenBLAS
#     restart, need OPENBLAS_CORETYPE set beforehand).
#   - the NVIDIA driver (libcuda, libnvidia-*): it must match the target's kernel module.
# Everything else is bundled, the GCC runtime (libstdc++, libgcc_s, libgomp) included: the
# target's may be older than the compiler's. Libraries that are loaded with dlopen and so are
# invisible to ldd are added by rule: cuDNN's sub-libraries (libcudnn_*.so.N beside libcudnn.so.N)
# and NVRTC, which cuDNN's runtime-compiled engines load; cuBLASLt and cuDNN themselves where an
# executable names them for dlopen.
#
# Open MPI: when libmpi is bundled, so is what MPI_Init and mpirun load at run time: Open MPI's
# components (its pkglibdir, with their libraries), help texts and mca-params.conf under DIR/mpi/,
# and orterun and orted as DIR/bin/mpirun and DIR/bin/orted. Every wrapper points Open MPI there
# (OPAL_PREFIX, OPAL_LIBDIR, OPAL_PKGLIBDIR, ..., overriding the target's), so
# `DIR/bin/mpirun -np 4 DIR/bin/zero ...` runs where Open MPI is not installed; PMIx's components
# likewise (PMIX_PREFIX, PMIX_PKGLIBDIR, ...). Not bundled: UCX's transport modules (on
# InfiniBand hardware Open MPI falls back to TCP and shared memory) and hwloc's plugins
# (HWLOC_PLUGINS_PATH points at an empty folder: topology without PCI devices).
#
# Options:
#   --output DIR       the bundle folder (created; must be empty or absent)
#   --exclude REGEX    leave out libraries whose file name matches (extended regex; repeatable),
#                      e.g. 'libnccl|libcublas' when the target provides them (then set
#                      LD_LIBRARY_PATH there); the MANIFEST lists what was left out
#   --target-cuda      leave the CUDA toolkit's libraries to the target (cudart, cuBLAS/cuBLASLt,
#                      cuDNN, NCCL, NVRTC, nvJitLink, cuFFT/cuRAND/cuSOLVER/cuSPARSE, CUPTI): 800 MB
#                      of the bundle otherwise. Set LD_LIBRARY_PATH there to where they are, e.g.
#                      the lib folders of the nvidia-* wheels beside the target's PyTorch (the same
#                      CUDA major version as the build's)
#   --with-glibc       bundle glibc and run through the bundled loader (see above)
#   --keep-debug       keep the executables' debug info (RelWithDebInfo binaries are ~10x larger)
#
# The wrappers take ZERO_BUNDLE_LDD=1 to print the libraries the program would load (the
# loader's trace, as ldd) instead of running it: scripts/bundle_test.sh checks with it that a
# bundle loads nothing from outside itself but glibc and the driver.
set -euo pipefail

usage() {
  sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'
  exit "${1:-2}"
}

output=""
excludes=()
with_glibc=0
keep_debug=0
executables=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --output) output=${2:?--output needs a folder}; shift 2 ;;
    --output=*) output=${1#--output=}; shift ;;
    --exclude) excludes+=("${2:?--exclude needs a regex}"); shift 2 ;;
    --exclude=*) excludes+=("${1#--exclude=}"); shift ;;
    --with-glibc) with_glibc=1; shift ;;
    --target-cuda)
      excludes+=('^lib(cudart|cublas|cublasLt|cudnn[_a-z]*|nccl|nvrtc[-a-z]*|nvJitLink|cufft|cufftw|curand|cusolver|cusolverMg|cusparse|cupti|nvblas)\.so')
      shift ;;
    --keep-debug) keep_debug=1; shift ;;
    -h|--help) usage 0 ;;
    --) shift; executables+=("$@"); break ;;
    -*) echo "bundle.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
    *) executables+=("$1"); shift ;;
  esac
done
[[ -n "$output" ]] || { echo "bundle.sh: --output DIR is required (see --help)" >&2; exit 2; }
[[ ${#executables[@]} -gt 0 ]] || { echo "bundle.sh: no executables given (see --help)" >&2; exit 2; }
for tool in ldd objdump readlink strip; do
  command -v "$tool" >/dev/null || { echo "bundle.sh: '$tool' not found (binutils, libc-bin)" >&2; exit 2; }
done
for exe in "${executables[@]}"; do
  [[ -f "$exe" && -x "$exe" ]] || { echo "bundle.sh: '$exe' is not an executable file" >&2; exit 2; }
  head -c 4 "$exe" | grep -q 'ELF' || { echo "bundle.sh: '$exe' is not an ELF executable" >&2; exit 2; }
done
if [[ -e "$output" && -n "$(ls -A "$output" 2>/dev/null)" ]]; then
  echo "bundle.sh: '$output' exists and is not empty" >&2
  exit 2
fi
mkdir -p "$output/bin" "$output/libexec" "$output/lib"
output=$(cd "$output" && pwd)

glibc_pattern='^(ld-linux[-a-z0-9_]*\.so\.[0-9]+|libc\.so\.6|libm\.so\.6|libdl\.so\.2|libpthread\.so\.0|librt\.so\.1|libutil\.so\.1|libresolv\.so\.2|libanl\.so\.1|libmvec\.so\.1|libBrokenLocale\.so\.1|libnss_[a-z0-9_]+\.so\.2|libthread_db\.so\.1)$'
driver_pattern='^(libcuda\.so(\.[0-9]+)*|libnvidia-[a-z0-9_.-]+\.so(\.[0-9.]+)?|libdxcore\.so)$'

is_excluded() {
  local name=$1 pattern
  for pattern in "${excludes[@]+"${excludes[@]}"}"; do
    [[ "$name" =~ $pattern ]] && return 0
  done
  return 1
}

declare -A bundled=()   # soname -> source path
declare -A left_out=()  # soname -> why
# Adds the libraries `ldd FILE...` resolves (already transitive) to the bundle.
collect() {
  local line name path
  while IFS= read -r line; do
    name="" path=""
    if [[ "$line" =~ ^[[:space:]]*([^[:space:]]+)[[:space:]]=\>[[:space:]]not[[:space:]]found ]]; then
      echo "bundle.sh: $* need(s) ${BASH_REMATCH[1]}, which is not found on this machine" >&2
      exit 1
    elif [[ "$line" =~ ^[[:space:]]*([^[:space:]]+)[[:space:]]=\>[[:space:]](/[^[:space:]]+) ]]; then
      name=${BASH_REMATCH[1]} path=${BASH_REMATCH[2]}
    elif [[ "$line" =~ ^[[:space:]]*(/[^[:space:]]+)[[:space:]]\( ]]; then
      path=${BASH_REMATCH[1]} name=$(basename "$path")
    else
      continue  # linux-vdso and the like
    fi
    [[ -n "${bundled[$name]:-}" || -n "${left_out[$name]:-}" ]] && continue
    if [[ "$name" =~ $driver_pattern ]]; then
      left_out[$name]="the NVIDIA driver (the target's own)"
    elif [[ "$name" =~ $glibc_pattern && $with_glibc -eq 0 ]]; then
      left_out[$name]="glibc (the target's own)"
    elif is_excluded "$name"; then
      left_out[$name]="--exclude"
    else
      bundled[$name]=$(readlink -f "$path")
    fi
  done < <(ldd "$@" 2>&1)
}

for exe in "${executables[@]}"; do collect "$exe"; done
# dlopen'ed by soname, so invisible to ldd: cuBLASLt (the GPT-2 GEMMs load it at the first GEMM,
# libzero reads its version) and cuDNN, named in the executables' strings.
while IFS= read -r soname; do
  [[ -n "${bundled[$soname]:-}" || -n "${left_out[$soname]:-}" ]] && continue
  if is_excluded "$soname"; then left_out[$soname]="--exclude"; continue; fi
  path=$(ldconfig -p 2>/dev/null | awk -v name="$soname" '$1 == name { print $NF; exit }')
  for directory in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib; do
    [[ -z "$path" && -e "$directory/$soname" ]] && path=$directory/$soname
  done
  [[ -n "$path" ]] || { echo "bundle.sh: the executables dlopen $soname, which is not found on this machine (--exclude it when the target has it)" >&2; exit 1; }
  bundled[$soname]=$(readlink -f "$path")
  collect "$path"
done < <(grep -aoh 'lib\(cublasLt\|cudnn\)\.so\.[0-9][0-9]*' "${executables[@]}" | sort -u)
# dlopen'ed companions: cuDNN's sub-libraries and NVRTC beside libcudnn.so.N.
for name in "${!bundled[@]}"; do
  if [[ "$name" =~ ^libcudnn\.so\.([0-9]+)$ ]]; then
    major=${BASH_REMATCH[1]}
    directory=$(dirname "${bundled[$name]}")
    for companion in "$directory"/libcudnn_*.so."$major" "$directory"/libnvrtc.so.* \
                     "$directory"/libnvrtc-builtins.so.*; do
      [[ -e "$companion" ]] || continue
      companion_name=$(basename "$companion")
      [[ "$companion_name" =~ \.so\.[0-9]+$ ]] || continue  # sonames only, not full versions
      is_excluded "$companion_name" && { left_out[$companion_name]="--exclude"; continue; }
      [[ -n "${bundled[$companion_name]:-}" ]] && continue
      bundled[$companion_name]=$(readlink -f "$companion")
      collect "$companion"
    done
  fi
done

# Open MPI's run-time pieces when libmpi is bundled (see above).
mpi_root=""
if printf '%s\n' "${!bundled[@]}" | grep -q '^libmpi\.so\.'; then
  command -v ompi_info >/dev/null || {
    echo "bundle.sh: libmpi is bundled but ompi_info (Open MPI) is not found; other MPIs are not supported (--exclude libmpi)" >&2
    exit 2
  }
  mpi_path() { ompi_info --path "$1" --parsable | sed -n "s/^path:$1://p"; }
  mpi_pkglibdir=$(mpi_path pkglibdir)
  mpi_pkgdatadir=$(mpi_path pkgdatadir)
  mpi_sysconfdir=$(mpi_path sysconfdir)
  mpi_bindir=$(mpi_path bindir)
  [[ -d "$mpi_pkglibdir" ]] || { echo "bundle.sh: Open MPI's component folder '$mpi_pkglibdir' is missing" >&2; exit 1; }
  for tool in orterun orted; do
    [[ -x "$mpi_bindir/$tool" ]] || { echo "bundle.sh: Open MPI's $mpi_bindir/$tool is missing" >&2; exit 1; }
  done
  mkdir -p "$output/mpi/components" "$output/mpi/share" "$output/mpi/etc"
  cp "$mpi_pkglibdir"/*.so "$output/mpi/components/"
  collect "$mpi_pkglibdir"/*.so
  cp -r "$mpi_pkgdatadir" "$output/mpi/share/openmpi"
  for conf in "$mpi_sysconfdir"/*.conf; do [[ -e "$conf" ]] && cp "$conf" "$output/mpi/etc/"; done
  for tool in orterun orted; do collect "$mpi_bindir/$tool"; done
  # PMIx's own components and help texts (Debian: pmix2/lib/pmix/, pmix2/share/pmix/).
  mkdir -p "$output/mpi/pmix/components" "$output/mpi/pmix/share" "$output/mpi/hwloc"
  if [[ -n "${bundled[libpmix.so.2]:-}" ]]; then
    pmix_libdir=$(dirname "${bundled[libpmix.so.2]}")
    for component in "$pmix_libdir"/pmix/*.so; do
      [[ -e "$component" ]] || continue
      cp "$component" "$output/mpi/pmix/components/"
      collect "$component"
    done
    [[ -d "$pmix_libdir/../share/pmix" ]] && cp -r "$pmix_libdir/../share/pmix" "$output/mpi/pmix/share/pmix"
  fi
  mpi_root=$output/mpi
fi

loader=""
for name in "${!bundled[@]}"; do
  cp "${bundled[$name]}" "$output/lib/$name"
  chmod u+w "$output/lib/$name"
  [[ "$name" =~ ^ld-linux ]] && loader=$name
done
if [[ $with_glibc -eq 1 && -z "$loader" ]]; then
  echo "bundle.sh: --with-glibc but ldd named no ld-linux loader" >&2
  exit 1
fi

# The newest GLIBC_x.y symbol version any bundled file needs (what the target's glibc must have).
glibc_needed=$( (for f in "${executables[@]}" "$output"/lib/* "$output"/mpi/components/*; do
  [[ -f "$f" ]] && objdump -T "$f" 2>/dev/null; done) |
  grep -o 'GLIBC_[0-9][0-9.]*' | sed 's/GLIBC_//' | sort -uV | tail -n 1)
glibc_needed=${glibc_needed:-2.2.5}

mpi_environment=""
if [[ -n "$mpi_root" ]]; then
  mpi_environment='OPAL_PREFIX="$root/mpi"
OPAL_EXEC_PREFIX="$root/mpi"
OPAL_BINDIR="$root/bin"
OPAL_LIBDIR="$root/lib"
OPAL_PKGLIBDIR="$root/mpi/components"
OPAL_DATAROOTDIR="$root/mpi/share"
OPAL_DATADIR="$root/mpi/share"
OPAL_PKGDATADIR="$root/mpi/share/openmpi"
OPAL_SYSCONFDIR="$root/mpi/etc"
export OPAL_PREFIX OPAL_EXEC_PREFIX OPAL_BINDIR OPAL_LIBDIR OPAL_PKGLIBDIR OPAL_DATAROOTDIR OPAL_DATADIR OPAL_PKGDATADIR OPAL_SYSCONFDIR
PMIX_PREFIX="$root/mpi/pmix"
PMIX_LIBDIR="$root/lib"
PMIX_PKGLIBDIR="$root/mpi/pmix/components"
PMIX_PKGDATADIR="$root/mpi/pmix/share/pmix"
HWLOC_PLUGINS_PATH="$root/mpi/hwloc"
export PMIX_PREFIX PMIX_LIBDIR PMIX_PKGLIBDIR PMIX_PKGDATADIR HWLOC_PLUGINS_PATH'
fi

# add_program NAME SOURCE: DIR/libexec/NAME (a copy of SOURCE) and its wrapper DIR/bin/NAME.
add_program() {
  local name=$1 source=$2 run_line list_line glibc_check=""
  if [[ -e "$output/libexec/$name" ]]; then
    echo "bundle.sh: two executables named '$name'" >&2
    exit 2
  fi
  cp "$source" "$output/libexec/$name"
  chmod u+w "$output/libexec/$name"
  [[ $keep_debug -eq 1 ]] || strip --strip-debug "$output/libexec/$name"
  if [[ $with_glibc -eq 1 ]]; then
    run_line="exec \"\$root/lib/$loader\" --library-path \"\$LD_LIBRARY_PATH\" --argv0 \"\$0\" \"\$root/libexec/$name\" \"\$@\""
    list_line="exec \"\$root/lib/$loader\" --list --library-path \"\$LD_LIBRARY_PATH\" \"\$root/libexec/$name\""
  else
    run_line="exec \"\$root/libexec/$name\" \"\$@\""
    list_line="LD_TRACE_LOADED_OBJECTS=1; export LD_TRACE_LOADED_OBJECTS; exec \"\$root/libexec/$name\""
    glibc_check="need=$glibc_needed
have=\$(getconf GNU_LIBC_VERSION 2>/dev/null | sed 's/^glibc //')
if [ -n \"\$have\" ] && [ \"\$(printf '%s\\n%s\\n' \"\$need\" \"\$have\" | sort -V | head -n 1)\" != \"\$need\" ]; then
  echo \"$name (bundle): needs glibc >= \$need, this machine has \$have; rebuild the bundle with scripts/bundle.sh --with-glibc\" >&2
  exit 127
fi"
  fi
  cat >"$output/bin/$name" <<EOF
#!/bin/sh
# $name from a zero bundle (scripts/bundle.sh): the bundle's libraries first, then the target's.
root=\$(CDPATH= cd -- "\$(dirname -- "\$0")/.." && pwd)
$glibc_check
$mpi_environment
LD_LIBRARY_PATH="\$root/lib\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}"
export LD_LIBRARY_PATH
if [ "\${ZERO_BUNDLE_LDD:-0}" = 1 ]; then
  $list_line
fi
$run_line
EOF
  chmod 755 "$output/bin/$name"
}

for exe in "${executables[@]}"; do add_program "$(basename "$exe")" "$exe"; done
if [[ -n "$mpi_root" ]]; then
  add_program mpirun "$mpi_bindir/orterun"
  add_program orted "$mpi_bindir/orted"
fi

{
  echo "# zero bundle made by scripts/bundle.sh on $(uname -n) ($(getconf GNU_LIBC_VERSION 2>/dev/null))"
  echo "glibc_needed $glibc_needed"
  echo "with_glibc $with_glibc"
  for exe in "${executables[@]}"; do echo "executable $(basename "$exe") $(readlink -f "$exe")"; done
  if [[ -n "$mpi_root" ]]; then
    echo "open_mpi $(ompi_info --version 2>/dev/null | head -n 1) components from $mpi_pkglibdir"
  fi
  for name in $(printf '%s\n' "${!bundled[@]}" | sort); do echo "library $name ${bundled[$name]}"; done
  for name in $(printf '%s\n' "${!left_out[@]}" | sort); do echo "left_out $name ${left_out[$name]}"; done
} >"$output/MANIFEST"

size=$(du -sh "$output" | cut -f1)
if [[ $with_glibc -eq 1 ]]; then glibc_note="glibc bundled"; else glibc_note="needs glibc >= $glibc_needed"; fi
echo "bundle.sh: ${#executables[@]} executable(s)${mpi_root:+ and Open MPI mpirun}, ${#bundled[@]} libraries, ${#left_out[@]} left to the target, $size in $output ($glibc_note)"
