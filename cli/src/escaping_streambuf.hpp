// What the tool prints echoes text from the user's files: a grid's name, a CSV's gpu column,
// a header's kGpuName, a line that failed to parse. A control character among them would reach
// the terminal raw and could recolour, move the cursor or clear the screen, so everything the
// commands print passes through this buffer, which writes each one as \xNN. Newlines and tabs
// pass: messages are made of lines, and tabs are harmless.
#pragma once

#include <cstdio>
#include <streambuf>

namespace splitkv::cli {

class EscapingStreambuf : public std::streambuf {
 public:
  explicit EscapingStreambuf(std::streambuf* target) : target_(target) {}

 protected:
  int_type overflow(int_type c) override {
    if (traits_type::eq_int_type(c, traits_type::eof())) return traits_type::not_eof(c);
    const char ch = traits_type::to_char_type(c);
    return xsputn(&ch, 1) == 1 ? c : traits_type::eof();
  }

  std::streamsize xsputn(const char* text, std::streamsize size) override {
    std::streamsize plain_from = 0;
    for (std::streamsize i = 0; i < size; ++i) {
      const auto c = static_cast<unsigned char>(text[i]);
      if ((c >= 0x20 && c != 0x7f) || c == '\n' || c == '\t') continue;
      char escaped[8];
      std::snprintf(escaped, sizeof escaped, "\\x%02x", c);
      if (!put(text + plain_from, i - plain_from) || !put(escaped, 4)) return plain_from;
      plain_from = i + 1;
    }
    return put(text + plain_from, size - plain_from) ? size : plain_from;
  }

  int sync() override { return target_->pubsync(); }

 private:
  bool put(const char* text, std::streamsize size) { return target_->sputn(text, size) == size; }

  std::streambuf* target_;
};

}  // namespace splitkv::cli
