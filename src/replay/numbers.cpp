#include "replay/numbers.h"

#include <cmath>

#include "magpy/replay/plan.h"

namespace magpy::replay {
namespace {

[[noreturn]] void notThisCall(const std::string& why) {
  throw SizeMismatch(why + ": the record does not describe this call");
}

constexpr int64_t kExact = int64_t(1) << 53;  // ints a double holds exactly

double exactDouble(const c10::IValue& v) {
  if (!v.isInt()) return v.toDouble();
  if (v.toInt() > kExact || v.toInt() < -kExact) notThisCall("Python computes with ints beyond 2^53 exactly");
  return double(v.toInt());
}

// A float Python turns into an int (int(), math.ceil/floor): finite, and
// within 64 bits.
int64_t toInt64(double x, const char* what) {
  if (std::isnan(x) || std::isinf(x)) notThisCall(std::string(what) + " of a NaN or infinity raises in Python");
  if (x >= 9223372036854775808.0 || x < -9223372036854775808.0) notThisCall("Python's int grows beyond 64 bits");
  return int64_t(x);
}

c10::IValue intOp(NumberOp op, int64_t x, int64_t y) {
  int64_t r = 0;
  bool overflow = false;
  switch (op) {
    case NumberOp::Add: overflow = __builtin_add_overflow(x, y, &r); break;
    case NumberOp::Sub: overflow = __builtin_sub_overflow(x, y, &r); break;
    case NumberOp::Mul: overflow = __builtin_mul_overflow(x, y, &r); break;
    case NumberOp::FloorDiv: case NumberOp::Mod:
      if (y == 0) notThisCall("integer division by zero raises in Python");
      if (y == -1) {  // INT64_MIN / -1 overflows in C++
        overflow = op == NumberOp::FloorDiv && x == INT64_MIN;
        r = op == NumberOp::FloorDiv && !overflow ? -x : 0;
        break;
      }
      r = op == NumberOp::FloorDiv ? x / y - ((x % y != 0) && ((x < 0) != (y < 0)))
                                   : x % y + ((x % y != 0 && (x % y < 0) != (y < 0)) ? y : 0);
      break;
    case NumberOp::Pow:
      if (y < 0) notThisCall("an int to a negative power is a float in Python");
      r = 1;
      for (int64_t base = x; y > 0 && !overflow; y >>= 1) {  // by squaring
        if (y & 1) overflow = __builtin_mul_overflow(r, base, &r);
        if (y > 1) overflow = overflow || __builtin_mul_overflow(base, base, &base);
      }
      break;
    case NumberOp::Min: r = y < x ? y : x; break;
    case NumberOp::Max: r = y > x ? y : x; break;
    case NumberOp::Neg: case NumberOp::Abs:
      overflow = x == INT64_MIN;  // -x and abs(x) leave 64 bits
      r = overflow ? 0 : op == NumberOp::Neg || x < 0 ? -x : x;
      break;
    case NumberOp::Int: case NumberOp::Ceil: case NumberOp::Floor: r = x; break;
    default: throw Error("internal: no int form of this number operator");
  }
  if (overflow) notThisCall("Python's int grows beyond 64 bits");
  return c10::IValue(r);
}

c10::IValue floatOp(NumberOp op, double x, double y) {
  switch (op) {
    case NumberOp::Add: return c10::IValue(x + y);
    case NumberOp::Sub: return c10::IValue(x - y);
    case NumberOp::Mul: return c10::IValue(x * y);
    case NumberOp::TrueDiv:
      if (y == 0) notThisCall("float division by zero raises in Python");
      return c10::IValue(x / y);
    case NumberOp::FloorDiv: {  // as Python's float //: through fmod, so x == (x // y) * y + x % y
      if (y == 0) notThisCall("float floor division by zero raises in Python");
      double mod = std::fmod(x, y), div = (x - mod) / y;
      if (mod != 0 && ((y < 0) != (mod < 0))) div -= 1.0;
      if (div == 0) return c10::IValue(std::copysign(0.0, x / y));
      double floored = std::floor(div);
      return c10::IValue(div - floored > 0.5 ? floored + 1.0 : floored);
    }
    case NumberOp::Mod: {  // the sign of the divisor, as Python's
      if (y == 0) notThisCall("float modulo by zero raises in Python");
      double mod = std::fmod(x, y);
      if (mod != 0 && ((y < 0) != (mod < 0))) mod += y;
      return c10::IValue(mod == 0 ? std::copysign(0.0, y) : mod);
    }
    case NumberOp::Pow: {  // as Python's float **, which calls C's pow where it does not raise
      if (x == 0 && y < 0 && std::isfinite(y)) notThisCall("0.0 to a negative power raises in Python");
      if (x < 0 && std::isfinite(x) && std::isfinite(y) && y != std::floor(y)) notThisCall("a negative float to a fractional power is complex in Python");
      double r = std::pow(x, y);
      if (std::isinf(r) && std::isfinite(x) && std::isfinite(y)) notThisCall("float ** overflows, which raises in Python");
      return c10::IValue(r);
    }
    case NumberOp::Min: return c10::IValue(y < x ? y : x);  // Python's min keeps the first of equals, and a NaN first
    case NumberOp::Max: return c10::IValue(y > x ? y : x);
    case NumberOp::Neg: return c10::IValue(-x);
    case NumberOp::Abs: return c10::IValue(std::fabs(x));
    case NumberOp::Int: return c10::IValue(toInt64(std::trunc(x), "int()"));
    case NumberOp::Float: return c10::IValue(x);
    case NumberOp::Sqrt:
      if (x < 0) notThisCall("math.sqrt of a negative number raises in Python");
      return c10::IValue(std::sqrt(x));
    case NumberOp::Ceil: return c10::IValue(toInt64(std::ceil(x), "math.ceil"));
    case NumberOp::Floor: return c10::IValue(toInt64(std::floor(x), "math.floor"));
    default: throw Error("internal: no float form of this number operator");
  }
}

bool comparison(NumberOp op, const c10::IValue& a, const c10::IValue& b) {
  auto compare = [&](auto x, auto y) {
    switch (op) {
      case NumberOp::Lt: return x < y;
      case NumberOp::Le: return x <= y;
      case NumberOp::Gt: return x > y;
      case NumberOp::Ge: return x >= y;
      case NumberOp::Eq: return x == y;
      default: return x != y;
    }
  };
  if (a.isInt() && b.isInt()) return compare(a.toInt(), b.toInt());
  return compare(exactDouble(a), exactDouble(b));
}

}  // namespace

c10::IValue numberOp(NumberOp op, const c10::IValue& a, const c10::IValue& b) {
  if (op >= NumberOp::Lt) return c10::IValue(comparison(op, a, b));
  bool unary = op >= NumberOp::Neg;
  if (a.isInt() && (unary ? op != NumberOp::Float && op != NumberOp::Sqrt : b.isInt() && op != NumberOp::TrueDiv))
    return intOp(op, a.toInt(), unary ? 0 : b.toInt());
  if (op == NumberOp::Float && a.isInt()) return c10::IValue(double(a.toInt()));  // rounds as Python's float()
  return floatOp(op, exactDouble(a), unary ? 0.0 : exactDouble(b));
}

}  // namespace magpy::replay
