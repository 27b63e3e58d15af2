// Calls every bundled AOT kernel (all registered descriptors) with wrong inputs of every kind and checks the errors.
//
// Each kernel is linked into this binary by tests/CMakeLists.txt (attnc_register_kernels), so the
// runtime registry lists them. For every descriptor the test builds a call whose tensors agree
// with the descriptor (every size symbol gets a small value, literal dimensions their value,
// product output dimensions the product), checks that the runtime's validation accepts it, and
// then breaks it one way at a time: the number of inputs or outputs, a null data pointer, the
// dtype, the rank, each dimension that another tensor or a literal pins, a literal dimension,
// an output's extent, a zero output stride and an output overlapping an input. Every broken call
// must be refused before the kernel runs, with a message naming the kernel and the tensor (and
// the dimension where one is wrong), and must leave the output untouched.
#include "attnc/runtime.h"

#include <gtest/gtest.h>

#include <cctype>
#include <cstring>
#include <map>
#include <string>
#include <vector>

namespace {

// Descriptor dimensions are Dim's canonical spelling (attnc/tensor_type.h).
attnc::Dim dimOf(const char *text) {
  attnc::Dim d;
  EXPECT_TRUE(attnc::Dim::parse(text, &d)) << text;
  return d;
}
int64_t extentOf(const std::string &dim, const std::map<std::string, int64_t> &sizes) {
  int64_t v = 0;
  EXPECT_EQ(dimOf(dim.c_str()).evaluate(sizes, &v), attnc::Dim::EvalError::None) << dim;
  return v;
}

struct Call {
  std::vector<std::vector<char>> storage; // one buffer per tensor, inputs then outputs
  std::vector<attnc::TensorView> in, out;
};

// A call that agrees with `k`: sizes 2, 3, 4, ... by first appearance (distinct, so a dimension
// taken from the wrong symbol is caught).
Call consistentCall(const attnc::KernelDesc &k) {
  std::map<std::string, int64_t> sizes;
  auto bind = [&](const attnc::ParamDesc &p) {
    for (int d = 0; d < p.rank; ++d) {
      attnc::Dim dim = dimOf(p.dims[d]);
      if (dim.symbol() && !sizes.count(dim.symbol_name()))
        sizes[dim.symbol_name()] = 2 + (int64_t)sizes.size();
    }
  };
  for (int i = 0; i < k.num_inputs; ++i)
    bind(k.inputs[i]);
  Call c;
  auto make = [&](const attnc::ParamDesc &p) {
    std::vector<int64_t> shape;
    for (int d = 0; d < p.rank; ++d)
      shape.push_back(extentOf(p.dims[d], sizes));
    int64_t n = 1;
    for (int64_t e : shape)
      n *= e;
    c.storage.emplace_back(std::max<int64_t>(n, 1) * 4, 0);
    return attnc::TensorView::contiguous(c.storage.back().data(), p.dtype, shape);
  };
  c.storage.reserve(k.num_inputs + k.num_outputs);
  for (int i = 0; i < k.num_inputs; ++i)
    c.in.push_back(make(k.inputs[i]));
  for (int o = 0; o < k.num_outputs; ++o)
    c.out.push_back(make(k.outputs[o]));
  return c;
}

// Whether input `i`'s dimension `d` is pinned: a literal, or a symbol another input dimension
// also uses (then a different extent contradicts it).
bool pinned(const attnc::KernelDesc &k, int i, int d) {
  std::string s = k.inputs[i].dims[d];
  if (std::isdigit((unsigned char)s[0]))
    return true;
  for (int j = 0; j < k.num_inputs; ++j)
    for (int e = 0; e < k.inputs[j].rank; ++e)
      if ((j != i || e != d) && s == k.inputs[j].dims[e])
        return true;
  return false;
}

void expectRefused(const attnc::KernelDesc &k, const Call &c, const std::string &what,
                   const std::string &tensor, const std::string &mustMention = "",
                   bool snapshot = true) {
  attnc::Status st = attnc::validate_call(k, c.in, c.out);
  EXPECT_FALSE(st.ok()) << k.name << ": " << what << " was accepted";
  if (st.ok())
    return;
  EXPECT_NE(st.message().find(k.name), std::string::npos) << what << ": " << st.message();
  if (!tensor.empty())
    EXPECT_NE(st.message().find("'" + tensor + "'"), std::string::npos)
        << what << ": " << st.message();
  if (!mustMention.empty())
    EXPECT_NE(st.message().find(mustMention), std::string::npos) << what << ": " << st.message();
  // call() refuses it the same way, and writes nothing.
  std::vector<std::vector<char>> before;
  // (An output aliasing a smaller input cannot be snapshot over its own extent.)
  for (const auto &o : c.out)
    before.emplace_back((char *)o.data,
                        (char *)o.data +
                            (o.data && snapshot ? std::max<int64_t>(o.numel(), 0) * 4 : 0));
  attnc::Status st2 = attnc::call(k, c.in, c.out);
  EXPECT_FALSE(st2.ok()) << k.name << ": call() accepted " << what;
  for (size_t o = 0; o < c.out.size(); ++o)
    // memcmp's pointers must not be null even for 0 bytes: an empty snapshot has nothing to compare.
    if (c.out[o].data && !before[o].empty())
      EXPECT_EQ(std::memcmp(c.out[o].data, before[o].data(), before[o].size()), 0)
          << what << ": output written";
}

TEST(Validation, EveryKernelRefusesEveryKindOfWrongInput) {
  std::vector<const attnc::KernelDesc *> kernels = attnc::Registry::global().list();
  ASSERT_GE(kernels.size(), 20u) << "the bundled kernels are not linked into this test";
  int cases = 0;
  for (const attnc::KernelDesc *kp : kernels) {
    const attnc::KernelDesc &k = *kp;
    SCOPED_TRACE(k.name);
    const Call good = consistentCall(k);
    attnc::Status ok = attnc::validate_call(k, good.in, good.out);
    ASSERT_TRUE(ok.ok()) << "a consistent call was refused: " << ok.message();

    { // one input too few, one too many
      Call c = consistentCall(k);
      c.in.pop_back();
      expectRefused(k, c, "a missing input", "");
      c = consistentCall(k);
      c.in.push_back(c.in.back());
      expectRefused(k, c, "an extra input", "");
      c = consistentCall(k);
      c.out.clear();
      expectRefused(k, c, "no output", "");
      cases += 3;
    }
    for (int i = 0; i < k.num_inputs; ++i) {
      const std::string name = k.inputs[i].name;
      { // null data
        Call c = consistentCall(k);
        c.in[i].data = nullptr;
        expectRefused(k, c, "a null input", name);
      }
      { // the other dtype
        Call c = consistentCall(k);
        c.in[i].dtype = c.in[i].dtype == attnc::DType::F32 ? attnc::DType::I32 : attnc::DType::F32;
        expectRefused(k, c, "the wrong dtype", name);
      }
      { // one dimension more
        Call c = consistentCall(k);
        std::vector<int64_t> shape(c.in[i].shape, c.in[i].shape + c.in[i].rank);
        shape.push_back(1);
        c.in[i] = attnc::TensorView::contiguous(c.in[i].data, c.in[i].dtype, shape);
        expectRefused(k, c, "the wrong rank", name);
      }
      cases += 3;
      for (int d = 0; d < k.inputs[i].rank; ++d) {
        if (!pinned(k, i, d))
          continue;
        Call c = consistentCall(k);
        std::vector<int64_t> shape(c.in[i].shape, c.in[i].shape + c.in[i].rank);
        shape[d] += 1; // the storage is only read by validation, which refuses before any access
        std::vector<char> &buf = c.storage[i];
        int64_t n = 1;
        for (int64_t e : shape)
          n *= e;
        buf.resize(n * 4);
        c.in[i] = attnc::TensorView::contiguous(buf.data(), c.in[i].dtype, shape);
        expectRefused(k, c, "input dimension " + std::to_string(d) + " contradicting its size",
                      name, "dimension " + std::to_string(d));
        ++cases;
      }
    }
    for (int o = 0; o < k.num_outputs; ++o) {
      const std::string name = k.outputs[o].name;
      if (k.outputs[o].rank > 0) { // an output extent off by one
        Call c = consistentCall(k);
        std::vector<int64_t> shape(c.out[o].shape, c.out[o].shape + c.out[o].rank);
        shape[0] += 1;
        c.storage.emplace_back(
            (size_t)(c.out[o].numel() / std::max<int64_t>(c.out[o].shape[0], 1) * shape[0] + 1) * 4,
            0);
        c.out[o] = attnc::TensorView::contiguous(c.storage.back().data(), c.out[o].dtype, shape);
        expectRefused(k, c, "an output of the wrong shape", name, "dimension 0");
        ++cases;
      }
      { // null output
        Call c = consistentCall(k);
        c.out[o].data = nullptr;
        expectRefused(k, c, "a null output", name);
        ++cases;
      }
      if (k.outputs[o].rank > 0) { // a broadcast (stride 0) output: several elements in one place
        Call c = consistentCall(k);
        c.out[o].strides[0] = 0;
        expectRefused(k, c, "a zero-stride output", name);
        ++cases;
      }
      if (k.num_inputs > 0) { // an output on top of an input
        Call c = consistentCall(k);
        c.out[o].data = c.in[0].data;
        expectRefused(k, c, "an output overlapping an input", name, "", /*snapshot=*/false);
        ++cases;
      }
    }
  }
  std::printf("[ validate ] %zu kernels, %d wrong calls refused\n", kernels.size(), cases);
}

} // namespace
