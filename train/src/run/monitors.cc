// csv_monitor, TensorBoard event files and the gnuplot loss plot.
#include "zero/train/monitors.h"

#include <unistd.h>

#include <array>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "zero/core/error.h"

namespace zero::train {

namespace fs = std::filesystem;

namespace {

constexpr std::array<std::uint32_t, 256> make_crc32c_table() {
  std::array<std::uint32_t, 256> table{};
  for (std::uint32_t i = 0; i < 256; ++i) {
    std::uint32_t crc = i;
    for (int bit = 0; bit < 8; ++bit) crc = (crc >> 1) ^ ((crc & 1u) ? 0x82F63B78u : 0u);
    table[i] = crc;
  }
  return table;
}
constexpr std::array<std::uint32_t, 256> kCrc32cTable = make_crc32c_table();

// Protocol buffers' wire format, the few pieces an Event needs.
void put_varint(std::string& out, std::uint64_t value) {
  while (value >= 0x80) {
    out.push_back(static_cast<char>((value & 0x7F) | 0x80));
    value >>= 7;
  }
  out.push_back(static_cast<char>(value));
}
void put_tag(std::string& out, int field, int wire_type) {
  put_varint(out, (static_cast<std::uint64_t>(field) << 3) | static_cast<std::uint64_t>(wire_type));
}
void put_bytes(std::string& out, int field, std::string_view bytes) {
  put_tag(out, field, 2);
  put_varint(out, bytes.size());
  out.append(bytes);
}
template <typename T>
void put_fixed(std::string& out, T value) {
  char bytes[sizeof(T)];
  std::memcpy(bytes, &value, sizeof(T));  // little-endian hosts only (x86-64, aarch64)
  out.append(bytes, sizeof(T));
}

std::string event_header(double wall_time, std::int64_t step) {
  std::string event;
  put_tag(event, 1, 1);  // wall_time: double
  put_fixed(event, wall_time);
  if (step != 0) {         // proto3 leaves a zero out, as TensorFlow's writers do
    put_tag(event, 2, 0);  // step: int64
    put_varint(event, static_cast<std::uint64_t>(step));
  }
  return event;
}

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

std::uint32_t crc32c(std::string_view bytes) {
  std::uint32_t crc = 0xFFFFFFFFu;
  for (const char c : bytes)
    crc = kCrc32cTable[(crc ^ static_cast<unsigned char>(c)) & 0xFF] ^ (crc >> 8);
  return crc ^ 0xFFFFFFFFu;
}

std::uint32_t masked_crc32c(std::string_view bytes) {
  const std::uint32_t crc = crc32c(bytes);
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

TensorBoardWriter::TensorBoardWriter(const fs::path& folder) {
  fs::create_directories(folder);
  char host[256] = "localhost";
  gethostname(host, sizeof(host) - 1);
  path_ = folder / ("events.out.tfevents." + std::to_string(static_cast<long long>(now_seconds())) +
                    "." + host);
  out_.open(path_, std::ios::binary | std::ios::trunc);
  ZERO_CHECK(out_.good(), "cannot write the TensorBoard event file ", path_.string());
  std::string event = event_header(now_seconds(), 0);
  put_bytes(event, 3, "brain.Event:2");  // file_version
  write_record(event);
}

void TensorBoardWriter::add_scalar(std::string_view tag, double value, std::int64_t step) {
  std::string summary_value;
  put_bytes(summary_value, 1, tag);  // Summary.Value.tag
  put_tag(summary_value, 2, 5);      // Summary.Value.simple_value: float
  put_fixed(summary_value, static_cast<float>(value));
  std::string summary;
  put_bytes(summary, 1, summary_value);  // Summary.value
  std::string event = event_header(now_seconds(), step);
  put_bytes(event, 5, summary);  // Event.summary
  write_record(event);
}

void TensorBoardWriter::write_record(const std::string& event) {
  std::string length;
  put_fixed(length, static_cast<std::uint64_t>(event.size()));
  std::string record = length;
  put_fixed(record, masked_crc32c(length));
  record += event;
  put_fixed(record, masked_crc32c(event));
  out_.write(record.data(), static_cast<std::streamsize>(record.size()));
  out_.flush();
}

std::string hugging_face_tag(std::string_view key) {
  for (const std::string_view split : {"eval", "test"})
    if (key.size() > split.size() + 1 && key.substr(0, split.size()) == split &&
        key[split.size()] == '_')
      return std::string(split) + "/" + std::string(key.substr(split.size() + 1));
  if (key == "perplexity") return "eval/perplexity";
  return "train/" + std::string(key);
}

Monitors::Monitors(const config::FileMonitorConfig& csv,
                   const config::FileMonitorConfig& tensorboard, const fs::path& default_folder,
                   const fs::path& report_folder) {
  auto folder_of = [&](const config::FileMonitorConfig& monitor) {
    const fs::path base =
        monitor.output_path.empty() ? default_folder : fs::path(monitor.output_path);
    return base / monitor.job_name;
  };
  if (csv.enabled) {
    csv_enabled_ = true;
    csv_folder_ = folder_of(csv);
    fs::create_directories(csv_folder_);
  }
  if (tensorboard.enabled)
    tensorboard_ = std::make_unique<TensorBoardWriter>(folder_of(tensorboard));
  if (!report_folder.empty()) report_ = std::make_unique<TensorBoardWriter>(report_folder);
}

void Monitors::report(std::string_view key, double value, std::int64_t step) {
  if (report_) report_->add_scalar(hugging_face_tag(key), value, step);
}

void Monitors::write(std::string_view name, double value, std::int64_t step) {
  if (csv_enabled_) {
    std::string file(name);
    for (char& c : file)
      if (c == '/' || c == ' ') c = '_';
    const std::size_t slash = name.rfind('/');
    const std::string_view header = slash == std::string_view::npos ? name : name.substr(slash + 1);
    std::ofstream out(csv_folder_ / (file + ".csv"), std::ios::app);
    if (csv_started_.insert(file).second) out << "step," << header << "\n";
    char line[64];
    std::snprintf(line, sizeof(line), "%lld,%.9g\n", static_cast<long long>(step), value);
    out << line;
  }
  if (tensorboard_) tensorboard_->add_scalar(name, value, step);
}

bool plot_losses(const fs::path& folder, const std::vector<PlotPoint>& train_loss,
                 const std::vector<PlotPoint>& eval_loss, std::string& why) {
  {
    std::ofstream data(folder / "loss.dat");
    data << "# step train_loss\n";
    for (const PlotPoint& point : train_loss) data << point.step << " " << point.value << "\n";
    std::ofstream eval(folder / "eval.dat");
    eval << "# step eval_loss perplexity\n";
    for (const PlotPoint& point : eval_loss)
      eval << point.step << " " << point.value << " " << std::exp(point.value) << "\n";
  }
  {
    std::ofstream script(folder / "loss.gp");
    script << "set terminal svg size 800,480 dynamic\n"
              "set output 'loss.svg'\n"
              "set title 'zero train'\n"
              "set xlabel 'step'\nset ylabel 'loss'\nset y2label 'eval perplexity'\n"
              "set ytics nomirror\nset y2tics\nset logscale y2\nset key top right\nset grid\n";
    std::string plots;
    if (!train_loss.empty()) plots += "'loss.dat' using 1:2 with lines title 'train loss'";
    if (!eval_loss.empty()) {
      if (!plots.empty()) plots += ", ";
      plots +=
          "'eval.dat' using 1:2 with linespoints title 'eval loss', "
          "'eval.dat' using 1:3 axes x1y2 with linespoints title 'eval perplexity'";
    }
    if (plots.empty()) {
      why = "nothing to plot";
      return false;
    }
    script << "plot " << plots << "\n";
  }
  if (std::system("command -v gnuplot > /dev/null 2>&1") != 0) {
    why = "gnuplot is not installed (apt-get install gnuplot-nox, or scripts/setup.sh)";
    return false;
  }
  const std::string command =
      "cd '" + folder.string() + "' && gnuplot loss.gp > loss.gnuplot.log 2>&1";
  if (std::system(command.c_str()) != 0) {
    why = "gnuplot failed (see " + (folder / "loss.gnuplot.log").string() + ")";
    return false;
  }
  fs::remove(folder / "loss.gnuplot.log");
  return true;
}

}  // namespace zero::train
