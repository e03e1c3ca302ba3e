// Encoding of RecordFile into .mgp bytes and back (grammar in format.h).
//
// Each type has one io() function used by both the Writer and the Reader,
// so the two directions cannot drift apart.
#include "magpy/record/format.h"

#include <zstd.h>

#include <cstdio>
#include <cstring>
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <limits>
#include <memory>
#include <sstream>
#include <type_traits>
#include <unistd.h>
#include <vector>

#include "magpy/record/graph_utils.h"
#include "magpy/record/validate.h"
#include "magpy/support/error.h"
#include "magpy/support/hash.h"
#include "magpy/support/strings.h"

namespace magpy::record {
namespace {

constexpr char kMagic[8] = {'M', 'A', 'G', 'P', 'Y', 'R', 'E', 'C'};
constexpr size_t kHeaderSize = 8 + 4 + 4 + 8 + 8 + 8;
constexpr int kZstdLevel = 3;  // tensor data barely compresses; higher levels only cost time

// A record is data from a possibly untrusted source: every structure it
// describes is bounded before anything is allocated for it.
constexpr uint64_t kMaxBodySize = uint64_t(8) << 30;          // decompressed body
constexpr uint64_t kMaxStructureBytes = uint64_t(128) << 20;  // the parsed model, tensor bytes aside

// Where a body's bytes go as they are written: counted, kept, or hashed
// and compressed into a frame.
class Sink {
 public:
  virtual void write(const char* data, size_t size) = 0;

 protected:
  ~Sink() = default;
};

class Writer {
 public:
  static constexpr bool kReading = false;
  explicit Writer(Sink& sink) : sink_(sink) {}
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
  // Tensor bytes go to the sink as they are, not through the buffer.
  void str(std::string& s) {
    uint64_t n = s.size();
    varint(n);
    if (out_.size() + s.size() < kBuffered) return void(out_ += s);
    flush();
    sink_.write(s.data(), s.size());
  }
  // A name or message: the reader takes no control characters in one, so
  // they are written escaped (a Python name may hold a newline).
  void text(std::string& s) {
    if (!hasControls(s)) return str(s);
    std::string escaped = escapeControls(s);
    str(escaped);
  }
  void count(size_t& n, size_t) { uint64_t v = n; varint(v); }
  void charge(size_t) {}
  void enter(const char*, size_t = SIZE_MAX) {}
  void leave() {}
  // A file the reader would refuse is never written.
  void descend(const char* what) {
    if (++depth_ > kMaxNesting)
      throw Error(std::string("cannot write the record: ") + what + " is nested more than " +
                  std::to_string(kMaxNesting) + " levels deep, more than a record may hold");
  }
  void ascend() { --depth_; }
  [[noreturn]] void fail(const std::string& what) const { throw Error("cannot write the record: " + what); }
  void flush() {
    sink_.write(out_.data(), out_.size());
    out_.clear();
  }

 private:
  static constexpr size_t kBuffered = size_t(1) << 20;
  Sink& sink_;
  std::string out_;
  size_t depth_ = 0;
};

struct CountingSink final : Sink {
  uint64_t size = 0;
  void write(const char*, size_t n) override { size += n; }
};

struct StringSink final : Sink {
  std::string bytes;
  void write(const char* data, size_t n) override { bytes.append(data, n); }
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
  // Names and messages reach terminals and comments in generated code.
  void text(std::string& s) {
    str(s);
    if (hasControls(s)) fail("the text " + quote(s, true) + " holds control characters");
  }
  // A count is bounded by the bytes left: every element takes at least one.
  void count(size_t& n, size_t) {
    uint64_t v;
    varint(v);
    if (v > in_.size() - pos_) fail("a count of " + std::to_string(v) + " exceeds the data left");
    n = size_t(v);
  }
  // Memory the parsed structure takes, charged as elements are parsed: a
  // byte of a compressible body can stand for a large element.
  void charge(size_t bytes) {
    structureBytes_ += bytes;
    if (structureBytes_ > kMaxStructureBytes)
      fail("its structure needs more than " + std::to_string(kMaxStructureBytes >> 20) + " MiB of memory");
  }
  void enter(const char* what, size_t index = SIZE_MAX) { ctx_.push_back({what, index}); }
  void leave() { ctx_.pop_back(); }
  void descend(const char*) {
    if (++depth_ > kMaxNesting)
      fail("values, constants, mock expressions or key paths nest more than " + std::to_string(kMaxNesting) + " levels deep");
  }
  void ascend() { --depth_; }
  bool atEnd() const { return pos_ == in_.size(); }

  [[noreturn]] void fail(const std::string& what) const {
    // Deep places keep their first and last steps: the middle says nothing.
    std::string where;
    for (size_t k = 0; k < ctx_.size(); ++k) {
      if (ctx_.size() > 12 && k == 6) {
        where += "...";
        k = ctx_.size() - 6;
      }
      auto& [name, index] = ctx_[k];
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
  size_t depth_ = 0;
  uint64_t structureBytes_ = 0;
  std::vector<std::pair<const char*, size_t>> ctx_;
};

// Recursive parts (values, atoms, expressions) are entered through this, so
// neither reading nor any later walk over them can overflow the stack.
template <class Ar>
struct Nested {
  Nested(Ar& ar, const char* what) : ar_(ar) { ar_.descend(what); }
  ~Nested() { ar_.ascend(); }
  Ar& ar_;
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
  if constexpr (Ar::kReading) {
    // Grown as elements parse, never sized from the count alone.
    v.clear();
    v.reserve(std::min<size_t>(n, 64));
  }
  for (size_t i = 0; i < n; ++i) {
    if constexpr (Ar::kReading) {
      ar.charge(sizeof(T));
      v.emplace_back();
    }
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
  ioVec(ar, "[]", v, [&](std::string& x) { ar.text(x); });
}

template <class Ar> void io(Ar& ar, Atom& a) {
  Nested<Ar> nested(ar, "a constant");
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
  ar.text(m.dtype);
  io(ar, m.shape);
  io(ar, m.strides);
  ar.text(m.device);
  ioBool(ar, m.requires_grad);
  ioVec(ar, "dimensions", m.sym, [&](SymDim& d) {
    int64_t symbol = d.symbol;
    ar.zigzag(symbol);
    d.symbol = int32_t(std::clamp<int64_t>(symbol, -2, kMaxSymbols));  // out of range stays out of range
    ar.zigzag(d.scale);
    ar.zigzag(d.offset);
    int64_t node = d.node;
    ar.zigzag(node);
    d.node = int32_t(std::clamp<int64_t>(node, -2, INT32_MAX));  // out of range stays out of range
  });
}

template <class Ar> void io(Ar& ar, AccessPath& p);

template <class Ar> void io(Ar& ar, PathStep& s) {
  ioEnum(ar, s.kind, PathStep::Kind::ObjectKey);
  ar.text(s.name);
  ar.zigzag(s.index);
  io(ar, s.key);
  ioVec(ar, "key paths", s.keyOf, [&](AccessPath& k) { io(ar, k); });
  if (s.keyOf.size() != (s.kind == PathStep::Kind::ObjectKey ? 1u : 0u))
    ar.fail("an access path step has " + std::to_string(s.keyOf.size()) + " key paths");
}

template <class Ar> void io(Ar& ar, AccessPath& p) {
  Nested<Ar> nested(ar, "an access path");
  ioEnum(ar, p.root, AccessPath::Root::Runtime);
  ar.zigzag(p.index);
  ar.text(p.name);
  ioVec(ar, "steps", p.steps, [&](PathStep& s) { io(ar, s); });
  if (p.steps.size() > kMaxNesting)
    ar.fail("an access path has " + std::to_string(p.steps.size()) + " steps, more than " + std::to_string(kMaxNesting));
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
  Nested<Ar> nested(ar, "a value");
  ioEnum(ar, v.kind, Value::Kind::Ref);
  io(ar, v.atom);
  ioU32(ar, v.blob, "a blob index");
  io(ar, v.meta);
  ar.text(v.type);
  ioVec(ar, "items", v.items, [&](Value& x) { io(ar, x); });
  io(ar, v.keys);
  ioVec(ar, "key refs", v.keyRefs, [&](uint32_t& k) { ioU32(ar, k, "a key's object id"); });
  io(ar, v.names);
  ioU32(ar, v.id, "a value id");
}

// A lifted number's check is written as the type check it was before it
// had a kind of its own (see the grammar), and read back as one.
template <class Ar> void io(Ar& ar, Check& c) {
  Check::Kind kind = c.kind == Check::Kind::Number ? Check::Kind::Type : c.kind;
  ioEnum(ar, kind, Check::Kind::Distinct);
  if constexpr (Ar::kReading) c.kind = kind;
  ar.text(c.s);
  ar.zigzag(c.i);
  io(ar, c.atom);
  io(ar, c.keys);
  io(ar, c.meta);
  io(ar, c.path);
  if constexpr (Ar::kReading) {
    if (c.kind == Check::Kind::Type && (c.s == "builtins.int" || c.s == "builtins.float")) {
      c.kind = Check::Kind::Number;
      c.number = c.s == "builtins.int" ? NumberType::Int : NumberType::Float;
    }
  }
}

template <class Ar> void io(Ar& ar, Arg& a) {
  ioEnum(ar, a.kind, Arg::Kind::Group);
  ar.zigzag(a.i);
  ar.f64(a.f);
  ar.str(a.s);
  io(ar, a.ints);
  io(ar, a.floats);
}

template <class Ar> void io(Ar& ar, Node& n) {
  ioEnum(ar, n.kind, NodeKind::Output);
  ar.text(n.name);
  ar.text(n.target);
  ar.text(n.overload);
  ioVec(ar, "args", n.args, [&](Arg& a) { io(ar, a); });
  io(ar, n.source);
  ar.zigzag(n.blob);
  ioVec(ar, "outputs", n.outputs, [&](TensorMeta& m) { io(ar, m); });
  ar.text(n.where);
  ar.text(n.number);
  io(ar, n.seen);
  ioEnum(ar, n.grad, GradMode::On);
}

template <class Ar> void io(Ar& ar, ValueExpr& e) {
  Nested<Ar> nested(ar, "a mock expression");
  ioEnum(ar, e.kind, ValueExpr::Kind::Ref);
  io(ar, e.atom);
  ar.zigzag(e.index);
  io(ar, e.path);
  ioVec(ar, "items", e.items, [&](ValueExpr& x) { io(ar, x); });
  io(ar, e.keys);
  ar.text(e.type);
}

template <class Ar> void io(Ar& ar, Effect& e) {
  ioEnum(ar, e.kind, Effect::Kind::Extend);
  io(ar, e.target);
  ar.text(e.name);
  io(ar, e.key);
  io(ar, e.value);
  io(ar, e.keyPath);
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
    ar.text(b.where); ar.text(b.function); ar.text(b.opcode); ar.text(b.reason); ar.text(b.callee);
  });
  ar.text(r.origin);
  ar.enter("refs");
  ioVec(ar, "nodes", r.refs.nodes, [&](RefGraphView::Node& n) {
    ar.text(n.label);
    ioU32(ar, n.versions, "a version count");
    ar.u8(n.roles);
  });
  ioVec(ar, "edges", r.refs.edges, [&](RefGraphView::Edge& e) {
    ioU32(ar, e.from, "an edge's source");
    ioU32(ar, e.to, "an edge's target");
    ioU32(ar, e.version, "an edge's version");
    ar.text(e.label);
  });
  ar.leave();
  ar.text(r.forwardOnly);
}

template <class Ar> void io(Ar& ar, RecordFile& f) {
  ar.enter("fingerprint");
  ar.text(f.env.magpy_version);
  ar.text(f.env.python_version);
  ar.text(f.env.torch_version);
  ar.u64(f.env.annotations_hash);
  ar.leave();
  ar.text(f.script);
  ar.text(f.stateAt);
  ioVec(ar, "functions", f.functions, [&](CompiledFunction& fn) {
    ar.text(fn.name);
    ar.text(fn.module);
    ar.enter("self");
    io(ar, fn.self);
    ar.leave();
    ioVec(ar, "records", fn.records, [&](Record& r) { io(ar, r); });
  });
  ioVec(ar, "globals", f.globals, [&](ModuleState& m) { ar.text(m.module); io(ar, m.globals); });
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
      ioEnum(ar, u.how, StateUpdate::How::Refill);
      io(ar, u.value);
    });
    io(ar, c.rng);
  });
  ioVec(ar, "blobs", f.blobs, [&](TensorBlob& b) {
    ar.text(b.dtype);
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

// Decompresses the body frame into memory that grows with the data the
// frame really holds: a header or frame that only announces a huge size
// allocates nothing.
std::string decompressBody(const char* frame, size_t frameSize, uint64_t bodySize, const std::string& origin) {
  if (bodySize > kMaxBodySize)
    corruptedRecord(origin, "it announces a body of " + std::to_string(bodySize) + " bytes, more than the " +
                          std::to_string(kMaxBodySize >> 30) + " GiB a record may hold");
  unsigned long long content = ZSTD_getFrameContentSize(frame, frameSize);
  if (content == ZSTD_CONTENTSIZE_ERROR) corruptedRecord(origin, "its compressed body is not a zstd frame");
  if (content != bodySize)
    corruptedRecord(origin, "its header and its compressed body disagree on the body's size");
  std::unique_ptr<ZSTD_DCtx, size_t (*)(ZSTD_DCtx*)> dctx(ZSTD_createDCtx(), ZSTD_freeDCtx);
  // Grown as output comes, so a small frame announcing a huge body costs no
  // more than it holds; a body up to four times its frame (weights hardly
  // compress) is allocated once, without copies as it grows.
  std::string body(size_t(std::min<uint64_t>(bodySize, uint64_t(frameSize) * 4 + (1 << 20))), '\0');
  ZSTD_inBuffer in{frame, frameSize, 0};
  size_t filled = 0;
  for (;;) {
    if (filled == body.size() && body.size() < bodySize)
      body.resize(size_t(std::min<uint64_t>(bodySize, std::max<uint64_t>(body.size() * 2, 1 << 20))));
    ZSTD_outBuffer out{body.data(), body.size(), filled};
    size_t consumed = in.pos;
    size_t ret = ZSTD_decompressStream(dctx.get(), &out, &in);
    if (ZSTD_isError(ret)) corruptedRecord(origin, std::string("its compressed body does not decompress (") + ZSTD_getErrorName(ret) + ")");
    bool progress = out.pos != filled || in.pos != consumed;
    filled = out.pos;
    if (ret == 0) break;  // the frame ended (its checksum checked)
    if (!progress) corruptedRecord(origin, "its compressed body is truncated or larger than announced");
  }
  if (filled != bodySize || in.pos != in.size) corruptedRecord(origin, "its compressed body does not hold the announced size");
  return body;
}

}  // namespace

namespace {

// Writes the body of `file` to `sink`.
void writeBody(const RecordFile& file, Sink& sink) {
  Writer w(sink);
  io(w, const_cast<RecordFile&>(file));  // the writer only reads
  w.flush();
}

// Where a whole file's bytes go: appended, and the header written over
// once the frame is complete.
class FileBytes {
 public:
  virtual void append(const char* data, size_t size) = 0;
  virtual void overwriteStart(const std::string& bytes) = 0;

 protected:
  ~FileBytes() = default;
};

struct StringFileBytes final : FileBytes {
  std::string bytes;
  void append(const char* data, size_t n) override { bytes.append(data, n); }
  void overwriteStart(const std::string& header) override { bytes.replace(0, header.size(), header); }
};

// The header and the zstd frame of a body of a size known beforehand, made
// as the body's bytes come: the body is never held whole (a record is
// mostly tensor bytes). A frame streamed with its size pledged is the one
// ZSTD_compress2 makes of the whole body.
class FrameSink final : public Sink {
 public:
  FrameSink(FileBytes& out, uint64_t bodySize) : out_(out), bodySize_(bodySize), buffer_(ZSTD_CStreamOutSize()) {
    if (!cctx_) throw Error("cannot compress the record: out of memory");
    ZSTD_CCtx_setParameter(cctx_.get(), ZSTD_c_compressionLevel, kZstdLevel);
    ZSTD_CCtx_setParameter(cctx_.get(), ZSTD_c_checksumFlag, 1);
    ZSTD_CCtx_setPledgedSrcSize(cctx_.get(), bodySize);
    std::string header(kHeaderSize, '\0');
    out_.append(header.data(), header.size());
  }

  void write(const char* data, size_t size) override {
    hash_.update(data, size);
    written_ += size;
    ZSTD_inBuffer in{data, size, 0};
    while (in.pos < in.size) compress(in, ZSTD_e_continue);
  }

  void finish() {
    if (written_ != bodySize_) throw Error("cannot write the record: its body changed while it was written");
    ZSTD_inBuffer none{nullptr, 0, 0};
    while (compress(none, ZSTD_e_end) != 0) {
    }
    std::string header(kMagic, 8);
    putU32(header, kFormatVersion);
    putU32(header, 0);
    putU64(header, frameSize_);
    putU64(header, bodySize_);
    putU64(header, hash_.digest());
    out_.overwriteStart(header);
  }

 private:
  size_t compress(ZSTD_inBuffer& in, ZSTD_EndDirective mode) {
    ZSTD_outBuffer o{buffer_.data(), buffer_.size(), 0};
    size_t left = ZSTD_compressStream2(cctx_.get(), &o, &in, mode);
    if (ZSTD_isError(left)) throw Error(std::string("cannot compress the record: ") + ZSTD_getErrorName(left));
    out_.append(buffer_.data(), o.pos);
    frameSize_ += o.pos;
    return left;
  }

  FileBytes& out_;
  uint64_t bodySize_, written_ = 0, frameSize_ = 0;
  std::unique_ptr<ZSTD_CCtx, size_t (*)(ZSTD_CCtx*)> cctx_{ZSTD_createCCtx(), ZSTD_freeCCtx};
  std::vector<char> buffer_;
  ContentHasher hash_;
};

// The whole file of `file` into `out`: the body counted first (tensor
// bytes are not copied for that), then written through the frame.
void writeFile(const RecordFile& file, FileBytes& out) {
  CountingSink counted;
  writeBody(file, counted);
  FrameSink frame(out, counted.size);
  writeBody(file, frame);
  frame.finish();
}

}  // namespace

std::string encodeBody(const RecordFile& file) {
  StringSink body;
  writeBody(file, body);
  return std::move(body.bytes);
}

std::string wrapBody(const std::string& body) {
  StringFileBytes out;
  FrameSink frame(out, body.size());
  frame.write(body.data(), body.size());
  frame.finish();
  return std::move(out.bytes);
}

std::string encode(const RecordFile& file) {
  StringFileBytes out;
  writeFile(file, out);
  return std::move(out.bytes);
}

namespace {

// Checks the header and returns the decompressed body.
std::string checkedBody(const std::string& bytes, const std::string& origin) {
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
  std::string body = decompressBody(bytes.data() + kHeaderSize, frameSize, bodySize, origin);
  if (hashBytes(body.data(), body.size()) != bodyHash)
    throw Error(origin + ": the record is corrupted: its body does not match its hash; capture it again with magpy-capture");
  return body;
}

RecordFile parseBody(const std::string& body, const std::string& origin) {
  RecordFile file;
  Reader r(body, origin);
  io(r, file);
  if (!r.atEnd()) r.fail("unexpected data after the last section");
  validate(file, origin);
  return file;
}

}  // namespace

RecordFile decode(const std::string& bytes, const std::string& origin) { return parseBody(checkedBody(bytes, origin), origin); }

namespace {

// A file written under a temporary name in its directory and renamed into
// place by commit(); removed if it is never committed (an error midway).
class TemporaryFile final : public FileBytes {
 public:
  explicit TemporaryFile(const std::string& path) : path_(path), tmp_(path + ".tmp-" + std::to_string(::getpid())) {
    out_.open(tmp_, std::ios::binary | std::ios::trunc);
    if (!out_) throw Error("cannot write " + path_ + ": cannot create " + tmp_.string() + " (is the directory writable?)");
  }
  ~TemporaryFile() {
    if (committed_) return;
    out_.close();
    std::error_code ec;
    std::filesystem::remove(tmp_, ec);
  }

  void append(const char* data, size_t size) override {
    out_.write(data, std::streamsize(size));
    if (!out_) throw Error("cannot write " + path_ + ": the disk may be full");
  }
  void overwriteStart(const std::string& bytes) override {
    out_.seekp(0);
    append(bytes.data(), bytes.size());
  }

  void commit() {
    out_.flush();
    out_.close();
    if (!out_) throw Error("cannot write " + path_ + ": the disk may be full");
    std::error_code ec;
    std::filesystem::rename(tmp_, path_, ec);
    if (ec) throw Error("cannot write " + path_ + ": " + ec.message());
    committed_ = true;
  }

 private:
  std::string path_;
  std::filesystem::path tmp_;
  std::ofstream out_;
  bool committed_ = false;
};

}  // namespace

void writeFileAtomically(const std::string& path, const std::string& bytes) {
  TemporaryFile file(path);
  file.append(bytes.data(), bytes.size());
  file.commit();
}

void writeRecordFile(const RecordFile& file, const std::string& path) {
  TemporaryFile out(path);
  writeFile(file, out);
  out.commit();
}

RecordFile readRecordFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::error_code ec;
    if (!std::filesystem::exists(path, ec)) throw Error(path + ": no such file; pass a .mgp file written by magpy-capture");
    throw Error(path + ": cannot be read (permissions?)");
  }
  // One copy of the file at a time: its bytes go once the body is out.
  std::string body;
  {
    std::string bytes;
    std::error_code ec;
    if (std::filesystem::is_regular_file(path, ec)) {
      bytes.resize(size_t(std::filesystem::file_size(path, ec)));
      if (ec || !in.read(bytes.data(), std::streamsize(bytes.size()))) throw Error(path + ": cannot be read");
    } else {  // a pipe, a device: read to its end
      std::ostringstream ss;
      ss << in.rdbuf();
      bytes = std::move(ss).str();
    }
    body = checkedBody(bytes, path);
  }
  return parseBody(body, path);
}

}  // namespace magpy::record
