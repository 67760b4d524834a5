// my own table
#pragma once
namespace mine { inline constexpr int kSplits = 8; }
