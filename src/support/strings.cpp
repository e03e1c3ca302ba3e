#include "magpy/support/strings.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "magpy/support/error.h"

namespace magpy {

namespace {

bool isControl(unsigned char c) { return c < 0x20 || c == 0x7f; }

// Appends c escaped the way Python writes it in a str literal.
void appendEscaped(std::string& out, unsigned char c) {
  switch (c) {
    case '\n': out += "\\n"; return;
    case '\t': out += "\\t"; return;
    case '\r': out += "\\r"; return;
    default: {
      static const char* kHex = "0123456789abcdef";
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
}

}  // namespace

std::string quote(std::string_view s, bool asciiOnly) {
  std::string out = "'";
  for (unsigned char c : s) {
    if (c == '\'' || c == '\\') out += '\\';
    if (isControl(c) || (asciiOnly && c >= 0x80)) appendEscaped(out, c);
    else out += char(c);
  }
  return out + "'";
}

std::string escapeControls(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (unsigned char c : s) {
    if (isControl(c)) appendEscaped(out, c);
    else out += char(c);
  }
  return out;
}

bool hasControls(std::string_view s) {
  return std::any_of(s.begin(), s.end(), [](unsigned char c) { return isControl(c); });
}

std::string formatDouble(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, v);
  std::string s(buf, res.ptr);
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}

std::string formatInts(const std::vector<int64_t>& v) {
  std::string out = "[";
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) out += ", ";
    out += std::to_string(v[i]);
  }
  return out + "]";
}

std::string join(const std::vector<std::string>& parts, std::string_view sep) {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i) out += sep;
    out += parts[i];
  }
  return out;
}

std::string formatByteSize(uint64_t bytes) {
  const char* units = "KMGT";
  double v = double(bytes);
  int unit = -1;
  while (v >= 1024 && unit < 3) v /= 1024, ++unit;
  if (unit < 0) return std::to_string(bytes);
  char text[32];
  std::snprintf(text, sizeof text, "%.1f%c", v, units[unit]);
  return text;
}

uint64_t parseByteSize(const std::string& text) {
  if (text == "none") return 0;
  size_t used = 0;
  double number = 0;
  try {
    number = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  std::string unit = text.substr(used);
  const std::string units = "KMGT";
  double scale = 1;
  if (unit.size() == 1 && units.find(unit[0]) != std::string::npos) scale = double(uint64_t(1) << (10 * (units.find(unit[0]) + 1)));
  else if (!unit.empty()) used = 0;
  double bytes = number * scale;
  if (used == 0 || !(bytes >= 0) || bytes >= 18e18)
    throw Error("'" + text + "' is not a size: use bytes or a number with K, M, G or T (512M, 2G), or none");
  return uint64_t(bytes);
}

}  // namespace magpy
