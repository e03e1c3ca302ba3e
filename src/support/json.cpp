#include "magpy/support/json.h"

#include <cmath>
#include <cstdio>

#include "magpy/support/strings.h"

namespace magpy {

void JsonWriter::element() {
  if (afterKey_) {
    afterKey_ = false;
    return;
  }
  if (!empty_) out_ += ',';
  if (depth_ > 0) out_ += "\n" + std::string(size_t(depth_) * 2, ' ');
  empty_ = false;
}

void JsonWriter::open(char c) {
  element();
  out_ += c;
  ++depth_;
  empty_ = true;
}

void JsonWriter::close(char c) {
  --depth_;
  if (!empty_) out_ += "\n" + std::string(size_t(depth_) * 2, ' ');
  out_ += c;
  empty_ = false;
}

JsonWriter& JsonWriter::beginObject() {
  open('{');
  return *this;
}
JsonWriter& JsonWriter::endObject() {
  close('}');
  return *this;
}
JsonWriter& JsonWriter::beginArray() {
  open('[');
  return *this;
}
JsonWriter& JsonWriter::endArray() {
  close(']');
  return *this;
}

JsonWriter& JsonWriter::key(std::string_view k) {
  value(k);
  out_ += ": ";
  afterKey_ = true;
  return *this;
}

JsonWriter& JsonWriter::value(std::string_view s) {
  element();
  out_ += '"';
  for (unsigned char c : s) {
    switch (c) {
      case '"': out_ += "\\\""; break;
      case '\\': out_ += "\\\\"; break;
      case '\n': out_ += "\\n"; break;
      case '\t': out_ += "\\t"; break;
      case '\r': out_ += "\\r"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out_ += buf;
        } else {
          out_ += char(c);
        }
    }
  }
  out_ += '"';
  return *this;
}

JsonWriter& JsonWriter::value(int64_t v) {
  element();
  out_ += std::to_string(v);
  return *this;
}

JsonWriter& JsonWriter::value(uint64_t v) {
  element();
  out_ += std::to_string(v);
  return *this;
}

JsonWriter& JsonWriter::value(double v) {
  element();
  // JSON has no inf/nan: those travel as strings.
  if (std::isfinite(v)) out_ += formatDouble(v);
  else out_ += "\"" + formatDouble(v) + "\"";
  return *this;
}

JsonWriter& JsonWriter::value(bool v) {
  element();
  out_ += v ? "true" : "false";
  return *this;
}

JsonWriter& JsonWriter::null() {
  element();
  out_ += "null";
  return *this;
}

std::string JsonWriter::take() { return std::move(out_) + "\n"; }

}  // namespace magpy
