// The heuristics write their outputs through the tuner's atomic file writer (one
// implementation for every output the tool writes).
#pragma once

#include "splitkv/tuner/atomic_file.hpp"

namespace splitkv::heuristics {
using tuner::FileContents;
using tuner::OutputError;
using tuner::read_file_if_exists;
using tuner::write_file_atomically;
}  // namespace splitkv::heuristics
