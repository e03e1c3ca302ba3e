// A minimal JSON writer: keys in the order they are written (stable output
// for diffs), strings escaped, doubles in the shortest exact form.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace magpy {

class JsonWriter {
 public:
  JsonWriter& beginObject();
  JsonWriter& endObject();
  JsonWriter& beginArray();
  JsonWriter& endArray();
  JsonWriter& key(std::string_view k);
  JsonWriter& value(std::string_view s);
  JsonWriter& value(const char* s) { return value(std::string_view(s)); }
  JsonWriter& value(int64_t v);
  JsonWriter& value(uint64_t v);
  JsonWriter& value(int v) { return value(int64_t(v)); }
  JsonWriter& value(double v);
  JsonWriter& value(bool v);
  JsonWriter& null();
  // key + value in one call.
  template <class T>
  JsonWriter& field(std::string_view k, const T& v) {
    key(k);
    return value(v);
  }
  std::string take();

 private:
  void element();  // comma and line break before an array element or a key
  void open(char c);
  void close(char c);
  std::string out_;
  bool empty_ = true;      // the current container has no element yet
  bool afterKey_ = false;  // the next value belongs to the key just written
  int depth_ = 0;
};

}  // namespace magpy
