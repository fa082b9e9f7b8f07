// Arrow IPC streams as datasets writes them (zero/text/arrow_stream.h): the messages framed by
// hand, their flatbuffer metadata read through the accessors below (Arrow's format/Message.fbs
// and Schema.fbs, only the fields zero reads) after flatbuffers::Verifier has checked them.
#include "zero/text/arrow_stream.h"

#include <flatbuffers/flatbuffers.h>

#include <cstdint>
#include <cstring>
#include <iterator>
#include <vector>

#include "utf8.h"
#include "zero/core/error.h"
#include "zero/text/text_files.h"

namespace zero::text {
namespace {

namespace fb = flatbuffers;

// Arrow's Type union (Schema.fbs): the members run_clm's text column may be.
constexpr std::uint8_t kUtf8 = 5;
constexpr std::uint8_t kLargeUtf8 = 20;

// Each Type member by id: its name, and the buffers an array of it has of its own in a record
// batch (its children's apart); -1 for the members zero does not read (union, run-end encoded,
// the views: their buffers depend on more than the type).
struct TypeInfo {
  const char* name;
  int own_buffers;
};
constexpr TypeInfo kTypes[] = {{"none", -1},
                               {"null", 0},
                               {"int", 2},
                               {"float", 2},
                               {"binary", 3},  // validity, offsets, values
                               {"string", 3},
                               {"bool", 2},
                               {"decimal", 2},
                               {"date", 2},
                               {"time", 2},
                               {"timestamp", 2},
                               {"interval", 2},
                               {"list", 2},    // validity, offsets
                               {"struct", 1},  // validity
                               {"union", -1},
                               {"fixed_size_binary", 2},
                               {"fixed_size_list", 1},
                               {"map", 2},
                               {"duration", 2},
                               {"large_binary", 3},
                               {"large_string", 3},
                               {"large_list", 2},
                               {"run_end_encoded", -1},
                               {"binary_view", -1},
                               {"string_view", -1},
                               {"list_view", -1},
                               {"large_list_view", -1}};

TypeInfo type_info(std::uint8_t type) {
  return type < std::size(kTypes) ? kTypes[type] : TypeInfo{"unknown", -1};
}

// Message.fbs's MessageHeader union.
enum HeaderType : std::uint8_t { kSchema = 1, kDictionaryBatch = 2, kRecordBatch = 3 };

// Message.fbs's structs FieldNode { length: long; null_count: long; } and
// Buffer { offset: long; length: long; }: two little-endian longs each.
struct TwoLongs {
  std::int64_t values_[2];
  std::int64_t value(int i) const { return fb::EndianScalar(values_[i]); }
};
static_assert(sizeof(TwoLongs) == 16 && alignof(TwoLongs) == 8);
struct FieldNode : TwoLongs {
  std::int64_t length() const { return value(0); }
  std::int64_t null_count() const { return value(1); }
};
struct BodyBuffer : TwoLongs {
  std::int64_t offset() const { return value(0); }
  std::int64_t length() const { return value(1); }
};

// A table whose fields zero does not read (a Type member, DictionaryEncoding): verified as a
// table, so that its presence is all that is used.
struct OpaqueTable : private fb::Table {
  bool Verify(fb::Verifier& verifier) const {
    return VerifyTableStart(verifier) && verifier.EndTable();
  }
};

// table Field { name; nullable; type (union); dictionary; children: [Field]; custom_metadata }
struct Field : private fb::Table {
  enum : fb::voffset_t { kName = 4, kTypeType = 8, kType = 10, kDictionary = 12, kChildren = 14 };
  const fb::String* name() const { return GetPointer<const fb::String*>(kName); }
  std::uint8_t type_type() const { return GetField<std::uint8_t>(kTypeType, 0); }
  bool dictionary_encoded() const { return CheckField(kDictionary); }
  const fb::Vector<fb::Offset<Field>>* children() const {
    return GetPointer<const fb::Vector<fb::Offset<Field>>*>(kChildren);
  }
  bool Verify(fb::Verifier& verifier) const {
    return VerifyTableStart(verifier) && VerifyOffset(verifier, kName) &&
           verifier.VerifyString(name()) && VerifyField<std::uint8_t>(verifier, kTypeType, 1) &&
           VerifyOffset(verifier, kType) &&
           (!CheckField(kType) || GetPointer<const OpaqueTable*>(kType)->Verify(verifier)) &&
           VerifyOffset(verifier, kDictionary) &&
           (!CheckField(kDictionary) ||
            GetPointer<const OpaqueTable*>(kDictionary)->Verify(verifier)) &&
           VerifyOffset(verifier, kChildren) && verifier.VerifyVector(children()) &&
           verifier.VerifyVectorOfTables(children()) && verifier.EndTable();
  }
};

// table Schema { endianness: short (0 little, 1 big); fields: [Field]; ... }
struct Schema : private fb::Table {
  enum : fb::voffset_t { kEndianness = 4, kFields = 6 };
  std::int16_t endianness() const { return GetField<std::int16_t>(kEndianness, 0); }
  const fb::Vector<fb::Offset<Field>>* fields() const {
    return GetPointer<const fb::Vector<fb::Offset<Field>>*>(kFields);
  }
  bool Verify(fb::Verifier& verifier) const {
    return VerifyTableStart(verifier) && VerifyField<std::int16_t>(verifier, kEndianness, 2) &&
           VerifyOffset(verifier, kFields) && verifier.VerifyVector(fields()) &&
           verifier.VerifyVectorOfTables(fields()) && verifier.EndTable();
  }
};

// table RecordBatch { length: long; nodes: [FieldNode]; buffers: [Buffer]; compression; ... }
struct RecordBatch : private fb::Table {
  enum : fb::voffset_t { kLength = 4, kNodes = 6, kBuffers = 8, kCompression = 10 };
  std::int64_t length() const { return GetField<std::int64_t>(kLength, 0); }
  const fb::Vector<const FieldNode*>* nodes() const {
    return GetPointer<const fb::Vector<const FieldNode*>*>(kNodes);
  }
  const fb::Vector<const BodyBuffer*>* buffers() const {
    return GetPointer<const fb::Vector<const BodyBuffer*>*>(kBuffers);
  }
  bool compressed() const { return CheckField(kCompression); }
  bool Verify(fb::Verifier& verifier) const {
    return VerifyTableStart(verifier) && VerifyField<std::int64_t>(verifier, kLength, 8) &&
           VerifyOffset(verifier, kNodes) && verifier.VerifyVector(nodes()) &&
           VerifyOffset(verifier, kBuffers) && verifier.VerifyVector(buffers()) &&
           VerifyOffset(verifier, kCompression) && verifier.EndTable();
  }
};

// table Message { version: short; header (union); bodyLength: long; custom_metadata }
struct Message : private fb::Table {
  enum : fb::voffset_t { kVersion = 4, kHeaderType = 6, kHeader = 8, kBodyLength = 10 };
  std::int16_t version() const { return GetField<std::int16_t>(kVersion, 0); }
  std::uint8_t header_type() const { return GetField<std::uint8_t>(kHeaderType, 0); }
  template <typename Header>
  const Header* header() const {
    return GetPointer<const Header*>(kHeader);
  }
  std::int64_t body_length() const { return GetField<std::int64_t>(kBodyLength, 0); }
  bool Verify(fb::Verifier& verifier) const {
    if (!(VerifyTableStart(verifier) && VerifyField<std::int16_t>(verifier, kVersion, 2) &&
          VerifyField<std::uint8_t>(verifier, kHeaderType, 1) && VerifyOffset(verifier, kHeader) &&
          VerifyField<std::int64_t>(verifier, kBodyLength, 8)))
      return false;
    const bool header_verified =
        !CheckField(kHeader) ||
        (header_type() == kSchema        ? header<Schema>()->Verify(verifier)
         : header_type() == kRecordBatch ? header<RecordBatch>()->Verify(verifier)
                                         : header<OpaqueTable>()->Verify(verifier));
    return header_verified && verifier.EndTable();
  }
};

// The stream read message by message; every failure names the file and the byte it was at.
class StreamReader {
 public:
  StreamReader(std::string_view bytes, const std::filesystem::path& path)
      : bytes_(bytes), path_(path) {}

  template <typename... Args>
  [[noreturn]] void fail(const Args&... args) const {
    ZERO_THROW("Arrow file ", path_.string(), ": at byte ", at_, ": ", args...);
  }

  // The next message's metadata (verified) and body; false at the end-of-stream marker.
  bool next(const Message*& message, std::string_view& body) {
    std::int32_t continuation = 0;
    std::int32_t size = 0;
    if (at_ + 8 > bytes_.size())
      fail("truncated: ", bytes_.size() - at_,
           " bytes where a message or the end-of-stream "
           "marker should start (",
           bytes_.size(), " bytes in all)");
    std::memcpy(&continuation, bytes_.data() + at_, 4);
    std::memcpy(&size, bytes_.data() + at_ + 4, 4);
    if (continuation != -1)
      fail(at_ == 0 && bytes_.starts_with("ARROW1")
               ? "an Arrow IPC file (ARROW1 magic), not the IPC stream datasets writes"
               : "no continuation marker 0xFFFFFFFF: not an Arrow IPC stream as datasets writes "
                 "it (Arrow 0.15 or later)");
    if (size == 0) return false;
    if (size < 0 || size % 8 != 0 || static_cast<std::size_t>(size) > bytes_.size() - at_ - 8)
      fail("metadata length ", size, " is negative, not a multiple of 8 or past the end of the ",
           bytes_.size(), "-byte file");
    // An 8-aligned copy: the flatbuffer's scalars are read in place.
    metadata_.assign((static_cast<std::size_t>(size) + 7) / 8, 0);
    std::memcpy(metadata_.data(), bytes_.data() + at_ + 8, static_cast<std::size_t>(size));
    const auto* buffer = reinterpret_cast<const std::uint8_t*>(metadata_.data());
    fb::Verifier verifier(buffer, static_cast<std::size_t>(size));
    if (!verifier.VerifyBuffer<Message>(nullptr)) fail("the message's metadata is corrupt");
    message = fb::GetRoot<Message>(buffer);
    if (message->version() < 3)  // MetadataVersion V4
      fail("metadata version ", message->version() + 1, ", older than Arrow 0.15's V4");
    const std::int64_t body_length = message->body_length();
    const std::size_t body_at = at_ + 8 + static_cast<std::size_t>(size);
    if (body_length < 0 || static_cast<std::uint64_t>(body_length) > bytes_.size() - body_at)
      fail("truncated: a message body of ", body_length, " bytes where ", bytes_.size() - body_at,
           " remain");
    body = bytes_.substr(body_at, static_cast<std::size_t>(body_length));
    at_ = body_at + static_cast<std::size_t>(body_length);
    return true;
  }

 private:
  std::string_view bytes_;
  const std::filesystem::path& path_;
  std::size_t at_ = 0;
  std::vector<std::uint64_t> metadata_;
};

// The buffers an array of `field` takes in a record batch, its children's included, and the
// field nodes (one per field, depth first); throws for types whose count depends on more.
void count_buffers(const StreamReader& reader, const Field& field, std::size_t& buffers,
                   std::size_t& nodes) {
  ++nodes;
  const TypeInfo type = type_info(field.type_type());
  if (type.own_buffers < 0)
    reader.fail("column '", field.name() ? field.name()->str() : "", "' is of type ", type.name,
                ", which zero does not read");
  buffers += static_cast<std::size_t>(type.own_buffers);
  if (field.children() != nullptr)
    for (fb::uoffset_t i = 0; i < field.children()->size(); ++i)
      count_buffers(reader, *field.children()->Get(i), buffers, nodes);
}

// Where the text column's field node and first buffer are in each record batch.
struct TextColumn {
  std::size_t node = 0;
  std::size_t buffer = 0;
  std::size_t offset_bytes = 4;  // string: int32 offsets; large_string: int64
  ArrowTextColumn result;
};

TextColumn read_schema(const StreamReader& reader, const Schema& schema) {
  if (schema.endianness() != 0)
    reader.fail("big-endian data, which zero does not read (datasets writes little-endian)");
  const auto* fields = schema.fields();
  if (fields == nullptr || fields->size() == 0) reader.fail("the schema has no column");
  fb::uoffset_t chosen = 0;
  for (fb::uoffset_t i = 0; i < fields->size(); ++i)
    if (fields->Get(i)->name() != nullptr && fields->Get(i)->name()->string_view() == "text")
      chosen = i;
  TextColumn column;
  for (fb::uoffset_t i = 0; i < fields->size(); ++i) {
    const Field& field = *fields->Get(i);
    if (field.dictionary_encoded())
      reader.fail("column '", field.name() ? field.name()->str() : "",
                  "' is dictionary-encoded, which zero does not read");
    if (i == chosen) {
      column.result.name = field.name() ? field.name()->str() : "";
      if (field.type_type() != kUtf8 && field.type_type() != kLargeUtf8)
        reader.fail("column '", column.result.name,
                    "' (run_clm's text column: \"text\", else the "
                    "first) is of type ",
                    type_info(field.type_type()).name, "; zero reads string or large_string");
      column.offset_bytes = field.type_type() == kUtf8 ? 4 : 8;
    }
    std::size_t buffers = 0;
    std::size_t nodes = 0;
    count_buffers(reader, field, buffers, nodes);
    if (i < chosen) {
      column.buffer += buffers;
      column.node += nodes;
    }
  }
  return column;
}

// A body buffer's bytes, checked to lie inside the body.
std::string_view body_buffer(const StreamReader& reader, std::string_view body,
                             const BodyBuffer& buffer) {
  if (buffer.offset() < 0 || buffer.length() < 0 ||
      static_cast<std::uint64_t>(buffer.offset()) > body.size() ||
      static_cast<std::uint64_t>(buffer.length()) > body.size() - buffer.offset())
    reader.fail("a buffer at offset ", buffer.offset(), " of ", buffer.length(),
                " bytes lies outside the ", body.size(), "-byte message body");
  return body.substr(static_cast<std::size_t>(buffer.offset()),
                     static_cast<std::size_t>(buffer.length()));
}

std::int64_t read_offset(std::string_view offsets, std::size_t index, std::size_t width) {
  if (width == 4) {
    std::int32_t value = 0;
    std::memcpy(&value, offsets.data() + index * 4, 4);
    return value;
  }
  std::int64_t value = 0;
  std::memcpy(&value, offsets.data() + index * 8, 8);
  return value;
}

void read_record_batch(const StreamReader& reader, const RecordBatch& batch, std::string_view body,
                       TextColumn& column, const std::function<void(std::string_view)>& on_text) {
  if (batch.compressed())
    reader.fail(
        "the record batch's body is compressed, which zero does not read (datasets "
        "writes uncompressed streams)");
  const auto* nodes = batch.nodes();
  const auto* buffers = batch.buffers();
  if (nodes == nullptr || column.node >= nodes->size() || buffers == nullptr ||
      column.buffer + 3 > buffers->size())
    reader.fail("the record batch has ", nodes ? nodes->size() : 0, " field nodes and ",
                buffers ? buffers->size() : 0, " buffers, fewer than the schema's columns need");
  const FieldNode& node = *nodes->Get(static_cast<fb::uoffset_t>(column.node));
  const std::int64_t rows = node.length();
  if (rows != batch.length() || rows < 0 || node.null_count() < 0 || node.null_count() > rows)
    reader.fail("column '", column.result.name, "' has ", rows, " rows and ", node.null_count(),
                " nulls in a record batch of ", batch.length(), " rows");
  const auto buffer = [&](std::size_t i) {
    return body_buffer(reader, body, *buffers->Get(static_cast<fb::uoffset_t>(column.buffer + i)));
  };
  const std::string_view validity = buffer(0);
  const std::string_view offsets = buffer(1);
  const std::string_view values = buffer(2);
  const std::size_t count = static_cast<std::size_t>(rows);
  if (count == 0) return;
  // A validity bitmap is absent only when nothing is null.
  const bool has_bitmap = !validity.empty();
  if ((has_bitmap || node.null_count() > 0) && validity.size() < (count + 7) / 8)
    reader.fail("column '", column.result.name, "': a validity bitmap of ", validity.size(),
                " bytes for ", count, " rows");
  if (offsets.size() / column.offset_bytes < count + 1)
    reader.fail("column '", column.result.name, "': ", offsets.size(), " bytes of offsets for ",
                count, " rows");
  std::size_t nulls = 0;
  for (std::size_t row = 0; row < count; ++row) {
    const std::int64_t begin = read_offset(offsets, row, column.offset_bytes);
    const std::int64_t end = read_offset(offsets, row + 1, column.offset_bytes);
    if (begin < 0 || end < begin || static_cast<std::uint64_t>(end) > values.size())
      reader.fail("column '", column.result.name, "', row ", column.result.num_rows + row,
                  ": offsets ", begin, "..", end, " outside its ", values.size(), " bytes");
    if (has_bitmap && ((static_cast<unsigned char>(validity[row / 8]) >> (row % 8)) & 1) == 0) {
      ++nulls;
      continue;
    }
    const std::string_view text =
        values.substr(static_cast<std::size_t>(begin), static_cast<std::size_t>(end - begin));
    if (const std::size_t bad = detail::first_invalid_utf8(text); bad != text.size())
      reader.fail("column '", column.result.name, "', row ", column.result.num_rows + row,
                  ": invalid UTF-8 at byte ", bad, " of the value");
    on_text(text);
  }
  if (static_cast<std::int64_t>(nulls) != node.null_count())
    reader.fail("column '", column.result.name, "': null_count ", node.null_count(),
                " but the validity bitmap holds ", nulls, " nulls");
  column.result.num_rows += count;
  column.result.num_nulls += nulls;
}

}  // namespace

ArrowTextColumn for_each_arrow_text(std::string_view bytes, const std::filesystem::path& path,
                                    const std::function<void(std::string_view)>& on_text) {
  StreamReader reader(bytes, path);
  const Message* message = nullptr;
  std::string_view body;
  if (!reader.next(message, body)) reader.fail("the stream ends before its schema");
  if (message->header_type() != kSchema || message->header<Schema>() == nullptr)
    reader.fail("the stream does not start with a schema message");
  TextColumn column = read_schema(reader, *message->header<Schema>());
  while (reader.next(message, body)) {
    switch (message->header_type()) {
      case kRecordBatch:
        if (message->header<RecordBatch>() == nullptr) reader.fail("a record batch without header");
        read_record_batch(reader, *message->header<RecordBatch>(), body, column, on_text);
        break;
      case kDictionaryBatch: reader.fail("a dictionary batch, which zero does not read");
      case kSchema: reader.fail("a second schema message");
      default:
        reader.fail("a message of type ", static_cast<int>(message->header_type()),
                    " (tensor or unknown), which zero does not read");
    }
  }
  return column.result;
}

ArrowTextColumn for_each_arrow_text(const std::filesystem::path& path,
                                    const std::function<void(std::string_view)>& on_text) {
  const MappedFile file(path);
  return for_each_arrow_text(file.bytes(), path, on_text);
}

}  // namespace zero::text
