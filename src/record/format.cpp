// Encoding of RecordFile into .mgp bytes and back (grammar in format.h).
//
// Each type has one io() function used by both the Writer and the Reader,
// so the two directions cannot drift apart.
#include "magpy/record/format.h"

#include <zstd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <type_traits>
#include <unistd.h>

#include "magpy/support/error.h"
#include "magpy/support/hash.h"

namespace magpy::record {
namespace {

constexpr char kMagic[8] = {'M', 'A', 'G', 'P', 'Y', 'R', 'E', 'C'};
constexpr size_t kHeaderSize = 8 + 4 + 4 + 8 + 8 + 8;
constexpr int kZstdLevel = 3;  // tensor data barely compresses; higher levels only cost time

class Writer {
 public:
  static constexpr bool kReading = false;
  void u8(uint8_t& v) { out_.push_back(char(v)); }
  void varint(uint64_t& v) {
    uint64_t x = v;
    while (x >= 0x80) { out_.push_back(char((x & 0x7f) | 0x80)); x >>= 7; }
    out_.push_back(char(x));
  }
  void zigzag(int64_t& v) {
    uint64_t z = (uint64_t(v) << 1) ^ uint64_t(v >> 63);
    varint(z);
  }
  void u64(uint64_t& v) { for (int i = 0; i < 8; ++i) out_.push_back(char((v >> (8 * i)) & 0xff)); }
  void f64(double& v) { uint64_t bits; std::memcpy(&bits, &v, 8); u64(bits); }
  void str(std::string& s) { uint64_t n = s.size(); varint(n); out_ += s; }
  void count(size_t& n, size_t) { uint64_t v = n; varint(v); }
  void enter(const char*, size_t = SIZE_MAX) {}
  void leave() {}
  std::string take() { return std::move(out_); }

 private:
  std::string out_;
};

class Reader {
 public:
  static constexpr bool kReading = true;
  Reader(const std::string& in, std::string origin) : in_(in), origin_(std::move(origin)) {}

  void u8(uint8_t& v) { need(1); v = uint8_t(in_[pos_++]); }
  void varint(uint64_t& v) {
    v = 0;
    for (int shift = 0;; shift += 7) {
      if (shift > 63) fail("a number is too long");
      need(1);
      uint8_t b = uint8_t(in_[pos_++]);
      v |= uint64_t(b & 0x7f) << shift;
      if (!(b & 0x80)) break;
    }
  }
  void zigzag(int64_t& v) {
    uint64_t z;
    varint(z);
    v = int64_t(z >> 1) ^ -int64_t(z & 1);
  }
  void u64(uint64_t& v) {
    need(8);
    v = 0;
    for (int i = 0; i < 8; ++i) v |= uint64_t(uint8_t(in_[pos_ + i])) << (8 * i);
    pos_ += 8;
  }
  void f64(double& v) { uint64_t bits; u64(bits); std::memcpy(&v, &bits, 8); }
  void str(std::string& s) {
    uint64_t n;
    varint(n);
    need(n);
    s.assign(in_, pos_, n);
    pos_ += n;
  }
  // A count is bounded by the bytes left: every element takes at least one.
  void count(size_t& n, size_t) {
    uint64_t v;
    varint(v);
    if (v > in_.size() - pos_) fail("a count of " + std::to_string(v) + " exceeds the data left");
    n = size_t(v);
  }
  void enter(const char* what, size_t index = SIZE_MAX) { ctx_.push_back({what, index}); }
  void leave() { ctx_.pop_back(); }
  bool atEnd() const { return pos_ == in_.size(); }

  [[noreturn]] void fail(const std::string& what) const {
    std::string where;
    for (auto& [name, index] : ctx_) {
      if (!where.empty() && name[0] != '[') where += '.';
      where += name;
      if (index != SIZE_MAX) where += "[" + std::to_string(index) + "]";
    }
    throw Error(origin_ + ": the record is corrupted: " + what + (where.empty() ? "" : " in " + where) +
                " (byte " + std::to_string(pos_) + " of " + std::to_string(in_.size()) +
                " in the decompressed body); capture it again with magpy-capture");
  }

 private:
  void need(uint64_t n) {
    if (n > in_.size() - pos_) fail("unexpected end of data");
  }
  const std::string& in_;
  std::string origin_;
  size_t pos_ = 0;
  std::vector<std::pair<const char*, size_t>> ctx_;
};

// Enums travel as one byte, validated against their last enumerator.
template <class Ar, class E>
void ioEnum(Ar& ar, E& e, E last) {
  uint8_t v = uint8_t(e);
  ar.u8(v);
  if constexpr (Ar::kReading) {
    if (v > uint8_t(last)) ar.fail("unknown kind " + std::to_string(v));
    e = E(v);
  }
}

template <class Ar> void ioBool(Ar& ar, bool& b) {
  uint8_t v = b;
  ar.u8(v);
  if constexpr (Ar::kReading) {
    if (v > 1) ar.fail("a flag is neither 0 nor 1");
    b = v;
  }
}

template <class Ar, class T, class F>
void ioVec(Ar& ar, const char* what, std::vector<T>& v, F&& each) {
  size_t n = v.size();
  ar.count(n, 0);
  if constexpr (Ar::kReading) v.resize(n);
  for (size_t i = 0; i < n; ++i) {
    ar.enter(what, i);
    each(v[i]);
    ar.leave();
  }
}

template <class Ar> void io(Ar& ar, std::vector<int64_t>& v) {
  ioVec(ar, "[]", v, [&](int64_t& x) { ar.zigzag(x); });
}
template <class Ar> void io(Ar& ar, std::vector<double>& v) {
  ioVec(ar, "[]", v, [&](double& x) { ar.f64(x); });
}
template <class Ar> void io(Ar& ar, std::vector<std::string>& v) {
  ioVec(ar, "[]", v, [&](std::string& x) { ar.str(x); });
}

template <class Ar> void io(Ar& ar, Atom& a) {
  ioEnum(ar, a.kind, Atom::Kind::Tuple);
  ar.zigzag(a.i);
  ar.f64(a.f);
  ar.str(a.s);
  ioVec(ar, "items", a.items, [&](Atom& x) { io(ar, x); });
}
template <class Ar> void io(Ar& ar, std::vector<Atom>& v) {
  ioVec(ar, "keys", v, [&](Atom& a) { io(ar, a); });
}

template <class Ar> void io(Ar& ar, TensorMeta& m) {
  ar.str(m.dtype);
  io(ar, m.shape);
  io(ar, m.strides);
  ar.str(m.device);
  ioBool(ar, m.requires_grad);
}

template <class Ar> void io(Ar& ar, PathStep& s) {
  ioEnum(ar, s.kind, PathStep::Kind::Key);
  ar.str(s.name);
  ar.zigzag(s.index);
  io(ar, s.key);
}

template <class Ar> void io(Ar& ar, AccessPath& p) {
  ioEnum(ar, p.root, AccessPath::Root::Runtime);
  ar.zigzag(p.index);
  ar.str(p.name);
  ioVec(ar, "steps", p.steps, [&](PathStep& s) { io(ar, s); });
}

// 32-bit fields travel as varints (unsigned) or zigzag varints (signed);
// a value read back that does not fit is a malformed file, not a wrap.
template <class Ar> void ioU32(Ar& ar, uint32_t& x, const char* what) {
  uint64_t v = x;
  ar.varint(v);
  if constexpr (Ar::kReading) {
    if (v > std::numeric_limits<uint32_t>::max()) ar.fail(std::string(what) + " is out of range");
    x = uint32_t(v);
  }
}

template <class Ar> void ioI32(Ar& ar, int32_t& x, const char* what) {
  int64_t v = x;
  ar.zigzag(v);
  if constexpr (Ar::kReading) {
    if (v < std::numeric_limits<int32_t>::min() || v > std::numeric_limits<int32_t>::max())
      ar.fail(std::string(what) + " is out of range");
    x = int32_t(v);
  }
}

template <class Ar> void io(Ar& ar, Value& v) {
  ioEnum(ar, v.kind, Value::Kind::Ref);
  io(ar, v.atom);
  ioU32(ar, v.blob, "a blob index");
  io(ar, v.meta);
  ar.str(v.type);
  ioVec(ar, "items", v.items, [&](Value& x) { io(ar, x); });
  io(ar, v.keys);
  io(ar, v.names);
  ioU32(ar, v.id, "a value id");
}

template <class Ar> void io(Ar& ar, Check& c) {
  ioEnum(ar, c.kind, Check::Kind::Absent);
  ar.str(c.s);
  ar.zigzag(c.i);
  io(ar, c.atom);
  io(ar, c.keys);
  io(ar, c.meta);
  io(ar, c.path);
}

template <class Ar> void io(Ar& ar, Arg& a) {
  ioEnum(ar, a.kind, Arg::Kind::WrappedScalar);
  ar.zigzag(a.i);
  ar.f64(a.f);
  ar.str(a.s);
  io(ar, a.ints);
  io(ar, a.floats);
}

template <class Ar> void io(Ar& ar, Node& n) {
  ioEnum(ar, n.kind, NodeKind::Output);
  ar.str(n.name);
  ar.str(n.target);
  ar.str(n.overload);
  ioVec(ar, "args", n.args, [&](Arg& a) { io(ar, a); });
  io(ar, n.source);
  ar.zigzag(n.blob);
  ioVec(ar, "outputs", n.outputs, [&](TensorMeta& m) { io(ar, m); });
  ar.str(n.where);
}

template <class Ar> void io(Ar& ar, ValueExpr& e) {
  ioEnum(ar, e.kind, ValueExpr::Kind::Dict);
  io(ar, e.atom);
  ar.zigzag(e.index);
  io(ar, e.path);
  ioVec(ar, "items", e.items, [&](ValueExpr& x) { io(ar, x); });
  io(ar, e.keys);
}

template <class Ar> void io(Ar& ar, Effect& e) {
  ioEnum(ar, e.kind, Effect::Kind::Assign);
  io(ar, e.target);
  ar.str(e.name);
  io(ar, e.key);
  io(ar, e.value);
}

template <class Ar> void io(Ar& ar, Record& r) {
  ioVec(ar, "guards", r.guards, [&](Guard& g) { io(ar, g.path); io(ar, g.check); });
  ar.enter("graph");
  ioVec(ar, "nodes", r.graph.nodes, [&](Node& n) { io(ar, n); });
  ar.leave();
  ar.enter("mock");
  io(ar, r.mock.result);
  ioVec(ar, "effects", r.mock.effects, [&](Effect& e) { io(ar, e); });
  ar.leave();
  ioVec(ar, "breaks", r.breaks, [&](GraphBreak& b) {
    ar.str(b.where); ar.str(b.function); ar.str(b.opcode); ar.str(b.reason); ar.str(b.callee);
  });
  ar.str(r.origin);
  ar.enter("refs");
  ioVec(ar, "nodes", r.refs.nodes, [&](RefGraphView::Node& n) {
    ar.str(n.label);
    ioU32(ar, n.versions, "a version count");
    ar.u8(n.roles);
  });
  ioVec(ar, "edges", r.refs.edges, [&](RefGraphView::Edge& e) {
    ioU32(ar, e.from, "an edge's source");
    ioU32(ar, e.to, "an edge's target");
    ioU32(ar, e.version, "an edge's version");
    ar.str(e.label);
  });
  ar.leave();
}

template <class Ar> void io(Ar& ar, RecordFile& f) {
  ar.enter("fingerprint");
  ar.str(f.env.magpy_version);
  ar.str(f.env.python_version);
  ar.str(f.env.torch_version);
  ar.u64(f.env.annotations_hash);
  ar.leave();
  ar.str(f.script);
  ioVec(ar, "functions", f.functions, [&](CompiledFunction& fn) {
    ar.str(fn.name);
    ar.str(fn.module);
    ar.enter("self");
    io(ar, fn.self);
    ar.leave();
    ioVec(ar, "records", fn.records, [&](Record& r) { io(ar, r); });
  });
  ioVec(ar, "globals", f.globals, [&](ModuleState& m) { ar.str(m.module); io(ar, m.globals); });
  ioVec(ar, "calls", f.calls, [&](LoggedCall& c) {
    ioU32(ar, c.function, "a call's function");
    ioI32(ar, c.record, "a call's record");
    ioBool(ar, c.monitored);
    io(ar, c.args);
    io(ar, c.kwargs);
    io(ar, c.result);
    ioVec(ar, "updates", c.updates, [&](StateUpdate& u) {
      ioI32(ar, u.function, "an update's function");
      io(ar, u.path);
      io(ar, u.value);
    });
    io(ar, c.rng);
  });
  ioVec(ar, "blobs", f.blobs, [&](TensorBlob& b) {
    ar.str(b.dtype);
    io(ar, b.shape);
    ar.u64(b.hash);
    ar.str(b.bytes);
  });
}

void putU32(std::string& out, uint32_t v) { for (int i = 0; i < 4; ++i) out.push_back(char((v >> (8 * i)) & 0xff)); }
void putU64(std::string& out, uint64_t v) { for (int i = 0; i < 8; ++i) out.push_back(char((v >> (8 * i)) & 0xff)); }
uint64_t getLE(const std::string& in, size_t at, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= uint64_t(uint8_t(in[at + i])) << (8 * i);
  return v;
}

// Cross-references that the byte grammar cannot express: node and blob
// indices must point at things that exist, so replay can trust them.
void validate(const RecordFile& f, const std::string& origin) {
  auto bad = [&](const std::string& what) {
    throw Error(origin + ": the record is corrupted: " + what + "; capture it again with magpy-capture");
  };
  auto checkValue = [&](auto&& self, const Value& v) -> void {
    if (v.kind == Value::Kind::Tensor && v.blob >= f.blobs.size()) bad("a tensor refers to missing blob " + std::to_string(v.blob));
    if (v.kind == Value::Kind::Dict && v.keys.size() != v.items.size()) bad("a dict has " + std::to_string(v.keys.size()) + " keys for " + std::to_string(v.items.size()) + " values");
    if (v.kind == Value::Kind::Object && v.names.size() != v.items.size()) bad("an object's attribute names and values differ in number");
    for (auto& item : v.items) self(self, item);
  };
  for (auto& b : f.blobs) {
    int64_t n = 1;
    for (auto d : b.shape) {
      if (d < 0) bad("a blob has a negative dimension");
      n *= d;
    }
    if (uint64_t(n) * dtypeSize(b.dtype) != b.bytes.size()) bad("a " + b.dtype + " blob holds " + std::to_string(b.bytes.size()) + " bytes for " + std::to_string(n) + " elements");
    if (hashBytes(b.bytes.data(), b.bytes.size()) != b.hash) bad("a tensor blob does not match its content hash");
  }
  for (size_t fi = 0; fi < f.functions.size(); ++fi) {
    auto& fn = f.functions[fi];
    checkValue(checkValue, fn.self);
    for (size_t ri = 0; ri < fn.records.size(); ++ri) {
      auto& nodes = fn.records[ri].graph.nodes;
      std::string at = "function " + fn.name + " record " + std::to_string(ri);
      auto& refs = fn.records[ri].refs;
      for (auto& e : refs.edges)
        if (e.from >= refs.nodes.size() || e.to >= refs.nodes.size() || e.version >= refs.nodes[e.from].versions)
          bad(at + ": a RefGraph edge names a missing node or version");
      for (size_t ni = 0; ni < nodes.size(); ++ni) {
        if (nodes[ni].blob >= int64_t(f.blobs.size())) bad(at + ": node " + nodes[ni].name + " refers to a missing blob");
        for (auto& a : nodes[ni].args) {
          if (a.kind == Arg::Kind::Node && (a.i < 0 || size_t(a.i) >= ni)) bad(at + ": node " + nodes[ni].name + " uses a value that is not defined before it");
          if (a.kind == Arg::Kind::NodeList)
            for (auto i : a.ints)
              if (i < -1 || i >= int64_t(ni)) bad(at + ": node " + nodes[ni].name + " uses a value that is not defined before it");
        }
      }
    }
  }
  for (auto& g : f.globals) checkValue(checkValue, g.globals);
  for (auto& c : f.calls) {
    if (c.function >= f.functions.size()) bad("a logged call names missing function " + std::to_string(c.function));
    if (c.record >= int32_t(f.functions[c.function].records.size())) bad("a logged call names missing record " + std::to_string(c.record));
    checkValue(checkValue, c.args);
    checkValue(checkValue, c.kwargs);
    checkValue(checkValue, c.result);
    checkValue(checkValue, c.rng);
    for (auto& u : c.updates) {
      if (u.function >= int32_t(f.functions.size())) bad("a state update names missing function " + std::to_string(u.function));
      checkValue(checkValue, u.value);
    }
  }
}

}  // namespace

std::string encode(const RecordFile& file) {
  Writer w;
  io(w, const_cast<RecordFile&>(file));  // the writer only reads
  std::string body = w.take();

  std::string frame(ZSTD_compressBound(body.size()), '\0');
  ZSTD_CCtx* cctx = ZSTD_createCCtx();
  ZSTD_CCtx_setParameter(cctx, ZSTD_c_compressionLevel, kZstdLevel);
  ZSTD_CCtx_setParameter(cctx, ZSTD_c_checksumFlag, 1);
  size_t n = ZSTD_compress2(cctx, frame.data(), frame.size(), body.data(), body.size());
  ZSTD_freeCCtx(cctx);
  if (ZSTD_isError(n)) throw Error(std::string("cannot compress the record: ") + ZSTD_getErrorName(n));
  frame.resize(n);

  std::string out(kMagic, 8);
  putU32(out, kFormatVersion);
  putU32(out, 0);
  putU64(out, frame.size());
  putU64(out, body.size());
  putU64(out, hashBytes(body.data(), body.size()));
  return out + frame;
}

RecordFile decode(const std::string& bytes, const std::string& origin) {
  if (bytes.size() < 8 || std::memcmp(bytes.data(), kMagic, 8) != 0)
    throw Error(origin + ": not a magpy record (it does not start with MAGPYREC); pass a .mgp file written by magpy-capture");
  if (bytes.size() < kHeaderSize)
    throw Error(origin + ": the record is truncated: its " + std::to_string(bytes.size()) + "-byte header is incomplete; capture it again with magpy-capture");
  uint32_t version = uint32_t(getLE(bytes, 8, 4));
  if (version > kFormatVersion)
    throw Error(origin + ": written in record format " + std::to_string(version) + ", but this magpy reads format " +
                std::to_string(kFormatVersion) + "; use a newer magpy");
  if (version == 0) throw Error(origin + ": the record is corrupted: format version 0 does not exist");
  if (version < kFormatVersion)
    throw Error(origin + ": written in record format " + std::to_string(version) + ", which this magpy (format " +
                std::to_string(kFormatVersion) + ") no longer reads; capture it again with magpy-capture");
  uint64_t frameSize = getLE(bytes, 16, 8), bodySize = getLE(bytes, 24, 8), bodyHash = getLE(bytes, 32, 8);
  if (bytes.size() - kHeaderSize < frameSize)
    throw Error(origin + ": the record is truncated: " + std::to_string(bytes.size()) + " bytes, the header announces " +
                std::to_string(kHeaderSize + frameSize) + "; capture it again with magpy-capture");
  if (bytes.size() - kHeaderSize > frameSize)
    throw Error(origin + ": the record is corrupted: " + std::to_string(bytes.size() - kHeaderSize - frameSize) +
                " unexpected bytes after its end; capture it again with magpy-capture");
  if (bodySize > (uint64_t(1) << 40)) throw Error(origin + ": the record is corrupted: it announces an impossible size");

  std::string body(bodySize, '\0');
  size_t n = ZSTD_decompress(body.data(), body.size(), bytes.data() + kHeaderSize, frameSize);
  if (ZSTD_isError(n) || n != bodySize)
    throw Error(origin + ": the record is corrupted: its compressed body does not decompress (" +
                (ZSTD_isError(n) ? ZSTD_getErrorName(n) : "wrong size") + "); capture it again with magpy-capture");
  if (hashBytes(body.data(), body.size()) != bodyHash)
    throw Error(origin + ": the record is corrupted: its body does not match its hash; capture it again with magpy-capture");

  RecordFile file;
  Reader r(body, origin);
  io(r, file);
  if (!r.atEnd()) r.fail("unexpected data after the last section");
  validate(file, origin);
  return file;
}

void writeFileAtomically(const std::string& path, const std::string& bytes) {
  namespace fs = std::filesystem;
  fs::path target(path);
  fs::path tmp = target;
  tmp += ".tmp-" + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw Error("cannot write " + path + ": cannot create " + tmp.string() + " (is the directory writable?)");
    out.write(bytes.data(), std::streamsize(bytes.size()));
    out.flush();
    if (!out) {
      out.close();
      std::error_code ec;
      fs::remove(tmp, ec);
      throw Error("cannot write " + path + ": the disk may be full");
    }
  }
  std::error_code ec;
  fs::rename(tmp, target, ec);
  if (ec) {
    fs::remove(tmp, ec);
    throw Error("cannot write " + path + ": " + ec.message());
  }
}

void writeRecordFile(const RecordFile& file, const std::string& path) { writeFileAtomically(path, encode(file)); }

RecordFile readRecordFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::error_code ec;
    if (!std::filesystem::exists(path, ec)) throw Error(path + ": no such file; pass a .mgp file written by magpy-capture");
    throw Error(path + ": cannot be read (permissions?)");
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  return decode(ss.str(), path);
}

}  // namespace magpy::record
