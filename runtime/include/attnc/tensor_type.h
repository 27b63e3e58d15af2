// A kernel tensor's type (element type and dimensions as factor lists), shared by every stage.
//
// One definition for the DSL's declarations, the attn dialect's `#attn.dims` attribute,
// HalideGen, the generated descriptors and the runtime, so the canonical spelling of a dimension
// ("N", "64", "M*D") is printed and parsed here and nowhere else. Header-only and free of
// LLVM/Halide: the installed runtime headers include it. Adding an element type touches the
// enum, kDTypes and its lowering (MLIRGen's and HalideGen's element types), nothing else.
#pragma once

#include <cctype>
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace attnc {

// BF16 and F16 are storage types: a kernel reads them widened to f32 and rounds its f32 results
// to them (round to nearest even) where it stores an output of that type.
enum class DType { F32, I32, BF16, F16 };

struct DTypeInfo {
  DType dtype;
  const char *name;       // the DSL's and numpy-facing spelling: "f32"
  const char *enumerator; // the C++ enumerator generated descriptors name: "F32"
  // numpy's descr without the byte order: "f4" ("<f4" little-endian). numpy has no bf16: ml_dtypes
  // arrays are saved as "<V2" (two opaque bytes), which is what bf16 outputs are written as.
  const char *npy_kind;
  size_t bytes;
  bool is_float;
};

inline constexpr DTypeInfo kDTypes[] = {
    {DType::F32, "f32", "F32", "f4", 4, true},
    {DType::I32, "i32", "I32", "i4", 4, false},
    {DType::BF16, "bf16", "BF16", "V2", 2, true},
    {DType::F16, "f16", "F16", "f2", 2, true},
};

// The entry of kDTypes for `dtype`, or null for a value outside the enum (a corrupt descriptor).
inline const DTypeInfo *dtype_info(DType dtype) {
  for (const DTypeInfo &i : kDTypes)
    if (i.dtype == dtype)
      return &i;
  return nullptr;
}

// "f32" / "i32" / "bf16" / "f16"; "?" for values outside the enum.
inline const char *dtype_name(DType dtype) {
  const DTypeInfo *i = dtype_info(dtype);
  return i ? i->name : "?";
}

// Bytes per element; 0 for values outside the enum.
inline size_t dtype_size(DType dtype) {
  const DTypeInfo *i = dtype_info(dtype);
  return i ? i->bytes : 0;
}

// The type spelt `name` ("f32"); false for anything else.
inline bool parse_dtype(std::string_view name, DType *out) {
  for (const DTypeInfo &i : kDTypes)
    if (name == i.name) {
      *out = i.dtype;
      return true;
    }
  return false;
}

// One factor of a dimension: a size symbol (a C identifier) or a non-negative literal.
struct DimFactor {
  std::string symbol; // empty for a literal
  int64_t value = 0;  // the literal's value
  bool literal() const { return symbol.empty(); }
  std::string str() const { return literal() ? std::to_string(value) : symbol; }
  bool operator==(const DimFactor &o) const { return symbol == o.symbol && value == o.value; }
};

// A tensor dimension: one factor, or (outputs only) a product of several.
struct Dim {
  std::vector<DimFactor> factors; // in source order; never empty once built

  static Dim of_symbol(std::string s) { return Dim{{DimFactor{std::move(s), 0}}}; }
  static Dim of_literal(int64_t v) { return Dim{{DimFactor{"", v}}}; }

  bool product() const { return factors.size() > 1; }
  // One literal factor (a product of literals is static too, but not a literal).
  bool literal() const { return factors.size() == 1 && factors[0].literal(); }
  // One symbol factor.
  bool symbol() const { return factors.size() == 1 && !factors[0].literal(); }
  const std::string &symbol_name() const { return factors[0].symbol; }
  int64_t literal_value() const { return factors[0].value; }
  // Whether the extent is known without sizes (every factor a literal).
  bool is_static() const {
    for (const DimFactor &f : factors)
      if (!f.literal())
        return false;
    return true;
  }
  // The product of the literal factors (the extent when is_static()).
  int64_t static_value() const {
    int64_t v = 1;
    for (const DimFactor &f : factors)
      if (f.literal())
        v *= f.value;
    return v;
  }

  // The canonical spelling: "N", "64", or the factors joined by '*' without blanks, "M*D".
  std::string str() const {
    std::string s;
    for (size_t i = 0; i < factors.size(); ++i)
      s += (i ? "*" : "") + factors[i].str();
    return s;
  }

  // Parses str()'s spelling; false for anything else (an empty factor, blanks, a literal that
  // overflows int64, a symbol that is not a C identifier).
  static bool parse(std::string_view text, Dim *out) {
    out->factors.clear();
    for (;;) {
      const size_t star = text.find('*');
      std::string_view f = text.substr(0, star);
      DimFactor factor;
      if (f.empty())
        return false;
      if (std::isdigit(static_cast<unsigned char>(f[0]))) {
        int64_t v = 0;
        for (char c : f)
          if (!std::isdigit(static_cast<unsigned char>(c)) ||
              __builtin_mul_overflow(v, int64_t{10}, &v) ||
              __builtin_add_overflow(v, int64_t{c - '0'}, &v))
            return false;
        factor.value = v;
      } else {
        if (!(std::isalpha(static_cast<unsigned char>(f[0])) || f[0] == '_'))
          return false;
        for (char c : f)
          if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_'))
            return false;
        factor.symbol = std::string(f);
      }
      out->factors.push_back(std::move(factor));
      if (star == std::string_view::npos)
        return true;
      text = text.substr(star + 1);
    }
  }

  enum class EvalError { None, Unbound, Overflow };
  // Multiplies the factors out with `sizes` binding the symbols. On Unbound, `*unbound` names
  // the first symbol without a value; on Overflow the product passed `limit`.
  EvalError evaluate(const std::map<std::string, int64_t> &sizes, int64_t *out,
                     std::string *unbound = nullptr, int64_t limit = INT64_MAX) const {
    int64_t v = 1;
    for (const DimFactor &f : factors) {
      int64_t x = f.value;
      if (!f.literal()) {
        auto it = sizes.find(f.symbol);
        if (it == sizes.end()) {
          if (unbound)
            *unbound = f.symbol;
          return EvalError::Unbound;
        }
        x = it->second;
      }
      if (__builtin_mul_overflow(v, x, &v) || v > limit)
        return EvalError::Overflow;
    }
    *out = v;
    return EvalError::None;
  }

  bool operator==(const Dim &o) const { return factors == o.factors; }
  bool operator!=(const Dim &o) const { return !(*this == o); }
};

// The element type and dimensions (outermost first, C order) of one kernel tensor.
struct TensorType {
  DType dtype = DType::F32;
  std::vector<Dim> dims;
  size_t rank() const { return dims.size(); }
  bool is_float() const {
    const DTypeInfo *i = dtype_info(dtype);
    return i && i->is_float;
  }
  // "f32[B, H, M*D]", as the DSL declares it.
  std::string str() const {
    std::string s = std::string(dtype_name(dtype)) + "[";
    for (size_t i = 0; i < dims.size(); ++i)
      s += (i ? ", " : "") + dims[i].str();
    return s + "]";
  }
};

} // namespace attnc
