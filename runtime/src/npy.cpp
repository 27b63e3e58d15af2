// .npy reader/writer: strict header parsing with path-prefixed errors; files are written through an OutputSet.
#include "attnc/npy.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <new>
#include <utility>

namespace attnc {

// The element bytes are copied verbatim between memory and '<' files.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "attnc npy I/O assumes a little-endian host");

TensorView NpyArray::view() {
  // An empty vector may have a null data(); validate_call accepts null for
  // zero-size tensors, so no placeholder allocation is needed.
  return TensorView::contiguous(data.empty() ? nullptr : data.data(), dtype, shape);
}

namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicLen = 6;

// ---------------------------------------------------------------------------
// Minimal parser for the Python literal subset numpy writes in headers:
// a dict of string keys to strings, booleans, None, ints and tuples/lists.

struct PyValue {
  enum Kind { Str, Bool, None, Int, Tuple, List } kind = None;
  std::string str;
  bool boolean = false;
  int64_t integer = 0;
  bool int_overflow = false;
  std::vector<PyValue> items;
};

class HeaderParser {
public:
  explicit HeaderParser(std::string_view text) : t_(text) {}

  bool parse_dict(std::vector<std::pair<std::string, PyValue>> *out) {
    skip_ws();
    if (!eat('{'))
      return fail("expected '{'");
    for (;;) {
      skip_ws();
      if (eat('}'))
        break;
      PyValue key;
      if (!parse_value(&key, 0))
        return false;
      if (key.kind != PyValue::Str)
        return fail("dictionary keys must be strings");
      skip_ws();
      if (!eat(':'))
        return fail("expected ':' after key '" + key.str + "'");
      PyValue val;
      if (!parse_value(&val, 0))
        return false;
      out->emplace_back(key.str, std::move(val));
      skip_ws();
      if (eat(','))
        continue;
      if (eat('}'))
        break;
      return fail("expected ',' or '}'");
    }
    skip_ws();
    if (pos_ != t_.size())
      return fail("unexpected text after the dictionary");
    return true;
  }

  const std::string &error() const { return err_; }

private:
  bool parse_value(PyValue *v, int depth) {
    // Bounded so a hostile header like "((((..." cannot exhaust the stack.
    if (depth > 16)
      return fail("nesting too deep");
    skip_ws();
    if (pos_ >= t_.size())
      return fail("unexpected end of header");
    const char c = t_[pos_];
    if (c == '\'' || c == '"')
      return parse_string(v);
    if (c == '(' || c == '[')
      return parse_sequence(v, depth);
    if (c == '-' || c == '+' || (c >= '0' && c <= '9'))
      return parse_int(v);
    if (is_ident(c)) {
      size_t start = pos_;
      while (pos_ < t_.size() && (is_ident(t_[pos_]) || (t_[pos_] >= '0' && t_[pos_] <= '9')))
        ++pos_;
      std::string_view word = t_.substr(start, pos_ - start);
      if (word == "True" || word == "False") {
        v->kind = PyValue::Bool;
        v->boolean = word == "True";
        return true;
      }
      if (word == "None") {
        v->kind = PyValue::None;
        return true;
      }
      return fail("unexpected word '" + std::string(word) + "'");
    }
    return fail(std::string("unexpected character '") + c + "'");
  }

  bool parse_string(PyValue *v) {
    const char quote = t_[pos_++];
    v->kind = PyValue::Str;
    while (pos_ < t_.size() && t_[pos_] != quote) {
      char c = t_[pos_++];
      if (c == '\\') {
        if (pos_ >= t_.size())
          break;
        c = t_[pos_++];
      }
      v->str += c;
    }
    if (!eat(quote))
      return fail("unterminated string");
    return true;
  }

  bool parse_sequence(PyValue *v, int depth) {
    const char open = t_[pos_++];
    const char close = open == '(' ? ')' : ']';
    v->kind = open == '(' ? PyValue::Tuple : PyValue::List;
    for (;;) {
      skip_ws();
      if (eat(close))
        return true;
      PyValue item;
      if (!parse_value(&item, depth + 1))
        return false;
      v->items.push_back(std::move(item));
      skip_ws();
      if (eat(','))
        continue;
      if (eat(close)) {
        // "(5)" is just 5 in Python, not a tuple.
        if (open == '(' && v->items.size() == 1) {
          PyValue inner = std::move(v->items[0]);
          *v = std::move(inner);
        }
        return true;
      }
      return fail(std::string("expected ',' or '") + close + "'");
    }
  }

  bool parse_int(PyValue *v) {
    bool neg = false;
    if (t_[pos_] == '-' || t_[pos_] == '+')
      neg = t_[pos_++] == '-';
    if (pos_ >= t_.size() || t_[pos_] < '0' || t_[pos_] > '9')
      return fail("malformed integer");
    v->kind = PyValue::Int;
    // The magnitude is accumulated unsigned: -9223372036854775808 fits int64 but its
    // magnitude does not, and negating a wrapped value would be undefined.
    uint64_t x = 0;
    while (pos_ < t_.size() && t_[pos_] >= '0' && t_[pos_] <= '9') {
      const uint64_t digit = static_cast<uint64_t>(t_[pos_++] - '0');
      if (__builtin_mul_overflow(x, uint64_t{10}, &x) || __builtin_add_overflow(x, digit, &x))
        v->int_overflow = true;
    }
    const uint64_t limit =
        static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) + (neg ? 1 : 0);
    if (x > limit)
      v->int_overflow = true;
    // Python 2 era writers emitted longs as "3L".
    if (pos_ < t_.size() && (t_[pos_] == 'L' || t_[pos_] == 'l'))
      ++pos_;
    v->integer = v->int_overflow ? 0 : neg ? static_cast<int64_t>(0 - x) : static_cast<int64_t>(x);
    return true;
  }

  static bool is_ident(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
  }
  void skip_ws() {
    while (pos_ < t_.size() &&
           (t_[pos_] == ' ' || t_[pos_] == '\t' || t_[pos_] == '\n' || t_[pos_] == '\r'))
      ++pos_;
  }
  bool eat(char c) {
    if (pos_ < t_.size() && t_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  bool fail(const std::string &msg) {
    if (err_.empty())
      err_ = msg + " at offset " + std::to_string(pos_);
    return false;
  }

  std::string_view t_;
  size_t pos_ = 0;
  std::string err_;
};

std::string shape_str(const std::vector<int64_t> &shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i)
      s += ", ";
    s += std::to_string(shape[i]);
  }
  if (shape.size() == 1)
    s += ",";
  return s + ")";
}

// numel * itemsize, or false on overflow / negative dimensions.
bool byte_size(const std::vector<int64_t> &shape, size_t itemsize, uint64_t *out) {
  uint64_t n = itemsize;
  for (int64_t d : shape) {
    if (d < 0)
      return false;
    if (__builtin_mul_overflow(n, static_cast<uint64_t>(d), &n))
      return false;
  }
  // Keep sizes representable as ptrdiff_t / off_t.
  if (n > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
    return false;
  *out = n;
  return true;
}

struct FileCloser {
  void operator()(std::FILE *f) const { std::fclose(f); }
};

uint64_t read_le(const unsigned char *p, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; --i)
    v = (v << 8) | p[i];
  return v;
}

Status parse_descr(const std::string &path, const std::string &descr, DType *dtype, bool *raw16) {
  *raw16 = false;
  // bf16 has no numpy type: ml_dtypes' arrays are saved as opaque pairs of bytes ('<V2', also
  // spelt '|V2' since void has no byte order) and raw bits as unsigned 16-bit integers.
  if (descr == "<V2" || descr == "|V2" || descr == "=V2" || descr == "<u2" || descr == "=u2") {
    *dtype = DType::BF16;
    *raw16 = true;
    return Status::Ok();
  }
  for (const DTypeInfo &t : kDTypes)
    if (!descr.empty() && (descr[0] == '<' || descr[0] == '=') && descr.substr(1) == t.npy_kind) {
      *dtype = t.dtype;
      return Status::Ok();
    }
  if (descr == ">f4" || descr == ">i4" || descr == ">f2" || descr == ">u2") {
    return Status::Error(path + ": big-endian data is not supported; convert with arr.astype('<" +
                         descr.substr(1) + "')");
  }
  // '|' (no byte order) is only meaningful for 1-byte types; anything else is
  // a corrupt or hand-written header rather than a merely unsupported type.
  if (descr.size() >= 3 && descr[0] == '|' && descr.substr(2) != "1") {
    return Status::Error(path + ": dtype '" + descr +
                         "' is invalid: byte order '|' is only valid for 1-byte types");
  }
  return Status::Error(
      path + ": dtype '" + descr +
      "' is not supported (only float32 '<f4', int32 '<i4', float16 '<f2' and bf16 as "
      "'<V2' or '<u2' bits)");
}

} // namespace

// ---------------------------------------------------------------------------

Status read_npy(const std::string &path, NpyArray *out) {
  // Non-blocking: opening a FIFO that nobody writes to would otherwise wait forever. Reads
  // of a regular file never block, so the flag changes nothing once it is known to be one.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0)
    return Status::Error(path + ": cannot open: " + std::strerror(errno));
  std::unique_ptr<std::FILE, FileCloser> f(::fdopen(fd, "rb"));
  if (!f) {
    const int e = errno;
    ::close(fd);
    return Status::Error(path + ": cannot open: " + std::strerror(e));
  }

  struct stat st;
  if (fstat(fd, &st) != 0) {
    return Status::Error(path + ": cannot stat: " + std::strerror(errno));
  }
  // The size is needed up front so a header claiming a huge shape is rejected
  // before allocating for it; devices, FIFOs and directories are never read.
  if (!S_ISREG(st.st_mode)) {
    const char *kind = S_ISDIR(st.st_mode)    ? "a directory"
                       : S_ISCHR(st.st_mode)  ? "a character device"
                       : S_ISBLK(st.st_mode)  ? "a block device"
                       : S_ISFIFO(st.st_mode) ? "a FIFO"
                       : S_ISSOCK(st.st_mode) ? "a socket"
                                              : "special";
    return Status::Error(path + ": not a regular file (it is " + kind + ")");
  }
  const uint64_t file_size = static_cast<uint64_t>(st.st_size);

  unsigned char pre[12];
  const size_t got = std::fread(pre, 1, 8, f.get());
  if (got < kMagicLen || std::memcmp(pre, kMagic, kMagicLen) != 0) {
    return Status::Error(path + ": not an .npy file (bad magic)");
  }
  if (got < 8)
    return Status::Error(path + ": truncated header (file ends after the magic)");
  const int major = pre[6], minor = pre[7];
  if (major < 1 || major > 3 || minor != 0) {
    return Status::Error(path + ": unsupported .npy format version " + std::to_string(major) + "." +
                         std::to_string(minor) + " (supported: 1.0, 2.0, 3.0)");
  }
  const int len_bytes = major == 1 ? 2 : 4;
  if (std::fread(pre + 8, 1, len_bytes, f.get()) != static_cast<size_t>(len_bytes)) {
    return Status::Error(path + ": truncated header (missing header length)");
  }
  const uint64_t header_len = read_le(pre + 8, len_bytes);
  const uint64_t header_end = 8 + len_bytes + header_len;
  if (header_end > file_size) {
    return Status::Error(path + ": truncated header: header length is " +
                         std::to_string(header_len) + " bytes but the file has only " +
                         std::to_string(file_size - 8 - len_bytes) + " after the preamble");
  }
  std::string header(header_len, '\0');
  if (header_len > 0 && std::fread(&header[0], 1, header_len, f.get()) != header_len) {
    return Status::Error(path + ": truncated header");
  }

  std::vector<std::pair<std::string, PyValue>> dict;
  HeaderParser parser(header);
  if (!parser.parse_dict(&dict)) {
    return Status::Error(path + ": malformed header dict: " + parser.error());
  }
  const PyValue *descr = nullptr;
  const PyValue *fortran = nullptr;
  const PyValue *shape_v = nullptr;
  for (const auto &[key, val] : dict) {
    const PyValue **slot = key == "descr"           ? &descr
                           : key == "fortran_order" ? &fortran
                           : key == "shape"         ? &shape_v
                                                    : nullptr;
    if (slot == nullptr) {
      return Status::Error(path + ": malformed header dict: unexpected key '" + key + "'");
    }
    if (*slot != nullptr) {
      return Status::Error(path + ": malformed header dict: duplicate key '" + key + "'");
    }
    *slot = &val;
  }
  for (auto [ptr, name] : {std::pair<const PyValue *, const char *>{descr, "descr"},
                           {fortran, "fortran_order"},
                           {shape_v, "shape"}}) {
    if (ptr == nullptr) {
      return Status::Error(path + ": malformed header dict: missing '" + name + "'");
    }
  }
  if (descr->kind != PyValue::Str) {
    return Status::Error(path + ": structured dtypes are not supported ('descr' must be a string "
                                "such as '<f4')");
  }
  if (fortran->kind != PyValue::Bool) {
    return Status::Error(path + ": malformed header dict: 'fortran_order' must be True or False");
  }
  if (shape_v->kind != PyValue::Tuple) {
    return Status::Error(path + ": malformed header dict: 'shape' must be a tuple of integers");
  }

  DType dtype;
  bool raw16 = false;
  Status s = parse_descr(path, descr->str, &dtype, &raw16);
  if (!s.ok())
    return s;
  if (fortran->boolean) {
    return Status::Error(path +
                         ": Fortran-order arrays are not supported; use np.ascontiguousarray");
  }

  std::vector<int64_t> shape;
  for (const PyValue &d : shape_v->items) {
    if (d.kind != PyValue::Int) {
      return Status::Error(path + ": malformed header dict: 'shape' must be a tuple of integers");
    }
    if (d.int_overflow)
      return Status::Error(path + ": shape dimension overflows int64");
    shape.push_back(d.integer);
  }
  for (int64_t d : shape) {
    if (d < 0) {
      return Status::Error(path + ": shape " + shape_str(shape) + " has a negative dimension");
    }
  }
  if (shape.size() > static_cast<size_t>(kMaxRank)) {
    return Status::Error(path + ": rank " + std::to_string(shape.size()) +
                         " exceeds the maximum supported rank " + std::to_string(kMaxRank));
  }
  uint64_t nbytes = 0;
  if (!byte_size(shape, dtype_size(dtype), &nbytes)) {
    return Status::Error(path + ": shape " + shape_str(shape) + " is too large (overflows)");
  }

  const uint64_t available = file_size - header_end;
  if (available < nbytes) {
    return Status::Error(path + ": data is truncated: shape " + shape_str(shape) + " needs " +
                         std::to_string(nbytes) + " bytes but the file has " +
                         std::to_string(available));
  }
  if (available > nbytes) {
    return Status::Error(path + ": file has " + std::to_string(available - nbytes) +
                         " trailing bytes after the " + std::to_string(nbytes) +
                         " data bytes of shape " + shape_str(shape));
  }

  // A file larger than this machine's memory (a sparse one, say) is refused before allocating.
  s = check_memory(path + ": the data", nbytes);
  if (!s.ok())
    return s;
  std::vector<char> data;
  try {
    data.resize(nbytes);
  } catch (const std::bad_alloc &) {
    return Status::Error(path + ": cannot allocate " + std::to_string(nbytes) +
                         " bytes for the data");
  }
  if (nbytes > 0 && std::fread(data.data(), 1, nbytes, f.get()) != nbytes) {
    return Status::Error(path + ": read error: " + std::strerror(errno));
  }

  out->dtype = dtype;
  out->raw16 = raw16;
  out->shape = std::move(shape);
  out->data = std::move(data);
  return Status::Ok();
}

void retype_raw16(NpyArray &a, DType declared) {
  if (a.raw16 && (declared == DType::BF16 || declared == DType::F16))
    a.dtype = declared;
}

Status write_npy(OutputSet &out, size_t file, DType dtype, const std::vector<int64_t> &shape,
                 const void *data) {
  const std::string &path = out.path(file);
  const DTypeInfo *info = dtype_info(dtype);
  if (info == nullptr)
    return Status::Error(path + ": unknown dtype");
  const std::string descr = std::string("<") + info->npy_kind;
  for (int64_t d : shape) {
    if (d < 0) {
      return Status::Error(path + ": shape " + shape_str(shape) + " has a negative dimension");
    }
  }
  uint64_t nbytes = 0;
  if (!byte_size(shape, dtype_size(dtype), &nbytes)) {
    return Status::Error(path + ": shape " + shape_str(shape) + " is too large (overflows)");
  }
  if (data == nullptr && nbytes > 0)
    return Status::Error(path + ": data pointer is null");

  std::string header = std::string("{'descr': '") + descr +
                       "', 'fortran_order': False, 'shape': " + shape_str(shape) + ", }";
  // Preamble (magic, version, length) is 10 bytes in v1 and 12 in v2; the
  // header is space-padded and newline-terminated so data is 64-byte aligned,
  // which lets readers mmap the data with vector-friendly alignment.
  int major = 1;
  size_t preamble = 10;
  size_t total = (preamble + header.size() + 1 + 63) / 64 * 64;
  if (total - preamble > 0xFFFF) {
    major = 2;
    preamble = 12;
    total = (preamble + header.size() + 1 + 63) / 64 * 64;
  }
  header.append(total - preamble - header.size() - 1, ' ');
  header.push_back('\n');

  std::string pre(kMagic, kMagicLen);
  pre.push_back(static_cast<char>(major));
  pre.push_back(0);
  const uint64_t hl = header.size();
  for (int i = 0; i < (major == 1 ? 2 : 4); ++i)
    pre.push_back(static_cast<char>((hl >> (8 * i)) & 0xFF));

  Status s = out.append(file, pre + header);
  if (s.ok() && nbytes > 0)
    s = out.append(file, data, nbytes);
  return s;
}

Status write_npy(const std::string &path, DType dtype, const std::vector<int64_t> &shape,
                 const void *data) {
  OutputSet out;
  size_t file = 0;
  Status s = out.add(path, "", &file);
  if (s.ok())
    s = write_npy(out, file, dtype, shape, data);
  if (s.ok())
    s = out.commit();
  return s;
}

} // namespace attnc
