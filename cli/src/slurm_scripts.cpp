// `splitkv sweep --emit-slurm DIR --shards N`: the sweep as a Slurm job array, one task per
// shard, each a `splitkv sweep --shard i/N --resume` into DIR/shard<i>.csv, then a merge job
// that waits for the whole array (afterok). resume.sh resubmits only the shards whose
// sidecar does not say complete, so a cancelled, preempted or failed task costs only the
// point it was timing.
#include <cctype>
#include <filesystem>
#include <ostream>

#include <fmt/format.h>

#include "splitkv/tuner/atomic_file.hpp"
#include "splitkv/tuner/sidecar.hpp"
#include "sweep_support.hpp"

namespace splitkv::cli {
namespace {

namespace fs = std::filesystem;
using namespace splitkv::tuner;

std::string absolute(const std::string& path) { return fs::absolute(path).lexically_normal().string(); }

// Stands for the array task's index in a word of the task's command line.
constexpr char kTask = '\x1f';

// The words as a shell line; kTask in a word becomes "$i".
std::string quoted_command(const std::vector<std::string>& words) {
  std::string text;
  for (const std::string& word : words) {
    text += text.empty() ? "" : " ";
    std::size_t start = 0;
    for (std::size_t at; (at = word.find(kTask, start)) != std::string::npos; start = at + 1) {
      if (at > start) text += shell_quote(word.substr(start, at - start));
      text += "\"$i\"";
    }
    if (start < word.size() || start == 0) text += shell_quote(word.substr(start));
  }
  return text;
}

// The lines every script starts with; `what` says what it is.
std::string script_head(const std::string& what) {
  return "#!/usr/bin/env bash\n# " + what + "\n# Written by splitkv sweep --emit-slurm; rerun that to change it.\n";
}

}  // namespace

int emit_slurm_scripts(const SweepCommandOptions& options, const SweepInputs& inputs, std::ostream& out,
                       std::ostream&) {
  const int shards = options.slurm_shards;
  if (shards < 1) throw InputError("--emit-slurm needs --shards N (N >= 1): one array task per shard");
  if (shards > 10000) throw InputError(fmt::format("--shards {}: at most 10000", shards));
  if (options.dry_run) throw InputError("--emit-slurm writes scripts and times nothing; drop --dry-run");
  if (options.resume) throw InputError("--emit-slurm: the array tasks always resume; drop --resume (resume.sh resubmits)");

  const std::string dir = absolute(options.emit_slurm_dir);
  const std::string out_csv = absolute(options.out_path);
  std::error_code error;
  if (fs::exists(dir, error) && !fs::is_directory(dir, error)) {
    throw InputError(fmt::format("--emit-slurm {}: exists and is not a folder", options.emit_slurm_dir));
  }
  if (!fs::is_directory(fs::path(dir).parent_path(), error)) {
    throw InputError(fmt::format("--emit-slurm {}: folder {} does not exist; create it first", options.emit_slurm_dir,
                                 fs::path(dir).parent_path().string()));
  }
  check_output(options.out_path, false, options.grid_path, ShardSpec{}, inputs.shard_by);
  if (fs::is_directory(dir, error)) {
    for (const auto& entry : fs::directory_iterator(dir)) {
      const std::string name = entry.path().filename().string();
      if (name.rfind("shard", 0) == 0 && entry.path().extension() == ".csv" &&
          has_measured_data(read_results_csv(entry.path().string()))) {
        throw InputError(fmt::format("--emit-slurm {}: {} holds rows of an earlier submission; run {}/resume.sh to "
                                     "continue it, or choose a new folder",
                                     options.emit_slurm_dir, name, dir));
      }
    }
  }
  fs::create_directories(fs::path(dir) / "logs");

  // Every path absolute: the jobs start wherever Slurm starts them.
  SweepCommandOptions task = options;
  task.grid_path = absolute(options.grid_path);
  const std::string self = self_executable();
  std::string name = "splitkv-" + (inputs.grid.name.empty() ? std::string("sweep") : inputs.grid.name);
  for (char& c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.') c = '_';
  }
  std::vector<std::string> sweep = {self};
  for (std::string& word : shard_sweep_arguments(task, inputs, dir + "/shard" + kTask + ".csv",
                                                  std::string(1, kTask) + fmt::format("/{}", shards))) {
    sweep.push_back(std::move(word));
  }
  const std::string sweep_line = quoted_command(sweep);

  std::string array = script_head(fmt::format("Slurm array task: shard $SLURM_ARRAY_TASK_ID of {} of {}.", shards,
                                              task.grid_path));
  array += fmt::format("#SBATCH --job-name={}\n#SBATCH --array=0-{}\n#SBATCH --ntasks=1\n", name, shards - 1);
  if (options.slurm_gres != "none") array += "#SBATCH --gres=" + options.slurm_gres + "\n";
  array += fmt::format("#SBATCH --output={}/logs/shard%a.log\n#SBATCH --open-mode=append\n", dir);
  array += "set -euo pipefail\ni=${SLURM_ARRAY_TASK_ID:?submit this with submit.sh or resume.sh}\n";
  array += "# Resumes whatever an earlier attempt left; a SIGTERM (scancel, preemption) ends it cleanly.\n";
  array += "exec " + sweep_line + "\n";

  std::vector<std::string> merge_words = {self, "merge", "--out", out_csv};
  for (int i = 0; i < shards; ++i) merge_words.push_back(fmt::format("{}/shard{}.csv", dir, i));
  std::string merge = script_head("Slurm job: merges the shards into " + out_csv + " once every array task is done.");
  merge += fmt::format("#SBATCH --job-name={}-merge\n#SBATCH --ntasks=1\n#SBATCH --output={}/logs/merge.log\n"
                       "#SBATCH --open-mode=append\nset -euo pipefail\nexec {}\n",
                       name, dir, quoted_command(merge_words));

  // submit.sh and resume.sh share the submission of the array (all shards, or the unfinished
  // ones) and of the merge job that waits for it.
  const std::string common = fmt::format(
      "set -euo pipefail\n"
      "dir={}\nout={}\nshards={}\n"
      "# Extra sbatch arguments for every job (partition, account, time limit), e.g.\n"
      "#   SPLITKV_SBATCH_ARGS='--partition=gpu --time=02:00:00' $0\n"
      "read -r -a extra <<<\"${{SPLITKV_SBATCH_ARGS:-}}\"\n"
      "mkdir -p \"$dir/jobs\"\n"
      "submit_array() {{  # task list, e.g. 0-7 or 1,4\n"
      "  local id\n"
      "  id=$(sbatch --parsable \"${{extra[@]}}\" --array=\"$1\" \"$dir/sweep_array.sh\")\n"
      "  id=${{id%%;*}}\n"
      "  echo \"$id\" >>\"$dir/jobs/array\"\n"
      "  echo \"submitted array job $id (tasks $1)\"\n"
      "  after+=\":$id\"\n"
      "}}\n"
      "submit_merge() {{\n"
      "  local id\n"
      "  id=$(sbatch --parsable \"${{extra[@]}}\" ${{after:+--dependency=afterok$after --kill-on-invalid-dep=yes}} "
      "\"$dir/merge.sh\")\n"
      "  id=${{id%%;*}}\n"
      "  echo \"$id\" >>\"$dir/jobs/merge\"\n"
      "  echo \"submitted merge job $id${{after:+ (afterok$after)}} -> $out\"\n"
      "}}\n"
      "after=\"\"\n",
      shell_quote(dir), shell_quote(out_csv), shards);
  std::string submit = script_head(fmt::format(
      "Submits the array ({} tasks, one per shard) and the merge job that waits for all of it (afterok).", shards));
  submit += common + "submit_array \"0-$((shards - 1))\"\nsubmit_merge\n";

  std::string resume = script_head(
      "Resubmits only the shards whose sidecar does not say complete, and the merge job after them.");
  resume += common +
            "# Tasks of this folder's array jobs that are still queued or running are left alone; the new\n"
            "# merge job waits for them too. A merge job still waiting on a cancelled task never runs: it goes.\n"
            "active=\" \"\n"
            "if [ -s \"$dir/jobs/array\" ]; then\n"
            "  for task in $(squeue -h -r -j \"$(paste -sd, \"$dir/jobs/array\")\" -o %i 2>/dev/null); do\n"
            "    active+=\"${task##*_} \"\n"
            "    after+=\":$task\"\n"
            "  done\n"
            "fi\n"
            "if [ -s \"$dir/jobs/merge\" ]; then\n"
            "  scancel --state=PENDING $(cat \"$dir/jobs/merge\") 2>/dev/null || true\n"
            "fi\n"
            "todo=()\n"
            "for ((i = 0; i < shards; i++)); do\n"
            "  [[ \"$active\" == *\" $i \"* ]] && continue\n"
            "  grep -qs '\"state\": \"complete\"' \"$dir/shard$i.json\" || todo+=(\"$i\")\n"
            "done\n"
            "if ((${#todo[@]} > 0)); then\n"
            "  submit_array \"$(IFS=,; echo \"${todo[*]}\")\"\n"
            "elif [ -z \"$after\" ] && [ -e \"$out\" ]; then\n"
            "  echo \"every shard is complete and merged into $out; nothing to resubmit\"\n"
            "  exit 0\n"
            "fi\n"
            "submit_merge\n";

  struct Script {
    const char* file;
    const std::string* text;
  };
  for (const Script& s : {Script{"sweep_array.sh", &array}, Script{"merge.sh", &merge}, Script{"submit.sh", &submit},
                          Script{"resume.sh", &resume}}) {
    const std::string path = dir + "/" + s.file;
    write_file_atomically(path, *s.text);
    fs::permissions(path, fs::perms::owner_exec | fs::perms::group_exec | fs::perms::others_exec,
                    fs::perm_options::add);
  }
  out << fmt::format("splitkv sweep: wrote {0}/sweep_array.sh ({1} array tasks, shapes dealt by {2}), "
                     "{0}/merge.sh (-> {3}), {0}/submit.sh and {0}/resume.sh\n"
                     "splitkv sweep: submit with {0}/submit.sh; after a cancelled or failed task, {0}/resume.sh\n",
                     dir, shards, to_string(inputs.shard_by), out_csv);
  return 0;
}

}  // namespace splitkv::cli
