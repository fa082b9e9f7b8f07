// Durable writes: a file replaced atomically and fsynced with its folder, so a crash leaves the
// old contents or the new, never a mix.
#pragma once

#include <filesystem>
#include <string>

namespace zero::checkpoint {

// Writes `text` to `path` durably and atomically (path.tmp, fsync, rename, fsync the folder).
void write_file_atomically(const std::filesystem::path& path, const std::string& text);
// fsyncs a file or folder; throws naming it on failure.
void fsync_path(const std::filesystem::path& path);

}  // namespace zero::checkpoint
