// Saving a checkpoint folder crash-safely (CheckpointSave): every rank writes into a staging
// folder `root/.tmp-<tag>` and fsyncs its file; after a barrier rank 0 fsyncs the folder, renames
// it to `root/<tag>` and only then replaces `root/latest` (a file holding the tag, DeepSpeed's
// name) by write + fsync + rename. A crash at any moment leaves the previous checkpoint and
// `latest` as they were. All ranks must see the same filesystem (as DeepSpeed and Hugging Face
// assume).
#pragma once

#include <filesystem>
#include <string>

#include "zero/comm/communicator.h"
#include "zero/engine/engine.h"

namespace zero::checkpoint {

// Writes one checkpoint folder crash-safely (see the file comment). Use, on every rank:
//   CheckpointSave save(communicator, root, "checkpoint-20");
//   save.write_engine(engine);            // all ranks: shard files, rank 0 the index
//   <rank 0 writes its own files into save.staging()>
//   save.commit();                        // all ranks
// An exception before commit() leaves the staging folder behind (rotate() in
// zero/checkpoint/checkpoint_folders.h removes it), never a half-written `root/<tag>`.
class CheckpointSave {
 public:
  // Rank 0 creates an empty `root/.tmp-<tag>` (removing a stale one); all ranks wait for it.
  CheckpointSave(Communicator& communicator, std::filesystem::path root, std::string tag);
  // A save that did not commit (an error unwinding, e.g. a full disk): rank 0 removes the staging
  // folder and what it holds, so the failed save gives its space back and root/<tag>, `latest`
  // and the older checkpoints stay as they were. (A job that ends through abort_job() runs no
  // destructor; the next save, or rotate(), removes the folder then.)
  ~CheckpointSave();
  CheckpointSave(const CheckpointSave&) = delete;
  CheckpointSave& operator=(const CheckpointSave&) = delete;
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
  bool committed_ = false;
};

}  // namespace zero::checkpoint
