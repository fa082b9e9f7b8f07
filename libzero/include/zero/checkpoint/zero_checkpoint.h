// zero's resumable checkpoints: the engine's shards (fp32 master weights and optimizer state) as
// one safetensors file per rank, each tensor tagged with the global element range of its unit it
// covers, plus zero_checkpoint.json (what wrote it, the units, every file's size and checksum,
// the engine's TrainingState). Because ranges are global, a checkpoint loads into any world size
// and any ZeRO stage: a rank reads the pieces that intersect the range it owns.
//
// A folder is written crash-safely (CheckpointSave): every rank writes into a staging folder
// `root/.tmp-<tag>` and fsyncs its file; after a barrier rank 0 fsyncs the folder, renames it to
// `root/<tag>` and only then replaces `root/latest` (a file holding the tag, DeepSpeed's name)
// by write + fsync + rename. A crash at any moment leaves the previous checkpoint and `latest`
// as they were. All ranks must see the same filesystem (as DeepSpeed and Hugging Face assume).
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "zero/comm/communicator.h"
#include "zero/core/partition.h"
#include "zero/engine/engine.h"

namespace zero::checkpoint {

inline constexpr const char* kIndexFileName = "zero_checkpoint.json";
inline constexpr const char* kLatestFileName = "latest";
inline constexpr const char* kStagingPrefix = ".tmp-";
inline constexpr int kFormatVersion = 1;

// "zero_shard-00001-of-00004.safetensors": rank 1's shard of a world of 4.
std::string shard_file_name(int rank, int world_size);

struct UnitInfo {
  std::string name;
  std::size_t num_elements = 0;  // unpadded
};

struct ShardFileInfo {
  std::string name;  // file name inside the checkpoint folder
  int rank = 0;
  std::uint64_t size_bytes = 0;
  std::uint64_t checksum = 0;                  // file_checksum() of the whole file
  std::map<std::string, ElementRange> ranges;  // unit → global range held (non-empty only)
};

// zero_checkpoint.json.
struct CheckpointIndex {
  int version = kFormatVersion;
  int world_size = 1;  // what wrote it
  int stage = 0;
  std::string param_dtype = "fp32";   // compute copy (fp32, bf16, fp16)
  std::string master_dtype = "fp32";  // what the shard files hold
  std::string optimizer;              // DeepSpeed's name ("AdamW", ...)
  std::vector<std::string> optimizer_states;
  TrainingState training;
  std::vector<UnitInfo> units;
  std::vector<ShardFileInfo> files;

  const UnitInfo* find_unit(const std::string& name) const;
};

// The checksum stored for every file: 64-bit FNV-1a over the file's little-endian 8-byte words,
// then its tail bytes (fast, not cryptographic; catches truncation and corruption).
std::uint64_t checksum_bytes(const void* data, std::size_t size_bytes, std::uint64_t seed);
std::uint64_t file_checksum(const std::filesystem::path& path);

// Reads `folder`/zero_checkpoint.json; throws zero::Error naming the file and the bad field.
CheckpointIndex read_index(const std::filesystem::path& folder);

// Cheap checks that read no shard data: units unique, each one's ranges over the files cover
// [0, num_elements) exactly once, every file present with its recorded size. Throws zero::Error
// naming the file and what is wrong.
void check_complete(const std::filesystem::path& folder, const CheckpointIndex& index);

// Checks the folder is a complete checkpoint: the index parses; units are unique and each one's
// ranges over the files cover [0, num_elements) exactly once; every file is present with the
// recorded size and checksum (when `checksums`) and its safetensors header holds the tensors and
// ranges the index lists. Throws zero::Error naming the file and what is wrong.
void validate(const std::filesystem::path& folder, const CheckpointIndex& index,
              bool checksums = true);

// `path` resolved to one checkpoint folder: a folder holding zero_checkpoint.json as it is; a
// folder holding `latest` → the tag it names; else (an output_dir without `latest`) the
// `checkpoint-N` with the largest N that holds zero_checkpoint.json. Throws naming `path` when
// none is found.
std::filesystem::path resolve(const std::filesystem::path& path);

// Loads the checkpoint in `folder` into the engine (all ranks, any world size or stage): checks
// the units (names, sizes) and optimizer states against the engine's, validates the files this
// rank reads (size and checksum), copies the pieces that intersect this rank's shards, sets the
// TrainingState, and refreshes the compute parameters. Returns the index. Throws zero::Error
// naming the mismatch or the bad file; every rank checks the same index, so all ranks throw.
CheckpointIndex load(Engine& engine, const std::filesystem::path& folder);

// A whole unit's fp32 master values from the shard files (no engine, no communicator): what
// `zero checkpoint consolidate` writes. `state` "params" or an optimizer state's name.
std::vector<float> read_unit(const std::filesystem::path& folder, const CheckpointIndex& index,
                             const std::string& unit, const std::string& state = "params");
// Every unit at once, each file read once (checked: size, checksum, header): unit → values.
std::map<std::string, std::vector<float>> read_units(const std::filesystem::path& folder,
                                                     const CheckpointIndex& index,
                                                     const std::string& state = "params");

// Writes one checkpoint folder crash-safely (see the file comment). Use, on every rank:
//   CheckpointSave save(communicator, root, "checkpoint-20");
//   save.write_engine(engine);            // all ranks: shard files, rank 0 the index
//   <rank 0 writes its own files into save.staging()>
//   save.commit();                        // all ranks
// An exception before commit() leaves the staging folder behind (remove_stale_staging cleans
// it), never a half-written `root/<tag>`.
class CheckpointSave {
 public:
  // Rank 0 creates an empty `root/.tmp-<tag>` (removing a stale one); all ranks wait for it.
  CheckpointSave(Communicator& communicator, std::filesystem::path root, std::string tag);
  const std::filesystem::path& staging() const { return staging_; }
  std::filesystem::path final_path() const { return root_ / tag_; }

  // All ranks: this rank's shard file (written, fsynced), then the file sizes and checksums are
  // all-gathered and rank 0 writes zero_checkpoint.json. ZERO_TEST_SLOW_SAVE_MS (a test hook)
  // sleeps that long with the shard file half written.
  void write_engine(Engine& engine);
  // All ranks: a barrier (every rank's files are durable), then rank 0 fsyncs the staging
  // folder's files and the folder, renames it to root/<tag> (an existing root/<tag> is replaced),
  // fsyncs root and replaces root/latest atomically; a final barrier. Returns root/<tag>.
  std::filesystem::path commit();

 private:
  Communicator& communicator_;
  std::filesystem::path root_;
  std::string tag_;
  std::filesystem::path staging_;
};

// Rank 0's housekeeping after a commit, in `root`: removes staging folders (`.tmp-*`) and all
// but the newest `keep` folders named `<prefix>N`; the one `latest` names is never removed.
// keep < 1 removes none of them. Returns the folders removed.
std::vector<std::filesystem::path> rotate(const std::filesystem::path& root,
                                          const std::string& prefix, std::int64_t keep);

// Writes `text` to `path` durably and atomically (path.tmp, fsync, rename, fsync the folder).
void write_file_atomically(const std::filesystem::path& path, const std::string& text);
// fsyncs a file or folder; throws naming it on failure.
void fsync_path(const std::filesystem::path& path);

}  // namespace zero::checkpoint
