// The KV cache's element class a num_splits table is fitted for. bf16 and fp16 caches read two
// bytes per element and run the same kernels, so one table serves both (the fit pools them and
// fit.md says what a table per dtype would gain); an e4m3 cache reads one byte per element
// behind the same q/out, which halves a split's memory time against the same combine, so its
// best split counts differ and it gets a table of its own.
#pragma once

#include <optional>
#include <string_view>

#include "splitkv/num_splits.hpp"

namespace splitkv::heuristics {

enum class KvDtypeClass { sixteen_bit, fp8_e4m3 };

// "16bit", "fp8_e4m3": how `--kv-dtype` and a header's kKvDtype spell it.
inline std::string_view to_string(KvDtypeClass kv_dtype) {
  return kv_dtype == KvDtypeClass::fp8_e4m3 ? "fp8_e4m3" : "16bit";
}

inline std::optional<KvDtypeClass> parse_kv_dtype_class(std::string_view text) {
  if (text == "16bit") return KvDtypeClass::sixteen_bit;
  if (text == "fp8_e4m3") return KvDtypeClass::fp8_e4m3;
  return std::nullopt;
}

// The KV cache the runtime policy (num_splits.hpp) picks its table by, for rows of this class.
inline NumSplitsKvDtype num_splits_kv_dtype(KvDtypeClass kv_dtype) {
  return kv_dtype == KvDtypeClass::fp8_e4m3 ? NumSplitsKvDtype::fp8_e4m3 : NumSplitsKvDtype::sixteen_bit;
}

}  // namespace splitkv::heuristics
