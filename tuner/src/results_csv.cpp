#include "splitkv/tuner/results_csv.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

namespace splitkv::tuner {
namespace {

constexpr std::size_t kColumnCount = kResultsCsvColumns.size();

enum Column : std::size_t {
  col_gpu, col_kernel, col_layout, col_page_size, col_dtype, col_batch, col_num_heads,
  col_num_kv_heads, col_head_dim, col_context_len, col_cache_capacity,
  col_length_distribution, col_num_splits, col_time_us_median, col_time_us_p10,
  col_time_us_p90, col_cv, col_repetitions, col_kv_bytes, col_tbps, col_status, col_message,
  col_gpu_index, col_gpu_uuid,
};

std::string quote_if_needed(std::string_view text) {
  if (text.find_first_of(",\"\r\n") == std::string_view::npos) return std::string(text);
  std::string out = "\"";
  for (char c : text) {
    if (c == '"') out += '"';
    out += c;
  }
  out += '"';
  return out;
}

// Newlines inside a message would make one row span lines and blur the torn-tail rule
// (everything before the last newline is whole), so they are flattened on write.
std::string single_line(std::string_view text) {
  std::string out(text);
  for (char& c : out) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  return out;
}

std::string format_number(double value) {
  if (std::isnan(value)) return "";
  return fmt::format("{}", value);  // shortest text that parses back to the same double
}

struct Field {
  std::string value;
  int line;
  int column;
};

struct Record {
  std::vector<Field> fields;
  int line;
  std::int64_t offset;
};

struct Tokenized {
  std::vector<Record> records;
  std::optional<TornTail> torn;
};

// RFC 4180 with two allowances: CRLF or LF line ends, and blank lines are skipped. A
// record that reaches the end of the text without its newline (inside quotes or not) is
// the torn tail.
Tokenized tokenize(std::string_view text, const std::string& source) {
  Tokenized out;
  std::size_t i = 0;
  int line = 1;
  while (i < text.size()) {
    const std::size_t record_start = i;
    const int record_line = line;
    if (text[i] == '\n' || (text[i] == '\r' && i + 1 < text.size() && text[i + 1] == '\n')) {
      i += text[i] == '\r' ? 2 : 1;
      ++line;
      continue;
    }
    Record record{{}, record_line, std::int64_t(record_start)};
    std::size_t line_start = record_start;
    bool terminated = false;
    while (true) {
      Field field{{}, line, int(i - line_start) + 1};
      if (i < text.size() && text[i] == '"') {
        ++i;
        bool closed = false;
        while (i < text.size()) {
          if (text[i] == '"') {
            if (i + 1 < text.size() && text[i + 1] == '"') {
              field.value += '"';
              i += 2;
              continue;
            }
            ++i;
            closed = true;
            break;
          }
          if (text[i] == '\n') {
            ++line;
            line_start = i + 1;
          }
          field.value += text[i++];
        }
        if (!closed) break;  // torn inside quotes
        if (i < text.size() && text[i] != ',' && text[i] != '\n' && text[i] != '\r') {
          throw CsvError(fmt::format("{}:{}:{}: unexpected character '{}' after a closing quote",
                                     source, line, int(i - line_start) + 1, text[i]));
        }
      } else {
        while (i < text.size() && text[i] != ',' && text[i] != '\n' &&
               !(text[i] == '\r' && i + 1 < text.size() && text[i + 1] == '\n')) {
          if (text[i] == '"') {
            throw CsvError(fmt::format("{}:{}:{}: stray quote inside an unquoted field", source,
                                       line, int(i - line_start) + 1));
          }
          field.value += text[i++];
        }
      }
      record.fields.push_back(std::move(field));
      if (i >= text.size()) break;  // no newline: torn
      if (text[i] == ',') {
        ++i;
        continue;
      }
      i += text[i] == '\r' ? 2 : 1;
      ++line;
      terminated = true;
      break;
    }
    if (!terminated) {
      out.torn = TornTail{record_line, std::int64_t(record_start),
                          std::string(text.substr(record_start))};
      break;
    }
    out.records.push_back(std::move(record));
  }
  return out;
}

class RowDecoder {
 public:
  RowDecoder(const std::string& source, const Record& header) : source_(source) {
    std::array<bool, kColumnCount> seen{};
    for (std::size_t f = 0; f < header.fields.size(); ++f) {
      const Field& field = header.fields[f];
      std::size_t column = 0;
      while (column < kColumnCount && kResultsCsvColumns[column] != field.value) ++column;
      if (column == kColumnCount) {
        fail(field, fmt::format("unknown column \"{}\" in the header", field.value));
      }
      if (seen[column]) fail(field, fmt::format("column \"{}\" appears twice", field.value));
      seen[column] = true;
      position_[column] = f;
    }
    for (std::size_t column = 0; column < kRequiredResultsCsvColumns; ++column) {
      if (!seen[column]) {
        throw CsvError(fmt::format("{}:{}:1: header lacks column \"{}\"", source_, header.line,
                                   kResultsCsvColumns[column]));
      }
    }
    // The device columns come as a pair: a file written before them has neither.
    device_columns_ = seen[col_gpu_index] && seen[col_gpu_uuid];
    if (seen[col_gpu_index] != seen[col_gpu_uuid]) {
      const std::size_t missing = seen[col_gpu_index] ? col_gpu_uuid : col_gpu_index;
      throw CsvError(fmt::format("{}:{}:1: header lacks column \"{}\" (gpu_index and gpu_uuid come together)",
                                 source_, header.line, kResultsCsvColumns[missing]));
    }
    width_ = header.fields.size();
  }

  bool device_columns() const { return device_columns_; }

  ResultRow decode(const Record& record) const {
    if (record.fields.size() != width_) {
      throw CsvError(fmt::format("{}:{}:1: expected {} fields, got {}", source_, record.line,
                                 width_, record.fields.size()));
    }
    ResultRow row;
    row.gpu = text(record, col_gpu);
    row.kernel = text(record, col_kernel);
    SweepPoint& p = row.point;
    const auto layout = parse_layout(text(record, col_layout));
    if (!layout) bad(record, col_layout, "is not a layout (contiguous or paged)");
    p.layout = *layout;
    p.page_size = integer(record, col_page_size, 0);
    if (p.layout == KvLayout::paged && p.page_size < 1) bad(record, col_page_size, "must be >= 1 for paged rows");
    const auto dtype = parse_element_types(text(record, col_dtype));
    if (!dtype) bad(record, col_dtype, "is not a dtype (bf16, fp16 or fp8_e4m3)");
    p.dtype = dtype->dtype;
    p.kv_dtype = dtype->kv_dtype;
    p.batch = integer(record, col_batch, 1);
    p.num_heads = integer(record, col_num_heads, 1);
    p.num_kv_heads = integer(record, col_num_kv_heads, 1);
    p.head_dim = integer(record, col_head_dim, 1);
    p.context_len = integer(record, col_context_len, 1);
    p.cache_capacity = integer(record, col_cache_capacity, 1);
    const auto distribution = parse_length_distribution(text(record, col_length_distribution));
    if (!distribution) bad(record, col_length_distribution, "is not a length distribution");
    p.length_distribution = *distribution;
    p.num_splits = integer(record, col_num_splits, 1);

    const auto status = parse_point_status(text(record, col_status));
    if (!status) {
      bad(record, col_status, "is not a status (ok, oom, launch_failed, invalid, skipped, throttled)");
    }
    row.status = *status;
    // Failure rows may leave the timings empty; an ok row without them is corrupt.
    const bool times_required = row.status == PointStatus::ok;
    row.time_us_median = real(record, col_time_us_median, times_required);
    row.time_us_p10 = real(record, col_time_us_p10, times_required);
    row.time_us_p90 = real(record, col_time_us_p90, times_required);
    row.cv = real(record, col_cv, times_required);
    row.repetitions = integer(record, col_repetitions, 0);
    row.kv_bytes = integer64(record, col_kv_bytes, 0);
    row.tbps = real(record, col_tbps, times_required);
    row.message = text(record, col_message);
    if (device_columns_) {
      row.gpu_index = text(record, col_gpu_index).empty() ? -1 : integer(record, col_gpu_index, 0);
      row.gpu_uuid = text(record, col_gpu_uuid);
    }
    return row;
  }

 private:
  [[noreturn]] void fail(const Field& field, const std::string& reason) const {
    throw CsvError(fmt::format("{}:{}:{}: {}", source_, field.line, field.column, reason));
  }

  [[noreturn]] void bad(const Record& record, std::size_t column, const std::string& reason) const {
    const Field& field = record.fields[position_[column]];
    fail(field, fmt::format("column {}: \"{}\" {}", kResultsCsvColumns[column], field.value, reason));
  }

  const std::string& text(const Record& record, std::size_t column) const {
    return record.fields[position_[column]].value;
  }

  std::int64_t integer64(const Record& record, std::size_t column, std::int64_t min_value) const {
    const std::string& value = text(record, column);
    char* end = nullptr;
    errno = 0;
    const long long number = std::strtoll(value.c_str(), &end, 10);
    if (value.empty() || *end != '\0' || errno == ERANGE) bad(record, column, "is not an integer");
    if (number < min_value) bad(record, column, fmt::format("is below the minimum {}", min_value));
    return number;
  }

  int integer(const Record& record, std::size_t column, int min_value) const {
    const std::int64_t number = integer64(record, column, min_value);
    if (number > std::numeric_limits<int>::max()) bad(record, column, "is too large");
    return int(number);
  }

  double real(const Record& record, std::size_t column, bool required) const {
    const std::string& value = text(record, column);
    if (value.empty()) {
      if (required) bad(record, column, "is empty but the row's status is ok");
      return ResultRow::kMissing;
    }
    char* end = nullptr;
    const double number = std::strtod(value.c_str(), &end);
    if (*end != '\0' || !std::isfinite(number)) bad(record, column, "is not a finite number");
    return number;
  }

  const std::string& source_;
  std::array<std::size_t, kColumnCount> position_{};
  std::size_t width_ = 0;
  bool device_columns_ = true;
};

// Length of the well-formed UTF-8 sequence at text[i], or 0 when it is not one (overlong
// forms, surrogates and code points past U+10FFFF included).
std::size_t utf8_sequence_length(std::string_view text, std::size_t i) {
  const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(text[k]); };
  const unsigned char lead = byte(i);
  if (lead < 0x80) return 1;
  std::size_t length = 0;
  unsigned char low = 0x80, high = 0xBF;  // allowed range of the second byte
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
    if (lead == 0xE0) low = 0xA0;
    if (lead == 0xED) high = 0x9F;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
    if (lead == 0xF0) low = 0x90;
    if (lead == 0xF4) high = 0x8F;
  } else {
    return 0;
  }
  if (i + length > text.size()) return 0;
  if (byte(i + 1) < low || byte(i + 1) > high) return 0;
  for (std::size_t k = 2; k < length; ++k) {
    if (byte(i + k) < 0x80 || byte(i + k) > 0xBF) return 0;
  }
  return length;
}

// The results are text for people and for other tools: refuse bytes that are not UTF-8
// rather than pass them on to a sidecar, a report or a generated header.
void check_utf8(std::string_view text, const std::string& source) {
  if (text.substr(0, 3) == "\xEF\xBB\xBF") {
    throw CsvError(fmt::format("{}:1:1: starts with a UTF-8 byte-order mark (a spreadsheet "
                               "export?); save the CSV as plain UTF-8 without one",
                               source));
  }
  int line = 1;
  std::size_t line_start = 0;
  for (std::size_t i = 0; i < text.size();) {
    if (text[i] == '\n') {
      ++line;
      line_start = ++i;
      continue;
    }
    const std::size_t length = utf8_sequence_length(text, i);
    if (length == 0) {
      throw CsvError(fmt::format("{}:{}:{}: byte 0x{:02X} is not valid UTF-8; the CSV must be "
                                 "UTF-8 text",
                                 source, line, i - line_start + 1,
                                 static_cast<unsigned char>(text[i])));
    }
    i += length;
  }
}

std::string read_file_bytes(const std::string& path) {
  std::error_code error;
  if (!std::filesystem::exists(path, error)) return {};
  std::ifstream in(path, std::ios::binary);
  if (!in) throw CsvError(fmt::format("{}: cannot open: {}", path, std::strerror(errno)));
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

}  // namespace

std::string resume_key(std::string_view kernel, const SweepPoint& point) {
  return fmt::format("{} {}", kernel, point.key());
}

double achieved_tbps(std::int64_t kv_bytes, double time_us_median) {
  if (std::isnan(time_us_median) || time_us_median <= 0) return ResultRow::kMissing;
  return double(kv_bytes) / (time_us_median * 1e-6) / 1e12;
}

std::string format_results_header(bool with_device_columns) {
  std::string line;
  const std::size_t columns = with_device_columns ? kColumnCount : kRequiredResultsCsvColumns;
  for (std::size_t column = 0; column < columns; ++column) {
    if (!line.empty()) line += ',';
    line += kResultsCsvColumns[column];
  }
  return line + '\n';
}

std::string format_results_row(const ResultRow& row, bool with_device_columns) {
  const SweepPoint& p = row.point;
  const std::string device =
      with_device_columns ? fmt::format(",{},{}", row.gpu_index < 0 ? std::string() : std::to_string(row.gpu_index),
                                        quote_if_needed(single_line(row.gpu_uuid)))
                          : std::string();
  return fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}{}\n",
                     quote_if_needed(single_line(row.gpu)), quote_if_needed(single_line(row.kernel)),
                     to_string(p.layout), p.page_size, to_string(p.element_types()), p.batch, p.num_heads,
                     p.num_kv_heads, p.head_dim, p.context_len, p.cache_capacity,
                     to_string(p.length_distribution), p.num_splits,
                     format_number(row.time_us_median), format_number(row.time_us_p10),
                     format_number(row.time_us_p90), format_number(row.cv), row.repetitions,
                     row.kv_bytes, format_number(row.tbps), to_string(row.status),
                     quote_if_needed(single_line(row.message)), device);
}

ResultsCsv parse_results_csv(std::string_view text, const std::string& source) {
  Tokenized tokens = tokenize(text, source);
  // A torn tail may end inside a multi-byte character; it is dropped, so it is not checked.
  check_utf8(tokens.torn ? text.substr(0, std::size_t(tokens.torn->offset)) : text, source);
  ResultsCsv out;
  out.torn = std::move(tokens.torn);
  if (tokens.records.empty()) return out;  // empty file, or only a torn header
  RowDecoder decoder(source, tokens.records.front());
  out.device_columns = decoder.device_columns();
  for (std::size_t r = 1; r < tokens.records.size(); ++r) {
    out.rows.push_back(decoder.decode(tokens.records[r]));
    out.row_lines.push_back(tokens.records[r].line);
  }
  return out;
}

ResultsCsv read_results_csv(const std::string& path) {
  const std::string bytes = read_file_bytes(path);
  return parse_results_csv(bytes, path);
}

void check_results_consistency(const ResultsCsv& contents, const std::string& source) {
  const auto line_of = [&](std::size_t r) {
    return r < contents.row_lines.size() ? contents.row_lines[r] : 0;
  };
  std::unordered_map<std::string, std::size_t> final_rows;  // resume key -> row index
  for (std::size_t r = 0; r < contents.rows.size(); ++r) {
    const ResultRow& row = contents.rows[r];
    if (row.gpu != contents.rows.front().gpu) {
      throw CsvError(fmt::format("{}:{}:1: column gpu: \"{}\" differs from \"{}\" (line {}); one "
                                 "file holds one GPU's results",
                                 source, line_of(r), row.gpu, contents.rows.front().gpu, line_of(0)));
    }
    if (!is_terminal(row.status)) continue;
    const auto [first, inserted] = final_rows.emplace(resume_key(row), r);
    if (!inserted) {
      throw CsvError(fmt::format("{}:{}:1: duplicate row for {} (final already at line {}); a "
                                 "file holds one final row per point, so two sweeps were mixed "
                                 "into it",
                                 source, line_of(r), resume_key(row), line_of(first->second)));
    }
  }
}

bool has_measured_data(const ResultsCsv& contents) {
  return !contents.rows.empty() || contents.torn.has_value();
}

ResultsCsvWriter::ResultsCsvWriter(const std::string& path, Durability durability)
    : path_(path), durability_(durability) {
  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd_ < 0) throw CsvError(fmt::format("{}: cannot open for appending: {}", path, std::strerror(errno)));
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int error = errno;
    ::close(fd_);
    fd_ = -1;
    throw CsvError(fmt::format("{}: {}", path,
                               error == EWOULDBLOCK ? "another sweep is writing this file"
                                                    : std::strerror(error)));
  }
  struct stat info {};
  if (::fstat(fd_, &info) != 0) {
    const int error = errno;
    ::close(fd_);
    fd_ = -1;
    throw CsvError(fmt::format("{}: cannot stat: {}", path, std::strerror(error)));
  }
  if (info.st_size == 0) {
    write_all(format_results_header());
    if (durability_ == Durability::fsync_each_row) {
      // A new file's directory entry is durable only once its folder is synced; without
      // it a machine crash could lose the whole (fdatasync'd) file.
      const std::filesystem::path parent = std::filesystem::path(path).parent_path();
      const int dir_fd = ::open(parent.empty() ? "." : parent.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
      if (dir_fd >= 0) {
        ::fsync(dir_fd);  // best effort: some filesystems refuse
        ::close(dir_fd);
      }
    }
    return;
  }
  // Appending after a torn line would glue a new row onto half an old one.
  char last = '\n';
  std::string first_line;
  const int fd_read = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_read >= 0) {
    if (::pread(fd_read, &last, 1, info.st_size - 1) != 1) last = '\n';
    char head[1024];
    const ssize_t n = ::pread(fd_read, head, sizeof head, 0);
    if (n > 0) first_line.assign(head, std::size_t(n));
    ::close(fd_read);
  }
  // A header written before the device columns: keep its layout for the rows appended.
  first_line = "," + first_line.substr(0, first_line.find_first_of("\r\n")) + ",";
  device_columns_ = first_line.find(",gpu_uuid,") != std::string::npos;
  if (last != '\n') {
    ::close(fd_);
    fd_ = -1;
    throw CsvError(fmt::format("{}: ends with a torn line; resume (which truncates it) before "
                               "appending",
                               path));
  }
}

ResultsCsvWriter::~ResultsCsvWriter() {
  if (fd_ >= 0) ::close(fd_);  // closing releases the lock
}

void ResultsCsvWriter::write_all(const std::string& bytes) {
  std::size_t written = 0;
  while (written < bytes.size()) {
    const ssize_t n = ::write(fd_, bytes.data() + written, bytes.size() - written);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw CsvError(fmt::format("{}: write failed: {}", path_, std::strerror(errno)));
    }
    written += std::size_t(n);
  }
  if (durability_ == Durability::fsync_each_row && ::fdatasync(fd_) != 0) {
    throw CsvError(fmt::format("{}: fdatasync failed: {}", path_, std::strerror(errno)));
  }
}

void ResultsCsvWriter::append(const ResultRow& row) { write_all(format_results_row(row, device_columns_)); }

ResumeState resume_state_from(const ResultsCsv& contents) {
  ResumeState state;
  for (const ResultRow& row : contents.rows) {
    ++state.rows_read;
    state.gpus.insert(row.gpu);
    if (is_terminal(row.status)) state.finished[resume_key(row)] = row;
  }
  return state;
}

ResumeState load_resume_state(const std::string& path) {
  const ResultsCsv contents = read_results_csv(path);
  ResumeState state = resume_state_from(contents);
  if (contents.torn) {
    if (::truncate(path.c_str(), contents.torn->offset) != 0) {
      throw CsvError(fmt::format("{}:{}:1: cannot truncate the torn last line: {}", path,
                                 contents.torn->line, std::strerror(errno)));
    }
    state.truncated_tail = contents.torn;
  }
  return state;
}

}  // namespace splitkv::tuner
