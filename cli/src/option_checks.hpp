// Validators shared by the subcommands' numeric options: CLI11 parses "-5" as a number, so a
// count with no validator takes it, and the commands read <= 0 as "not given".
#pragma once

#include <string>

#include <CLI/CLI.hpp>

namespace splitkv::cli {

// A whole number >= 1, said so in the message (CLI::PositiveNumber words its range in doubles).
inline CLI::Validator positive_count() {
  return CLI::Validator(
      [](std::string& input) -> std::string {
        long long value = 0;
        if (CLI::detail::lexical_cast(input, value) && value >= 1) return "";
        return "must be a whole number >= 1, not " + input;
      },
      "POSITIVE");
}

}  // namespace splitkv::cli
