// What the byte grammar cannot express, checked once: cross-references
// point at things that exist, sizes do not overflow, and every structure
// has the shape its users rely on. decode() runs it on every file read;
// tests run it on what capture and the graph passes make. Code that uses
// a validated RecordFile may assume all of it.
#pragma once

#include <string>

#include "magpy/record/record.h"

namespace magpy::record {

// Throws Error ("ORIGIN: the record is corrupted: WHAT; ...") at the first
// thing that does not hold.
void validate(const RecordFile& file, const std::string& origin = "the record");

// Throws that Error: the one message for a record that does not hold together.
[[noreturn]] void corruptedRecord(const std::string& origin, const std::string& what);

}  // namespace magpy::record
