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

// Text with its control characters (bytes below 0x20, and 0x7f) written as
// \n, \r, \t or \xNN; other bytes as they are. What a name from a file
// becomes before it reaches a terminal or a comment: a newline or an escape
// sequence in it could rewrite what a user sees, or end a comment in
// generated code and start code.
std::string escapeControls(std::string_view s);
bool hasControls(std::string_view s);

// Shortest text that reads back to the same double, Python style:
// 2.0, 0.1, 1e-05, inf, -inf, nan.
std::string formatDouble(double v);

// "[1, 2, 3]"
std::string formatInts(const std::vector<int64_t>& v);

std::string join(const std::vector<std::string>& parts, std::string_view sep);

// "512M", "2G", "1.5G", "4096" (bytes; K, M, G, T are powers of 1024), or
// "none" (0). Throws Error naming the text otherwise.
uint64_t parseByteSize(const std::string& text);
// The other way, rounded to one decimal: "45.3M", "512K", "900" (bytes).
std::string formatByteSize(uint64_t bytes);

}  // namespace magpy
