// Small text helpers shared by printers and messages.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace magpy {

// Python repr of a str: 'a\'b' with \n, \t, \\ and \xNN escapes. With
// asciiOnly, bytes past ASCII are \xNN too: a name from a file whose
// bytes need not be UTF-8, shown on a terminal.
std::string quote(std::string_view s, bool asciiOnly = false);

// Shortest text that reads back to the same double, Python style:
// 2.0, 0.1, 1e-05, inf, -inf, nan.
std::string formatDouble(double v);

// "[1, 2, 3]"
std::string formatInts(const std::vector<int64_t>& v);

std::string join(const std::vector<std::string>& parts, std::string_view sep);

// "512M", "2G", "1.5G", "4096" (bytes; K, M, G, T are powers of 1024), or
// "none" (0). Throws Error naming the text otherwise.
uint64_t parseByteSize(const std::string& text);

}  // namespace magpy
