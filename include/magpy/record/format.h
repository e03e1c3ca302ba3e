// The .mgp file format, version 19 (2 added the RefGraph view to records
// and tuple dict keys, 3 when the state was taken, 4 the dict class of
// mock expressions, 5 dynamic sizes in tensor metadata, 6 lifted numbers,
// 7 the Distinct check, names without control characters, and mock Refs,
// 8 an operator's grad mode region and forward-only records, 9 sizes that
// are graph values and number arithmetic's values at capture, 10 loop
// regions, 11 branches, 12 backward nodes and a state tensor's .grad,
// 13 dict keys that are objects: path steps, values and mock writes,
// 14 float lists holding graph numbers, 15 collectives' process groups,
// 16 hashes of long byte runs in four lanes (support/hash.h), 17 logged
// updates that remove what their path names, 18 updates that refill a
// list, dict or tensor in place, 19 the mock's Extend;
// graph.h and value.h). This header is the only place that knows
// the byte layout; everything else works on RecordFile.
//
// Grammar (all integers little-endian; "varint" is unsigned LEB128, "zigzag"
// a signed LEB128 in zigzag encoding; a "string" is varint length + bytes):
//
//   file        := header body_frame
//   header      := magic:"MAGPYREC" version:u32 flags:u32
//                  frame_size:u64 body_size:u64 body_hash:u64
//   body_frame  := zstd frame (checksummed) of `body`, frame_size bytes
//   body        := fingerprint script:string state_at:string
//                  count:varint function*  count:varint module_state*
//                  count:varint logged_call*  count:varint blob*
//   fingerprint := magpy:string python:string torch:string annotations:u64
//   function    := name:string module:string self:value count:varint record*
//   record      := count:varint guard* graph mock count:varint break* origin:string refs
//                  forward_only:string
//   guard       := path check
//   check       := kind:u8 s:string i:zigzag atom keys:atoms meta path
//                  (kind 0..8 as Check::Kind lists them, Distinct last; a
//                   lifted number's check, Check::Kind::Number, is the
//                   type check kind 0 with s "builtins.int" or "builtins.float")
//   graph       := count:varint node*
//   node        := kind:u8 name:string target:string overload:string
//                  count:varint arg* source:path blob:zigzag count:varint meta* where:string
//                  number:string seen:atom grad:u8
//                  (number: "int"/"float" for a Python number, "bool" for a comparison,
//                   "" for a tensor; seen: a number's value at capture; grad: GradMode, 0..2)
//   arg         := kind:u8 i:zigzag f:f64 s:string ints:zigzags floats:f64s
//   mock        := result:expr count:varint effect*
//   expr        := kind:u8 atom index:zigzag path count:varint expr* keys:atoms type:string
//                  (a container's index > 0 names it for a later Ref, kind 6)
//   effect      := kind:u8 target:path name:string key:atom value:expr key_path:path
//                  (key_path: the object a SetObjectItem's key is; self otherwise)
//   break       := where:string function:string opcode:string reason:string callee:string
//   refs        := count:varint ref_node* count:varint ref_edge*
//   ref_node    := label:string versions:varint roles:u8
//   ref_edge    := from:varint to:varint version:varint label:string
//   module_state:= module:string globals:value
//   logged_call := function:varint record:zigzag monitored:u8 args:value kwargs:value result:value
//                  count:varint update* rng:value
//   update      := function:zigzag path how:u8 value
//                  (how 0: path holds value now; 1: the script deleted what path
//                   names, value is None; 2: the list, dict or tensor path
//                   names was changed in place and holds value's elements or
//                   contents)
//   blob        := dtype:string shape:zigzags hash:u64 bytes:string
//   value       := kind:u8 atom blob:varint meta type:string
//                  count:varint value* keys:atoms count:varint key_ref:varint*
//                  names:strings id:varint
//                  (a tensor's values and names: its .grad, or nothing; key_refs:
//                   none, or one per key: 0, or the id of the object that is the key)
//   path        := root:u8 index:zigzag name:string count:varint step*
//   step        := kind:u8 name:string index:zigzag key:atom count:varint path*
//                  (one path, the key's object, for kind 3: "[@path]"; none otherwise)
//   atom        := kind:u8 i:zigzag f:f64 s:string count:varint atom*
//   meta        := dtype:string shape:zigzags strides:zigzags device:string requires_grad:u8
//                  count:varint symdim*          (none, or one per dimension)
//   symdim      := symbol:zigzag scale:zigzag offset:zigzag node:zigzag
//                  (size = scale * s<symbol> + offset, or the int graph node `node` computes)
//
// body_hash is magpy::hashBytes(body); blob hashes are checked on load.
// A record may come from someone else: the reader bounds the body (8 GiB,
// and the frame's own content size must agree with body_size), grows every
// list as its elements parse (the parsed structure, tensor bytes aside, may
// take at most 128 MiB), limits nesting (kMaxNesting), and then checks
// every cross-reference and structural expectation (decode's validate()),
// so code that uses a RecordFile may rely on them.
// Writing is deterministic: the same RecordFile always gives the same bytes.
// Files are written to a temporary name and renamed into place.
#pragma once

#include <cstdint>
#include <string>

#include "magpy/record/record.h"

namespace magpy::record {

constexpr uint32_t kFormatVersion = 19;

// Values, constants and mock expressions nest at most this deep, and access
// paths have at most this many steps: the reader refuses deeper ones (so no
// walk over a loaded record can exhaust the stack) and the writer never
// writes them.
constexpr size_t kMaxNesting = 256;

std::string encode(const RecordFile& file);  // whole file bytes
RecordFile decode(const std::string& bytes, const std::string& origin = "<memory>");

// The two halves of encode(), for tools that build bodies byte by byte
// (the fuzzer, hostile-record tests): the body of a file, and a whole file
// around any body (header, hash and zstd frame).
std::string encodeBody(const RecordFile& file);
std::string wrapBody(const std::string& body);

void writeRecordFile(const RecordFile& file, const std::string& path);
RecordFile readRecordFile(const std::string& path);

// Writes bytes to path through a temporary file in the same directory and a
// rename, so a crash never leaves a half-written file behind.
void writeFileAtomically(const std::string& path, const std::string& bytes);

}  // namespace magpy::record
