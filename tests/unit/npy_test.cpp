// Unit tests for attnc .npy I/O: round trips and rejection of malformed files built byte by byte.
#include "attnc/npy.h"

#include <dirent.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <numeric>
#include <sstream>

namespace attnc {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

class NpyTest : public ::testing::Test {
protected:
  void SetUp() override {
    std::string tmpl = ::testing::TempDir();
    if (tmpl.empty() || tmpl.back() != '/')
      tmpl += '/';
    tmpl += "attnc_npy_XXXXXX";
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back('\0');
    ASSERT_NE(mkdtemp(buf.data()), nullptr) << std::strerror(errno);
    dir_ = buf.data();
  }
  void TearDown() override {
    for (const auto &f : list_dir())
      std::remove((dir_ + "/" + f).c_str());
    rmdir(dir_.c_str());
  }

  std::string path(const std::string &name) const { return dir_ + "/" + name; }

  std::vector<std::string> list_dir() const {
    std::vector<std::string> out;
    if (DIR *d = opendir(dir_.c_str())) {
      while (dirent *e = readdir(d)) {
        std::string n = e->d_name;
        if (n != "." && n != "..")
          out.push_back(n);
      }
      closedir(d);
    }
    return out;
  }

  std::string write_bytes(const std::string &name, const std::string &bytes) const {
    std::string p = path(name);
    std::ofstream f(p, std::ios::binary);
    f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    return p;
  }

  static std::string read_bytes(const std::string &p) {
    std::ifstream f(p, std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
  }

  // A well-formed preamble + padded header for the given dict text.
  static std::string npy_bytes(const std::string &dict, const std::string &data, int major = 1) {
    std::string header = dict;
    const size_t pre = major == 1 ? 10 : 12;
    while ((pre + header.size() + 1) % 64 != 0)
      header += ' ';
    header += '\n';
    std::string out("\x93NUMPY", 6);
    out += static_cast<char>(major);
    out += '\0';
    const uint32_t n = static_cast<uint32_t>(header.size());
    for (size_t i = 0; i < pre - 8; ++i)
      out += static_cast<char>((n >> (8 * i)) & 0xFF);
    return out + header + data;
  }

  static std::string f32_bytes(std::vector<float> v) {
    return std::string(reinterpret_cast<const char *>(v.data()), v.size() * sizeof(float));
  }

  Status read_file(const std::string &name, const std::string &bytes, NpyArray *arr) {
    return read_npy(write_bytes(name, bytes), arr);
  }

  // Reads bytes expecting failure; checks the message starts with the path.
  std::string reject(const std::string &bytes) {
    const std::string p = write_bytes("bad.npy", bytes);
    NpyArray arr;
    arr.shape = {42};
    Status s = read_npy(p, &arr);
    EXPECT_FALSE(s.ok());
    EXPECT_THAT(s.message(), StartsWith(p + ": "));
    EXPECT_EQ(arr.shape, std::vector<int64_t>{42}) << "output modified on failure";
    return s.message();
  }

  std::string dir_;
};

template <typename T>
void round_trip(const std::string &p, DType dtype, const std::vector<int64_t> &shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  std::vector<T> src(static_cast<size_t>(n));
  std::iota(src.begin(), src.end(), static_cast<T>(-3));
  Status s = write_npy(p, dtype, shape, src.data());
  ASSERT_TRUE(s.ok()) << s.message();

  NpyArray arr;
  s = read_npy(p, &arr);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(arr.dtype, dtype);
  EXPECT_EQ(arr.shape, shape);
  ASSERT_EQ(arr.data.size(), src.size() * sizeof(T));
  if (!src.empty()) {
    EXPECT_EQ(std::memcmp(arr.data.data(), src.data(), arr.data.size()), 0);
  }

  TensorView v = arr.view();
  EXPECT_EQ(v.dtype, dtype);
  EXPECT_EQ(v.rank, static_cast<int>(shape.size()));
  EXPECT_EQ(v.numel(), n);
  if (n > 0) {
    EXPECT_EQ(v.data, arr.data.data());
  }
}

TEST_F(NpyTest, RoundTripF32) {
  const std::vector<std::vector<int64_t>> shapes = {
      {}, {1}, {7}, {2, 3}, {2, 3, 4, 5}, {0}, {3, 0, 2}, {1, 1, 1, 1, 1, 1, 1, 2}};
  for (const auto &shape : shapes) {
    SCOPED_TRACE(::testing::PrintToString(shape));
    round_trip<float>(path("f.npy"), DType::F32, shape);
  }
}

TEST_F(NpyTest, RoundTripI32) {
  const std::vector<std::vector<int64_t>> shapes = {{}, {5}, {4, 4}, {0, 3}, {2, 1, 3}};
  for (const auto &shape : shapes) {
    SCOPED_TRACE(::testing::PrintToString(shape));
    round_trip<int32_t>(path("i.npy"), DType::I32, shape);
  }
}

TEST_F(NpyTest, WrittenLayoutMatchesNumpy) {
  const float data[6] = {1, 2, 3, 4, 5, 6};
  const std::string p = path("layout.npy");
  ASSERT_TRUE(write_npy(p, DType::F32, {2, 3}, data).ok());
  const std::string b = read_bytes(p);
  // 10-byte preamble + 59-character dict needs two 64-byte blocks.
  ASSERT_EQ(b.size(), 128u + sizeof(data));
  EXPECT_EQ(b.substr(0, 8), std::string("\x93NUMPY\x01\x00", 8));
  EXPECT_EQ(static_cast<unsigned char>(b[8]) | (static_cast<unsigned char>(b[9]) << 8), 118);
  const std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
  EXPECT_EQ(b.compare(10, dict.size(), dict), 0);
  EXPECT_EQ(b.find_first_not_of(' ', 10 + dict.size()), 127u);
  EXPECT_EQ(b[127], '\n');
  EXPECT_EQ(std::memcmp(b.data() + 128, data, sizeof(data)), 0);

  // 1-d shapes need the trailing comma to be a Python tuple.
  const int32_t one[3] = {1, 2, 3};
  ASSERT_TRUE(write_npy(p, DType::I32, {3}, one).ok());
  EXPECT_NE(read_bytes(p).find("'shape': (3,), }"), std::string::npos);
  ASSERT_TRUE(write_npy(p, DType::I32, {}, one).ok());
  EXPECT_NE(read_bytes(p).find("'shape': (), }"), std::string::npos);
  EXPECT_EQ(read_bytes(p).size(), 128u + 4u);
}

TEST_F(NpyTest, ReadsExactNumpyOutput) {
  // Bytes of np.save(f, np.arange(3, dtype='<f4')) from numpy 1.x.
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }";
  header.append(117 - header.size(), ' ');
  header += '\n';
  std::string bytes =
      std::string("\x93NUMPY\x01\x00\x76\x00", 10) + header + f32_bytes({0.0f, 1.0f, 2.0f});
  ASSERT_EQ(bytes.size(), 128u + 12u);
  NpyArray arr;
  Status s = read_file("numpy.npy", bytes, &arr);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(arr.shape, std::vector<int64_t>{3});
  EXPECT_EQ(reinterpret_cast<const float *>(arr.data.data())[2], 2.0f);
}

TEST_F(NpyTest, ReadsVersions2And3AndHeaderVariants) {
  NpyArray arr;
  const std::string data = f32_bytes({1, 2, 3, 4});
  for (int major : {2, 3}) {
    Status s = read_file(
        "v.npy",
        npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }", data, major),
        &arr);
    ASSERT_TRUE(s.ok()) << major << ": " << s.message();
    EXPECT_EQ(arr.shape, (std::vector<int64_t>{2, 2}));
  }
  // Different key order, double quotes, no trailing comma, Python 2 longs.
  Status s = read_file(
      "var.npy",
      npy_bytes("{\"shape\": (4L,), \"fortran_order\": False, \"descr\": \"<i4\"}", data), &arr);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(arr.dtype, DType::I32);
  EXPECT_EQ(arr.shape, std::vector<int64_t>{4});
}

TEST_F(NpyTest, ViewOfEmptyArrayIsAcceptedByValidation) {
  ASSERT_TRUE(write_npy(path("e.npy"), DType::F32, {0, 4}, nullptr).ok());
  NpyArray arr;
  ASSERT_TRUE(read_npy(path("e.npy"), &arr).ok());
  EXPECT_TRUE(arr.data.empty());
  TensorView v = arr.view();
  EXPECT_EQ(v.numel(), 0);
  EXPECT_EQ(v.shape[1], 4);
}

// Regression (make test-asan, lit run/product-dims.test): the view of an empty array whose other
// dimensions multiply past int64 overflowed while computing its strides (UBSan); they saturate.
TEST_F(NpyTest, ViewOfEmptyArrayWithHugeDimensions) {
  NpyArray arr;
  Status s = read_file("huge.npy",
                       npy_bytes("{'descr': '<f4', 'fortran_order': False, "
                                 "'shape': (0, 4294967296, 4294967296), }",
                                 ""),
                       &arr);
  ASSERT_TRUE(s.ok()) << s.message();
  TensorView v = arr.view();
  EXPECT_EQ(v.numel(), 0);
  EXPECT_EQ(v.strides[2], 1);
  EXPECT_EQ(v.strides[1], int64_t{1} << 32);
  EXPECT_EQ(v.strides[0], std::numeric_limits<int64_t>::max());
}

TEST_F(NpyTest, WriteIsAtomicAndOverwrites) {
  const std::string p = path("out.npy");
  const float a[2] = {1, 2};
  const float b[3] = {3, 4, 5};
  ASSERT_TRUE(write_npy(p, DType::F32, {2}, a).ok());
  ASSERT_TRUE(write_npy(p, DType::F32, {3}, b).ok());
  NpyArray arr;
  ASSERT_TRUE(read_npy(p, &arr).ok());
  EXPECT_EQ(arr.shape, std::vector<int64_t>{3});
  // No temporary files left behind.
  EXPECT_EQ(list_dir(), std::vector<std::string>{"out.npy"});
}

TEST_F(NpyTest, WriteErrors) {
  const float a[2] = {1, 2};
  const std::string missing = path("no/such/dir/x.npy");
  Status s = write_npy(missing, DType::F32, {2}, a);
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(s.message(), StartsWith("cannot write '" + missing + "'"));

  s = write_npy(path("neg.npy"), DType::F32, {2, -1}, a);
  EXPECT_EQ(s.message(), path("neg.npy") + ": shape (2, -1) has a negative dimension");

  s = write_npy(path("null.npy"), DType::F32, {2}, nullptr);
  EXPECT_EQ(s.message(), path("null.npy") + ": data pointer is null");

  s = write_npy(path("huge.npy"), DType::F32, {int64_t{1} << 62, 4}, a);
  EXPECT_THAT(s.message(), HasSubstr("too large"));
  EXPECT_TRUE(list_dir().empty());
}

// ---------------------------------------------------------------------------
// Rejections

const char kGoodDict[] = "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }";

TEST_F(NpyTest, RejectsMissingFile) {
  NpyArray arr;
  const std::string p = path("absent.npy");
  Status s = read_npy(p, &arr);
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(s.message(), StartsWith(p + ": cannot open"));
  EXPECT_THAT(s.message(), HasSubstr("No such file"));
}

TEST_F(NpyTest, RejectsDirectory) {
  NpyArray arr;
  Status s = read_npy(dir_, &arr);
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(s.message(), StartsWith(dir_ + ": "));
}

TEST_F(NpyTest, RejectsBadMagic) {
  EXPECT_THAT(reject("PK\x03\x04 this is a zip"), HasSubstr("not an .npy file (bad magic)"));
  EXPECT_THAT(reject("\x93NUM"), HasSubstr("not an .npy file (bad magic)"));
  EXPECT_THAT(reject(""), HasSubstr("not an .npy file (bad magic)"));
  std::string b = npy_bytes(kGoodDict, f32_bytes({1, 2}));
  b[1] = 'n';
  EXPECT_THAT(reject(b), HasSubstr("bad magic"));
}

TEST_F(NpyTest, RejectsUnsupportedVersion) {
  std::string b = npy_bytes(kGoodDict, f32_bytes({1, 2}));
  b[6] = 4;
  EXPECT_THAT(reject(b), HasSubstr("unsupported .npy format version 4.0"));
  b[6] = 1;
  b[7] = 1;
  EXPECT_THAT(reject(b), HasSubstr("unsupported .npy format version 1.1"));
  b[6] = 0;
  b[7] = 0;
  EXPECT_THAT(reject(b), HasSubstr("unsupported .npy format version 0.0"));
}

TEST_F(NpyTest, RejectsTruncatedHeader) {
  EXPECT_THAT(reject(std::string("\x93NUMPY\x01", 7)), HasSubstr("truncated header"));
  EXPECT_THAT(reject(std::string("\x93NUMPY\x01\x00\x40", 9)), HasSubstr("truncated header"));
  EXPECT_THAT(reject(std::string("\x93NUMPY\x02\x00\x40\x00", 10)), HasSubstr("truncated header"));
  const std::string full = npy_bytes(kGoodDict, "");
  EXPECT_THAT(reject(full.substr(0, 40)), HasSubstr("truncated header"));
  // Claimed header length far beyond the file.
  std::string b = full;
  b[9] = '\x7f';
  EXPECT_THAT(reject(b), HasSubstr("truncated header"));
}

TEST_F(NpyTest, RejectsMalformedDict) {
  const std::string d = f32_bytes({1, 2});
  EXPECT_THAT(reject(npy_bytes("{'fortran_order': False, 'shape': (2,), }", d)),
              HasSubstr("malformed header dict: missing 'descr'"));
  EXPECT_THAT(reject(npy_bytes("{'descr': '<f4', 'shape': (2,), }", d)),
              HasSubstr("malformed header dict: missing 'fortran_order'"));
  EXPECT_THAT(reject(npy_bytes("{'descr': '<f4', 'fortran_order': False}", d)),
              HasSubstr("malformed header dict: missing 'shape'"));
  EXPECT_THAT(reject(npy_bytes("hello world", d)), HasSubstr("malformed header dict"));
  EXPECT_THAT(reject(npy_bytes("", d)), HasSubstr("malformed header dict"));
  EXPECT_THAT(reject(npy_bytes("{'descr': '<f4, 'fortran_order': False, 'shape': (2,)}", d)),
              HasSubstr("malformed header dict"));
  EXPECT_THAT(reject(npy_bytes("{'descr': '<f4' 'fortran_order': False, 'shape': (2,)}", d)),
              HasSubstr("malformed header dict"));
  EXPECT_THAT(reject(npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2,)} junk", d)),
              HasSubstr("malformed header dict"));
  EXPECT_THAT(reject(npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2,", d)),
              HasSubstr("malformed header dict"));
  EXPECT_THAT(
      reject(npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 1}", d)),
      HasSubstr("malformed header dict: unexpected key 'x'"));
  EXPECT_THAT(reject(npy_bytes(
                  "{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (2,)}", d)),
              HasSubstr("duplicate key 'descr'"));
  EXPECT_THAT(reject(npy_bytes("{'descr': [('a', '<f4')], 'fortran_order': False, "
                               "'shape': (2,)}",
                               d)),
              HasSubstr("structured dtypes are not supported"));
  EXPECT_THAT(reject(npy_bytes("{'descr': '<f4', 'fortran_order': 0, 'shape': (2,)}", d)),
              HasSubstr("'fortran_order' must be True or False"));
  EXPECT_THAT(reject(npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': [2]}", d)),
              HasSubstr("'shape' must be a tuple of integers"));
  EXPECT_THAT(reject(npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2)}", d)),
              HasSubstr("'shape' must be a tuple of integers"));
  EXPECT_THAT(reject(npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': ('2',)}", d)),
              HasSubstr("'shape' must be a tuple of integers"));
  std::string deep(100, '(');
  EXPECT_THAT(reject(npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': " + deep, d)),
              HasSubstr("malformed header dict"));
}

TEST_F(NpyTest, RejectsBigEndian) {
  const std::string d = f32_bytes({1, 2});
  EXPECT_THAT(reject(npy_bytes("{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }", d)),
              HasSubstr("big-endian data is not supported; convert with arr.astype('<f4')"));
  EXPECT_THAT(reject(npy_bytes("{'descr': '>i4', 'fortran_order': False, 'shape': (2,), }", d)),
              HasSubstr("big-endian data is not supported; convert with arr.astype('<i4')"));
}

TEST_F(NpyTest, RejectsFortranOrder) {
  EXPECT_THAT(reject(npy_bytes("{'descr': '<f4', 'fortran_order': True, 'shape': (2,), }",
                               f32_bytes({1, 2}))),
              HasSubstr("Fortran-order arrays are not supported; use np.ascontiguousarray"));
}

TEST_F(NpyTest, RejectsUnsupportedDtypes) {
  const std::string d(16, '\0');
  for (const char *descr : {"<f8", "<i8", "<u4", "|u1", "|b1", ">f8", "<c8", "<V4", "<i2"}) {
    SCOPED_TRACE(descr);
    EXPECT_THAT(
        reject(npy_bytes(
            std::string("{'descr': '") + descr + "', 'fortran_order': False, 'shape': (2,), }", d)),
        HasSubstr(std::string("dtype '") + descr +
                  "' is not supported (only float32 '<f4', int32 '<i4', float16 '<f2' and bf16 "
                  "as '<V2' or '<u2' bits)"));
  }
  EXPECT_THAT(reject(npy_bytes("{'descr': '|f4', 'fortran_order': False, 'shape': (2,), }", d)),
              HasSubstr("dtype '|f4' is invalid: byte order '|' is only valid for 1-byte types"));
}

// f16 is numpy's '<f2'; bf16 has no numpy type: ml_dtypes arrays are saved as '<V2' (numpy may
// spell it '|V2') and raw bits as '<u2'. Both read as BF16 marked raw16, which a kernel's f16
// declaration retypes; writing BF16 gives '<V2' and F16 '<f2'.
TEST_F(NpyTest, TwoByteFloats) {
  const std::string d("\x80\x3f\x00\xc0", 4); // bf16 1.0, -2.0; f16 1.875, -2.0
  for (const char *descr : {"<V2", "|V2", "<u2"}) {
    SCOPED_TRACE(descr);
    NpyArray arr;
    Status s = read_file("h.npy",
                         npy_bytes(std::string("{'descr': '") + descr +
                                       "', 'fortran_order': False, 'shape': (2,), }",
                                   d),
                         &arr);
    ASSERT_TRUE(s.ok()) << s.message();
    EXPECT_EQ(arr.dtype, DType::BF16);
    EXPECT_TRUE(arr.raw16);
    EXPECT_EQ(arr.view().numel(), 2);
    retype_raw16(arr, DType::I32); // not a two-byte type: unchanged
    EXPECT_EQ(arr.dtype, DType::BF16);
    retype_raw16(arr, DType::F16);
    EXPECT_EQ(arr.dtype, DType::F16);
  }
  NpyArray arr;
  ASSERT_TRUE(read_file("f.npy",
                        npy_bytes("{'descr': '<f2', 'fortran_order': False, 'shape': (2,), }", d),
                        &arr)
                  .ok());
  EXPECT_EQ(arr.dtype, DType::F16);
  EXPECT_FALSE(arr.raw16);
  retype_raw16(arr, DType::BF16); // the file said f16: a mismatch stays one
  EXPECT_EQ(arr.dtype, DType::F16);
  EXPECT_THAT(reject(npy_bytes("{'descr': '>f2', 'fortran_order': False, 'shape': (2,), }", d)),
              HasSubstr("big-endian data is not supported; convert with arr.astype('<f2')"));

  for (DType t : {DType::BF16, DType::F16}) {
    const std::string p = path(std::string("w_") + dtype_name(t) + ".npy");
    ASSERT_TRUE(write_npy(p, t, {2}, d.data()).ok());
    EXPECT_NE(read_bytes(p).find(t == DType::BF16 ? "'descr': '<V2'" : "'descr': '<f2'"),
              std::string::npos);
    NpyArray back;
    ASSERT_TRUE(read_npy(p, &back).ok());
    retype_raw16(back, t);
    EXPECT_EQ(back.dtype, t);
    EXPECT_EQ(std::string(back.data.begin(), back.data.end()), d);
  }
}

TEST_F(NpyTest, RejectsDataSizeMismatch) {
  const std::string p = path("bad.npy");
  EXPECT_EQ(reject(npy_bytes(kGoodDict, f32_bytes({1}))),
            p + ": data is truncated: shape (2,) needs 8 bytes but the file has 4");
  EXPECT_EQ(reject(npy_bytes(kGoodDict, "")),
            p + ": data is truncated: shape (2,) needs 8 bytes but the file has 0");
  EXPECT_EQ(reject(npy_bytes(kGoodDict, f32_bytes({1, 2}) + "xyz")),
            p + ": file has 3 trailing bytes after the 8 data bytes of shape (2,)");
  EXPECT_THAT(reject(npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (), }", "")),
              HasSubstr("needs 4 bytes"));
}

TEST_F(NpyTest, RejectsBadShapes) {
  const std::string d = f32_bytes({1, 2});
  EXPECT_THAT(reject(npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2, -1), }", d)),
              HasSubstr("shape (2, -1) has a negative dimension"));
  EXPECT_THAT(reject(npy_bytes("{'descr': '<f4', 'fortran_order': False, "
                               "'shape': (99999999999999999999999,), }",
                               d)),
              HasSubstr("overflows"));
  EXPECT_THAT(reject(npy_bytes("{'descr': '<f4', 'fortran_order': False, "
                               "'shape': (4294967296, 4294967296), }",
                               d)),
              HasSubstr("shape (4294967296, 4294967296) is too large"));
  EXPECT_THAT(reject(npy_bytes("{'descr': '<f4', 'fortran_order': False, "
                               "'shape': (1, 1, 1, 1, 1, 1, 1, 1, 2), }",
                               d)),
              HasSubstr("rank 9 exceeds the maximum supported rank 8"));
}

// Regression (fuzz_npy, seed corpus): "-9223372036854775808" overflowed the magnitude while it
// was parsed, and negating the wrapped value was undefined behaviour (UBSan). INT64_MIN itself
// fits and is a negative dimension; one beyond either end of int64 overflows.
TEST_F(NpyTest, RejectsInt64ExtremesInShape) {
  const std::string d = f32_bytes({1, 2});
  const std::string p = path("bad.npy");
  EXPECT_EQ(reject(npy_bytes("{'descr': '<f4', 'fortran_order': False, "
                             "'shape': (-9223372036854775808,), }",
                             d)),
            p + ": shape (-9223372036854775808,) has a negative dimension");
  EXPECT_EQ(reject(npy_bytes("{'descr': '<f4', 'fortran_order': False, "
                             "'shape': (-9223372036854775809,), }",
                             d)),
            p + ": shape dimension overflows int64");
  EXPECT_EQ(reject(npy_bytes("{'descr': '<f4', 'fortran_order': False, "
                             "'shape': (9223372036854775808,), }",
                             d)),
            p + ": shape dimension overflows int64");
  EXPECT_THAT(reject(npy_bytes("{'descr': '<f4', 'fortran_order': False, "
                               "'shape': (9223372036854775807,), }",
                               d)),
              HasSubstr("is too large (overflows)"));
}

// A header length that disagrees with the header: too short cuts the dictionary, too long
// swallows data bytes as header text; either way the header no longer parses.
TEST_F(NpyTest, RejectsHeaderLengthLies) {
  const std::string good = npy_bytes(kGoodDict, f32_bytes({1, 2}));
  std::string shorter = good;
  shorter[8] = 20;
  shorter[9] = 0;
  EXPECT_THAT(reject(shorter), HasSubstr("malformed header dict"));
  std::string longer = good;
  const int len =
      (static_cast<unsigned char>(good[8]) | (static_cast<unsigned char>(good[9]) << 8)) + 4;
  longer[8] = static_cast<char>(len & 0xFF);
  longer[9] = static_cast<char>(len >> 8);
  EXPECT_THAT(reject(longer),
              HasSubstr("malformed header dict: unexpected text after the dictionary"));
  // A v2 file relabelled v1: its 4-byte length read as 2 bytes misplaces the whole header.
  std::string v2as1 = npy_bytes(kGoodDict, f32_bytes({1, 2}), 2);
  v2as1[6] = 1;
  EXPECT_THAT(reject(v2as1), HasSubstr("malformed header dict: expected '{'"));
}

} // namespace
} // namespace attnc
