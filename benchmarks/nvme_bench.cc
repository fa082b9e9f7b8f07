// NVMe swap throughput: the SwapStore (make_nvme_swap_store: liburing, O_DIRECT) writing and
// reading large regions, beside fio doing the same I/O on the same folder (ioengine=io_uring,
// direct=1, the same block size, queue depth and number of jobs = rings). For each setting
// `block_size:queue_depth[:rings]` and each round, the store writes all regions at once (every
// write started, then wait_all), then reads them back, timed from the first start to wait_all;
// fio then writes and reads the same number of bytes with numjobs = rings, one file per job.
// Writes are overwrites by default, as the engine's are after its first step: the store writes
// its regions once untimed, fio lays its files out first (--overwrite=1); --first_write times
// the first write into freshly reserved (fallocated) space instead, for both.
// Rounds alternate zero and fio so a slow phase of a shared disk falls on both. MB = 10^6 bytes.
// Reported: the median over rounds, and one machine-readable line per setting:
//   RESULT bs=.. qd=.. rings=.. zero_write_MBps=.. fio_write_MBps=.. zero_read_MBps=..
//   fio_read_MBps=..
// Run by hand, never as a test (fio from Debian's `fio` package; without it only zero is timed):
//   build/benchmarks/nvme_bench --dir /path/on/nvme
//   build/benchmarks/nvme_bench --dir build --region_mib 256 --regions 4 --rounds 3
//       (the defaults; --settings 131072:8,1048576:8,1048576:32,1048576:8:2 is the default list)
// Measured (2026-11-22, the shared 2-core development VM, ext4 on a virtio disk, load 8-10 from
// other builds; ±40 % between repeats, fio alone too), `nvme_bench --dir build --rounds 5`, MB/s:
//   bs 128 KiB qd 8  rings 1: zero write 1092, fio 1100; zero read 1451, fio 1064
//   bs   1 MiB qd 8  rings 1: zero write 2142, fio 2089; zero read 1400, fio 1514
//   bs   1 MiB qd 32 rings 1: zero write 1895, fio 1361; zero read 1261, fio  965
//   bs   1 MiB qd 8  rings 2: zero write 2025, fio 1945; zero read 1316, fio 1487
// With --first_write: writes zero 874 / 1662 / 1752 / 1687, fio 1275 / 1928 / 1721 / 1829 (the
// 128 KiB first write ran below fio in 9 of 10 runs; see docs/nvme_store.md, "Measured").
#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "zero/core/error.h"
#include "zero/offload/nvme_swap_store.h"

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

struct Setting {
  std::int64_t block_size = 1 << 20;
  std::int64_t queue_depth = 8;
  std::int64_t rings = 1;
};

struct BenchFlags {
  fs::path dir = fs::current_path();
  std::int64_t region_mib = 256;
  std::int64_t regions = 4;
  std::int64_t rounds = 3;
  std::vector<Setting> settings = {
      {131072, 8, 1}, {1048576, 8, 1}, {1048576, 32, 1}, {1048576, 8, 2}};
  bool fio = true;
  bool huge_pages = false;   // madvise(MADV_HUGEPAGE) on zero's host buffers
  bool first_write = false;  // time the first write into fresh space instead of an overwrite
};

void print_usage() {
  std::printf(
      "nvme_bench: NVMe swap store write/read MB/s beside fio on the same folder\n"
      "  --dir PATH          folder on the drive to measure (default: the working directory)\n"
      "  --region_mib N      size of each region (default 256)\n"
      "  --regions N         regions moved at once (default 4)\n"
      "  --rounds N          rounds per setting; the median is reported (default 3)\n"
      "  --settings LIST     block_size:queue_depth[:rings],... (default "
      "131072:8,1048576:8,1048576:32,1048576:8:2)\n"
      "  --no_fio            time only zero\n"
      "  --huge_pages        madvise(MADV_HUGEPAGE) zero's host buffers (transparent huge "
      "pages)\n");
}

std::vector<Setting> parse_settings(const std::string& text) {
  std::vector<Setting> settings;
  std::stringstream items(text);
  std::string item;
  while (std::getline(items, item, ',')) {
    Setting setting;
    std::vector<std::int64_t> values;
    std::stringstream parts(item);
    std::string part;
    while (std::getline(parts, part, ':')) values.push_back(std::stoll(part));
    ZERO_CHECK(values.size() == 2 || values.size() == 3, "--settings: \"", item,
               "\" is not block_size:queue_depth[:rings]");
    setting.block_size = values[0];
    setting.queue_depth = values[1];
    if (values.size() == 3) setting.rings = values[2];
    settings.push_back(setting);
  }
  ZERO_CHECK(!settings.empty(), "--settings: empty list");
  return settings;
}

BenchFlags parse_flags(int argc, char** argv) {
  BenchFlags flags;
  for (int i = 1; i < argc; ++i) {
    std::string name = argv[i];
    std::optional<std::string> value;
    if (auto eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
    }
    auto next = [&]() -> std::string {
      if (value) return *value;
      ZERO_CHECK(i + 1 < argc, name, " needs a value");
      return argv[++i];
    };
    if (name == "--help" || name == "-h") {
      print_usage();
      std::exit(0);
    } else if (name == "--dir") {
      flags.dir = next();
    } else if (name == "--region_mib") {
      flags.region_mib = std::stoll(next());
    } else if (name == "--regions") {
      flags.regions = std::stoll(next());
    } else if (name == "--rounds") {
      flags.rounds = std::stoll(next());
    } else if (name == "--settings") {
      flags.settings = parse_settings(next());
    } else if (name == "--no_fio") {
      flags.fio = false;
    } else if (name == "--huge_pages") {
      flags.huge_pages = true;
    } else if (name == "--first_write") {
      flags.first_write = true;
    } else {
      ZERO_THROW("unknown flag ", name, " (see --help)");
    }
  }
  ZERO_CHECK(flags.region_mib > 0 && flags.regions > 0 && flags.rounds > 0,
             "--region_mib, --regions and --rounds must be positive");
  return flags;
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

struct Rates {
  double write_mbps = 0;
  double read_mbps = 0;
};

struct FreeDeleter {
  void operator()(void* pointer) const { std::free(pointer); }
};

// Writes every region at once, waits, then reads them all back and checks one byte per block.
Rates time_zero(const BenchFlags& flags, const Setting& setting) {
  zero::NvmeSwapOptions options;
  options.nvme_path = flags.dir;
  options.aio.block_size = setting.block_size;
  options.aio.queue_depth = setting.queue_depth;
  options.aio.intra_op_parallelism = setting.rings;
  auto store = zero::make_nvme_swap_store(options);
  const std::size_t region_bytes = static_cast<std::size_t>(flags.region_mib) << 20;
  std::vector<int> regions;
  std::vector<std::unique_ptr<unsigned char, FreeDeleter>> buffers;
  for (std::int64_t r = 0; r < flags.regions; ++r) {
    regions.push_back(store->add_region("bench " + std::to_string(r), region_bytes,
                                        zero::MemoryCategory::kOptimizerState));
    void* pointer = nullptr;
    ZERO_CHECK(
        posix_memalign(&pointer, store->io_alignment(), store->padded_bytes(regions.back())) == 0,
        "out of memory for the host buffers");
    buffers.emplace_back(static_cast<unsigned char*>(pointer));
    if (flags.huge_pages) madvise(pointer, store->padded_bytes(regions.back()), MADV_HUGEPAGE);
    std::memset(pointer, static_cast<int>(r + 1), store->padded_bytes(regions.back()));
  }
  const double total = static_cast<double>(region_bytes) * static_cast<double>(flags.regions);
  Rates rates;
  if (!flags.first_write) {  // steady state: the regions were written before (untimed)
    for (std::size_t r = 0; r < regions.size(); ++r) store->write(regions[r], buffers[r].get());
    store->wait_all();
  }
  auto start = Clock::now();
  for (std::size_t r = 0; r < regions.size(); ++r) store->write(regions[r], buffers[r].get());
  store->wait_all();
  rates.write_mbps = total / 1e6 / std::chrono::duration<double>(Clock::now() - start).count();
  for (auto& buffer : buffers) std::memset(buffer.get(), 0, region_bytes);
  start = Clock::now();
  for (std::size_t r = 0; r < regions.size(); ++r) store->read(regions[r], buffers[r].get());
  store->wait_all();
  rates.read_mbps = total / 1e6 / std::chrono::duration<double>(Clock::now() - start).count();
  for (std::size_t r = 0; r < regions.size(); ++r) {
    for (std::size_t offset = 0; offset < region_bytes; offset += 4096) {
      ZERO_CHECK(buffers[r].get()[offset] == static_cast<unsigned char>(r + 1),
                 "read back a wrong byte at offset ", offset, " of region ", r);
    }
  }
  return rates;
}

bool fio_available() { return std::system("fio --version > /dev/null 2>&1") == 0; }

// One fio run: `rw` (write or read) of `total` bytes over `rings` jobs; returns MB/s.
double run_fio(const BenchFlags& flags, const Setting& setting, const char* rw,
               const fs::path& dir) {
  const std::int64_t total = flags.region_mib * flags.regions * (std::int64_t{1} << 20);
  const std::int64_t per_job = total / setting.rings / setting.block_size * setting.block_size;
  std::ostringstream command;
  command << "fio --name=zero_nvme_bench --directory=" << dir.string() << " --rw=" << rw
          << " --bs=" << setting.block_size << " --iodepth=" << setting.queue_depth
          << " --numjobs=" << setting.rings << " --size=" << per_job
          << " --direct=1 --ioengine=io_uring --group_reporting --output-format=json"
          << (flags.first_write ? "" : " --overwrite=1") << " 2>&1";
  FILE* pipe = popen(command.str().c_str(), "r");
  ZERO_CHECK(pipe != nullptr, "cannot run: ", command.str());
  std::string output;
  char chunk[4096];
  while (std::size_t got = std::fread(chunk, 1, sizeof(chunk), pipe)) output.append(chunk, got);
  const int status = pclose(pipe);
  ZERO_CHECK(status == 0, "fio failed (", status, "): ", command.str(), "\n", output);
  const auto json_start = output.find('{');
  ZERO_CHECK(json_start != std::string::npos, "no JSON in fio's output:\n", output);
  const auto report = nlohmann::json::parse(output.substr(json_start));
  const double bytes_per_second = report.at("jobs").at(0).at(rw).at("bw_bytes").get<double>();
  return bytes_per_second / 1e6;
}

Rates time_fio(const BenchFlags& flags, const Setting& setting) {
  const fs::path dir = flags.dir / "zero_nvme_bench_fio";
  fs::create_directories(dir);
  Rates rates;
  try {
    rates.write_mbps = run_fio(flags, setting, "write", dir);
    rates.read_mbps = run_fio(flags, setting, "read", dir);
  } catch (...) {
    fs::remove_all(dir);
    throw;
  }
  fs::remove_all(dir);
  return rates;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const BenchFlags flags = parse_flags(argc, argv);
    const bool with_fio = flags.fio && fio_available();
    std::printf("nvme_bench: %s, %lld x %lld MiB per direction, %lld rounds, fio %s\n",
                flags.dir.string().c_str(), static_cast<long long>(flags.regions),
                static_cast<long long>(flags.region_mib), static_cast<long long>(flags.rounds),
                with_fio ? "on" : (flags.fio ? "not installed" : "off"));
    std::printf("%10s %4s %5s | %12s %12s | %12s %12s   (MB/s, median)\n", "block_size", "qd",
                "rings", "zero write", "fio write", "zero read", "fio read");
    for (const Setting& setting : flags.settings) {
      std::vector<double> zero_write, zero_read, fio_write, fio_read;
      for (std::int64_t round = 0; round < flags.rounds; ++round) {
        const Rates zero_rates = time_zero(flags, setting);
        zero_write.push_back(zero_rates.write_mbps);
        zero_read.push_back(zero_rates.read_mbps);
        if (with_fio) {
          const Rates fio_rates = time_fio(flags, setting);
          fio_write.push_back(fio_rates.write_mbps);
          fio_read.push_back(fio_rates.read_mbps);
        }
      }
      const double fw = with_fio ? median(fio_write) : 0.0;
      const double fr = with_fio ? median(fio_read) : 0.0;
      std::printf(
          "%10lld %4lld %5lld | %12.0f %12.0f | %12.0f %12.0f\n",
          static_cast<long long>(setting.block_size), static_cast<long long>(setting.queue_depth),
          static_cast<long long>(setting.rings), median(zero_write), fw, median(zero_read), fr);
      std::printf(
          "RESULT bs=%lld qd=%lld rings=%lld zero_write_MBps=%.0f fio_write_MBps=%.0f "
          "zero_read_MBps=%.0f fio_read_MBps=%.0f\n",
          static_cast<long long>(setting.block_size), static_cast<long long>(setting.queue_depth),
          static_cast<long long>(setting.rings), median(zero_write), fw, median(zero_read), fr);
      std::fflush(stdout);
    }
  } catch (const std::exception& error) {
    std::fprintf(stderr, "nvme_bench: error: %s\n", error.what());
    return 1;
  }
  return 0;
}
