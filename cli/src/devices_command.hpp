// `splitkv devices`: the GPU facts a sweep would record, for every visible device.
#pragma once

#include <iosfwd>

namespace splitkv::cli {

// Exit codes: 0 listed, 1 no CUDA in this build or no usable device.
int run_devices_command(std::ostream& out, std::ostream& err);

}  // namespace splitkv::cli
