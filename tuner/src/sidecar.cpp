#include "splitkv/tuner/sidecar.hpp"

#include "splitkv/tuner/atomic_file.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#ifndef SPLITKV_VERSION
#define SPLITKV_VERSION "0.0.0"
#endif
#ifndef SPLITKV_SOURCE_DIR
#define SPLITKV_SOURCE_DIR "."
#endif

namespace splitkv::tuner {
namespace {

using nlohmann::json;

json device_to_json(const DeviceFacts& d) {
  return json{{"index", d.index},
              {"name", d.name},
              {"uuid", d.uuid},
              {"sm_count", d.sm_count},
              {"l2_bytes", d.l2_bytes},
              {"memory_bytes", d.memory_bytes},
              {"sm_clock_mhz", d.sm_clock_mhz},
              {"mem_clock_mhz", d.mem_clock_mhz},
              {"driver_version", d.driver_version},
              {"cuda_runtime_version", d.cuda_runtime_version},
              {"compute_capability", d.compute_capability}};
}

DeviceFacts device_from_json(const json& j) {
  DeviceFacts d;
  d.index = j.at("index").get<int>();
  d.name = j.at("name").get<std::string>();
  d.uuid = j.value("uuid", std::string());  // absent in sidecars written before it was recorded
  d.sm_count = j.at("sm_count").get<int>();
  d.l2_bytes = j.at("l2_bytes").get<std::int64_t>();
  d.memory_bytes = j.at("memory_bytes").get<std::int64_t>();
  d.sm_clock_mhz = j.at("sm_clock_mhz").get<int>();
  d.mem_clock_mhz = j.at("mem_clock_mhz").get<int>();
  d.driver_version = j.at("driver_version").get<std::string>();
  d.cuda_runtime_version = j.at("cuda_runtime_version").get<std::string>();
  d.compute_capability = j.at("compute_capability").get<std::string>();
  return d;
}

// Runs a shell command and returns its stdout without the trailing newline, or nullopt
// when it fails.
std::optional<std::string> command_output(const std::string& command) {
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return std::nullopt;
  std::string out;
  char buffer[256];
  while (std::fgets(buffer, sizeof buffer, pipe) != nullptr) out += buffer;
  if (::pclose(pipe) != 0) return std::nullopt;
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  return out;
}

std::string shell_quote(const std::string& text) {
  std::string out = "'";
  for (char c : text) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  return out + "'";
}


}  // namespace

std::string sidecar_path_for(const std::string& csv_path) {
  std::filesystem::path path(csv_path);
  if (path.extension() == ".csv") return path.replace_extension(".json").string();
  return csv_path + ".json";
}

json sidecar_to_json(const Sidecar& s) {
  json pruned_by_reason = json::object();
  for (const auto& [reason, count] : s.counts.pruned_by_reason) pruned_by_reason[reason] = count;
  json document = json{
      {"schema", kSidecarSchema},
      {"tool", {{"name", "splitkv"}, {"version", s.tool_version}}},
      {"git_sha", s.git_sha},
      {"results_csv", s.results_csv},
      {"grid", {{"path", s.grid_path}, {"sha256", s.grid_sha256}, {"name", s.grid_name}}},
      {"kernels", s.kernels},
      {"search", s.search},
      {"shard", s.shard},
      {"shard_by", s.shard_by},
      {"memory_budget_gb", s.memory_budget_gb},
      {"protocol",
       {{"repetitions", s.protocol.repetitions},
        {"min_working_set_l2_multiple", s.protocol.min_working_set_l2_multiple},
        {"warmup_replays", s.protocol.warmup_replays},
        {"min_time_s", s.protocol.min_time_s}}},
      {"device", device_to_json(s.device)},
      {"started_at", s.started_at},
      {"finished_at", s.finished_at.empty() ? json(nullptr) : json(s.finished_at)},
      {"state", s.state},
      {"message", s.message},
      {"runs", s.runs},
      {"counts",
       {{"planned", s.counts.planned},
        {"ok", s.counts.ok},
        {"failed", s.counts.failed},
        {"pruned", s.counts.pruned},
        {"pruned_by_reason", pruned_by_reason},
        {"search_skipped", s.counts.search_skipped}}},
  };
  if (!s.devices.empty()) {
    json devices = json::array();
    for (const DeviceFacts& d : s.devices) devices.push_back(device_to_json(d));
    document["devices"] = devices;
  }
  if (!s.length_files.empty()) {
    json files = json::object();
    for (const auto& [name, file] : s.length_files) files[name] = {{"path", file.first}, {"sha256", file.second}};
    document["grid"]["length_files"] = files;
  }
  return document;
}

Sidecar sidecar_from_json(const json& j, const std::string& source) {
  try {
    if (j.at("schema").get<std::string>() != kSidecarSchema) {
      throw SidecarError(fmt::format("{}: schema \"{}\" is not {}", source,
                                     j.at("schema").get<std::string>(), kSidecarSchema));
    }
    Sidecar s;
    s.tool_version = j.at("tool").at("version").get<std::string>();
    s.git_sha = j.at("git_sha").get<std::string>();
    s.results_csv = j.at("results_csv").get<std::string>();
    s.grid_path = j.at("grid").at("path").get<std::string>();
    s.grid_sha256 = j.at("grid").at("sha256").get<std::string>();
    s.grid_name = j.at("grid").at("name").get<std::string>();
    if (j.at("grid").contains("length_files")) {
      for (const auto& item : j.at("grid").at("length_files").items()) {
        s.length_files[item.key()] = {item.value().at("path").get<std::string>(),
                                      item.value().at("sha256").get<std::string>()};
      }
    }
    s.kernels = j.at("kernels").get<std::vector<std::string>>();
    s.search = j.at("search").get<std::string>();
    s.shard = j.at("shard").get<std::string>();
    s.shard_by = j.value("shard_by", std::string("index"));  // older sidecars: shards were dealt by index
    s.memory_budget_gb = j.at("memory_budget_gb").get<double>();
    const json& protocol = j.at("protocol");
    s.protocol.repetitions = protocol.at("repetitions").get<int>();
    s.protocol.min_working_set_l2_multiple = protocol.at("min_working_set_l2_multiple").get<double>();
    s.protocol.warmup_replays = protocol.at("warmup_replays").get<int>();
    s.protocol.min_time_s = protocol.at("min_time_s").get<double>();
    s.device = device_from_json(j.at("device"));
    if (j.contains("devices")) {
      for (const json& device : j.at("devices")) s.devices.push_back(device_from_json(device));
    }
    s.started_at = j.at("started_at").get<std::string>();
    s.finished_at = j.at("finished_at").is_null() ? "" : j.at("finished_at").get<std::string>();
    s.state = j.at("state").get<std::string>();
    s.message = j.at("message").get<std::string>();
    s.runs = j.at("runs").get<int>();
    const json& counts = j.at("counts");
    s.counts.planned = counts.at("planned").get<std::int64_t>();
    s.counts.ok = counts.at("ok").get<std::int64_t>();
    s.counts.failed = counts.at("failed").get<std::int64_t>();
    s.counts.pruned = counts.at("pruned").get<std::int64_t>();
    s.counts.pruned_by_reason = counts.at("pruned_by_reason").get<std::map<std::string, std::int64_t>>();
    s.counts.search_skipped = counts.at("search_skipped").get<std::int64_t>();
    return s;
  } catch (const json::exception& error) {
    throw SidecarError(fmt::format("{}: {}", source, error.what()));
  }
}

void write_sidecar(const std::string& sidecar_path, const Sidecar& sidecar) {
  // Paths and device names are bytes, not always UTF-8; a plain dump() would throw
  // json::type_error on them and stop a sweep before its first row. Replace such bytes.
  const std::string text =
      sidecar_to_json(sidecar).dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  try {
    write_file_atomically(sidecar_path, text);
  } catch (const OutputError& error) {
    throw SidecarError(error.what());
  }
}

Sidecar read_sidecar(const std::string& sidecar_path) {
  std::ifstream in(sidecar_path, std::ios::binary);
  if (!in) throw SidecarError(fmt::format("{}: cannot open: {}", sidecar_path, std::strerror(errno)));
  std::ostringstream text;
  text << in.rdbuf();
  json document;
  try {
    document = json::parse(text.str());
  } catch (const json::parse_error& error) {
    throw SidecarError(fmt::format("{}: invalid JSON: {}", sidecar_path, error.what()));
  }
  return sidecar_from_json(document, sidecar_path);
}

std::string iso8601_utc(std::chrono::system_clock::time_point time) {
  const std::time_t seconds = std::chrono::system_clock::to_time_t(time);
  std::tm utc{};
  ::gmtime_r(&seconds, &utc);
  char buffer[32];
  std::strftime(buffer, sizeof buffer, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return buffer;
}

std::string git_head_sha(const std::string& repo_dir) {
  if (const char* forced = std::getenv("SPLITKV_GIT_SHA"); forced != nullptr && *forced != '\0') {
    return forced;
  }
  const std::string git = "git -C " + shell_quote(repo_dir);
  const auto sha = command_output(git + " rev-parse HEAD 2>/dev/null");
  if (!sha || sha->size() != 40) return "unknown";
  const auto changes = command_output(git + " status --porcelain --untracked-files=no 2>/dev/null");
  return changes && !changes->empty() ? *sha + "-dirty" : *sha;
}

std::string source_dir() { return SPLITKV_SOURCE_DIR; }

std::string tool_version() { return SPLITKV_VERSION; }

}  // namespace splitkv::tuner
