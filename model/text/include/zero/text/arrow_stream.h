// Reading the Arrow IPC stream files Hugging Face datasets keeps in its cache
// (<name>-<split>[-NNNNN-of-NNNNN].arrow, written by pa.RecordBatchStreamWriter, uncompressed):
// the text column run_clm takes, row by row.
#pragma once

#include <cstddef>
#include <filesystem>
#include <functional>
#include <string>
#include <string_view>

namespace zero::text {

// What one stream held: its rows (null ones too) and the column read.
struct ArrowTextColumn {
  std::string name;          // "text" when the schema has it, else its first column
  std::size_t num_rows = 0;  // over every record batch, nulls included
  std::size_t num_nulls = 0;
};

// Calls on_text for each non-null value of the column run_clm picks (the "text" column, else the
// first: `column_names[0]`), in row order over every record batch; the view is valid only during
// the call. `bytes` is the whole stream (the continuation-marked encapsulation of Arrow 0.15+,
// ended by its end-of-stream marker); `path` names the file in errors. The column must be string
// or large_string, little-endian, without dictionary encoding or body compression, its values
// valid UTF-8; other columns may be of any type whose buffers can be counted (fixed width, binary,
// list, struct, map). Throws zero::Error naming `path` and what is unsupported (compressed
// bodies, dictionary batches, big-endian data, other column types) or corrupt (every offset and
// length is checked against the file, each flatbuffer with flatbuffers::Verifier).
ArrowTextColumn for_each_arrow_text(std::string_view bytes, const std::filesystem::path& path,
                                    const std::function<void(std::string_view)>& on_text);

// The same over the file at `path` (memory-mapped; zero::Error when it cannot be read).
ArrowTextColumn for_each_arrow_text(const std::filesystem::path& path,
                                    const std::function<void(std::string_view)>& on_text);

}  // namespace zero::text
