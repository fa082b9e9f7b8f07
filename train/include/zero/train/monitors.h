// What the trainer writes besides checkpoints: DeepSpeed's csv_monitor and tensorboard sections
// (TensorBoard event files), and the loss/perplexity plot (gnuplot).
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "zero/config/ds_config.h"

namespace zero::train {

// CRC-32C (Castagnoli), and TFRecord's masked form ((crc >> 15 | crc << 17) + 0xa282ead8).
std::uint32_t crc32c(std::string_view bytes);
std::uint32_t masked_crc32c(std::string_view bytes);

// A TensorBoard event file (events.out.tfevents.<seconds>.<host>): TFRecord framing (length,
// masked CRC of the length, Event protobuf, masked CRC of it); the first record carries
// file_version "brain.Event:2", each scalar is an Event with a Summary holding one simple_value.
class TensorBoardWriter {
 public:
  explicit TensorBoardWriter(const std::filesystem::path& folder);
  void add_scalar(std::string_view tag, double value, std::int64_t step);
  const std::filesystem::path& path() const { return path_; }

 private:
  void write_record(const std::string& event);
  std::filesystem::path path_;
  std::ofstream out_;
};

// Hugging Face's TensorBoard tag of a log_history key, as its TensorBoardCallback's rewrite_logs
// names it: "eval_<name>" is "eval/<name>", "test_<name>" is "test/<name>", any other key
// "train/<key>" ("loss" is "train/loss"). zero's "perplexity" comes with evaluations only, so it is
// "eval/perplexity".
std::string hugging_face_tag(std::string_view key);

// What the trainer writes for TensorBoard and csv readers:
// - Hugging Face's (--report_to tensorboard): an event file in `report_folder` (none when empty)
//   with each log_history number under hugging_face_tag against the global step (report());
// - DeepSpeed's monitors, only where the config enables them, over events named like its engine's
//   ("Train/Samples/train_loss") against samples seen (write()): csv_monitor writes
//   <output_path>/<job_name>/<name with '/' and ' ' as '_'>.csv with a "step,<last part of the
//   name>" header; tensorboard writes an event file under <output_path>/<job_name>. An empty
//   output_path is `default_folder` (the trainer's output_dir).
class Monitors {
 public:
  Monitors(const config::FileMonitorConfig& csv, const config::FileMonitorConfig& tensorboard,
           const std::filesystem::path& default_folder,
           const std::filesystem::path& report_folder = {});
  void report(std::string_view key, double value, std::int64_t step);
  void write(std::string_view name, double value, std::int64_t step);
  bool enabled() const { return csv_enabled_ || tensorboard_ || report_; }

 private:
  bool csv_enabled_ = false;
  std::filesystem::path csv_folder_;
  std::set<std::string> csv_started_;
  std::unique_ptr<TensorBoardWriter> tensorboard_;
  std::unique_ptr<TensorBoardWriter> report_;
};

// Writes <folder>/loss.svg through gnuplot (training loss, evaluation loss and perplexity against
// the step) with its data (loss.dat, eval.dat) and script (loss.gp) beside it. Returns false with
// `why` set when gnuplot is not installed or fails; the data and script stay.
struct PlotPoint {
  std::int64_t step = 0;
  double value = 0.0;
};
bool plot_losses(const std::filesystem::path& folder, const std::vector<PlotPoint>& train_loss,
                 const std::vector<PlotPoint>& eval_loss, std::string& why);

}  // namespace zero::train
