#include "splitkv/tuner/sidecar.hpp"

#include <cstdlib>
#include <filesystem>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tuner_test_support.hpp"

namespace splitkv::tuner {
namespace {

using testing::read_text;
using testing::ScopedTempDir;
using testing::starts_with;

Sidecar sample_sidecar() {
  Sidecar s;
  s.tool_version = "0.1.0";
  s.git_sha = "0123456789abcdef0123456789abcdef01234567";
  s.results_csv = "results/h200/quick.csv";
  s.grid_path = "sweeps/quick.json";
  s.grid_sha256 = std::string(64, 'a');
  s.grid_name = "quick";
  s.kernels = {"splitkv", "unpacked_gqa"};
  s.search = "pruned";
  s.shard = "1/4";
  s.shard_by = "cost";
  s.memory_budget_gb = 100;
  s.protocol.repetitions = 7;
  s.protocol.min_working_set_l2_multiple = 3.5;
  s.protocol.warmup_replays = 4;
  s.protocol.min_time_s = 0.002;
  s.device.index = 1;
  s.device.name = "NVIDIA H200";
  s.device.uuid = "GPU-5b1a0c2e-0000-4000-8000-000000000001";
  s.device.sm_count = 132;
  s.device.l2_bytes = 62914560;
  s.device.memory_bytes = 150110011392;
  s.device.sm_clock_mhz = 1980;
  s.device.mem_clock_mhz = 3201;
  s.device.driver_version = "13.0";
  s.device.cuda_runtime_version = "13.0";
  s.device.compute_capability = "9.0";
  s.started_at = "2026-11-29T10:00:00Z";
  s.finished_at = "2026-11-29T10:09:30Z";
  s.state = "complete";
  s.message = "";
  s.runs = 2;
  s.counts.planned = 483;
  s.counts.ok = 480;
  s.counts.failed = 3;
  s.counts.pruned = 93;
  s.counts.pruned_by_reason = {{"memory_budget", 24}, {"splits_exceed_tiles", 69}};
  s.counts.search_skipped = 11;
  return s;
}

TEST(Sidecar, PathSitsNextToTheCsv) {
  EXPECT_EQ(sidecar_path_for("results/h200/quick.csv"), "results/h200/quick.json");
  EXPECT_EQ(sidecar_path_for("quick.csv"), "quick.json");
  EXPECT_EQ(sidecar_path_for("results/run.out"), "results/run.out.json");
}

TEST(Sidecar, RoundTripsEveryField) {
  ScopedTempDir dir;
  const std::string path = dir.file("quick.json");
  const Sidecar written = sample_sidecar();
  write_sidecar(path, written);
  const Sidecar read = read_sidecar(path);
  EXPECT_EQ(sidecar_to_json(read), sidecar_to_json(written));
  EXPECT_EQ(read.device.l2_bytes, 62914560);
  EXPECT_EQ(read.counts.pruned_by_reason.at("splits_exceed_tiles"), 69);
  EXPECT_EQ(read.kernels, written.kernels);

  const nlohmann::json document = nlohmann::json::parse(read_text(path));
  EXPECT_EQ(document.at("schema"), kSidecarSchema);
  EXPECT_EQ(document.at("grid").at("sha256"), std::string(64, 'a'));
  EXPECT_EQ(document.at("device").at("name"), "NVIDIA H200");
  EXPECT_EQ(document.at("protocol").at("repetitions"), 7);
}

TEST(Sidecar, DevicesOfAMergeRoundTripAndOlderSidecarsRead) {
  ScopedTempDir dir;
  Sidecar merged = sample_sidecar();
  merged.devices = {merged.device, merged.device};
  merged.devices[1].index = 2;
  merged.devices[1].uuid = "GPU-5b1a0c2e-0000-4000-8000-000000000002";
  write_sidecar(dir.file("merged.json"), merged);
  const Sidecar read = read_sidecar(dir.file("merged.json"));
  ASSERT_EQ(read.devices.size(), 2u);
  EXPECT_EQ(read.devices[1].uuid, merged.devices[1].uuid);
  EXPECT_EQ(read.shard_by, "cost");
  // Written before the UUID, the shard dealing and the device list were recorded.
  nlohmann::json old = sidecar_to_json(sample_sidecar());
  old.erase("shard_by");
  old["device"].erase("uuid");
  testing::write_text(dir.file("old.json"), old.dump(2));
  const Sidecar older = read_sidecar(dir.file("old.json"));
  EXPECT_EQ(older.shard_by, "index");
  EXPECT_EQ(older.device.uuid, "");
  EXPECT_TRUE(older.devices.empty());
  EXPECT_FALSE(sidecar_to_json(sample_sidecar()).contains("devices"));  // one device: no list
}

TEST(Sidecar, UnfinishedRunHasNullFinishedAt) {
  ScopedTempDir dir;
  Sidecar running = sample_sidecar();
  running.finished_at.clear();
  running.state = "running";
  write_sidecar(dir.file("s.json"), running);
  EXPECT_TRUE(nlohmann::json::parse(read_text(dir.file("s.json"))).at("finished_at").is_null());
  EXPECT_EQ(read_sidecar(dir.file("s.json")).finished_at, "");
}

TEST(Sidecar, WritesAtomicallyAndLeavesNoTempFiles) {
  ScopedTempDir dir;
  const std::string path = dir.file("s.json");
  Sidecar s = sample_sidecar();
  write_sidecar(path, s);
  s.state = "interrupted";
  s.message = "interrupted; run again with --resume";
  write_sidecar(path, s);  // replaces, never appends
  EXPECT_EQ(read_sidecar(path).state, "interrupted");
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir.path())) {
    ++files;
    EXPECT_EQ(entry.path().filename(), "s.json");
  }
  EXPECT_EQ(files, 1);
}

TEST(Sidecar, ErrorsNameTheFile) {
  ScopedTempDir dir;
  const std::string missing_dir = dir.file("no/such/dir/s.json");
  EXPECT_THROW(write_sidecar(missing_dir, sample_sidecar()), SidecarError);
  try {
    read_sidecar(dir.file("absent.json"));
    FAIL();
  } catch (const SidecarError& error) {
    EXPECT_PRED2(starts_with, std::string(error.what()), dir.file("absent.json") + ": cannot open");
  }
  testing::write_text(dir.file("other.json"), R"({"schema": "something-else/2"})");
  try {
    read_sidecar(dir.file("other.json"));
    FAIL();
  } catch (const SidecarError& error) {
    EXPECT_PRED2(starts_with, std::string(error.what()),
                 dir.file("other.json") + ": schema \"something-else/2\" is not splitkv-sweep-sidecar/1");
  }
}

TEST(Sidecar, Iso8601IsUtcToTheSecond) {
  using std::chrono::system_clock;
  EXPECT_EQ(iso8601_utc(system_clock::from_time_t(0)), "1970-01-01T00:00:00Z");
  EXPECT_EQ(iso8601_utc(system_clock::from_time_t(1700000000)), "2023-11-14T22:13:20Z");
}

TEST(Sidecar, GitShaComesFromTheRepositoryOrTheEnvironment) {
  ScopedTempDir dir;
  ::unsetenv("SPLITKV_GIT_SHA");
  EXPECT_EQ(git_head_sha(dir.path().string()), "unknown");  // not a repository
  ::setenv("SPLITKV_GIT_SHA", "feedface", 1);
  EXPECT_EQ(git_head_sha(dir.path().string()), "feedface");
  ::unsetenv("SPLITKV_GIT_SHA");

  if (!std::filesystem::exists(std::string(SPLITKV_SOURCE_DIR) + "/.git")) {
    GTEST_SKIP() << "source tree is not a git checkout";
  }
  const std::string sha = git_head_sha(SPLITKV_SOURCE_DIR);
  if (sha == "unknown") GTEST_SKIP() << "git is not installed";
  ASSERT_GE(sha.size(), 40u);
  EXPECT_EQ(sha.find_first_not_of("0123456789abcdef"), 40u == sha.size() ? std::string::npos : 40u);
  EXPECT_TRUE(sha.size() == 40 || sha.substr(40) == "-dirty") << sha;
}

}  // namespace
}  // namespace splitkv::tuner
