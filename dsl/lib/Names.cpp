// Reserved C symbol names for compiled kernels (see Names.h).
#include "attnc/dsl/Names.h"

#include <dlfcn.h>
#include <gnu/lib-names.h>

#include <cctype>
#include <set>

namespace attnc::dsl {

namespace {

// C17 and C++20 keywords and alternative tokens; a kernel of such a name makes the generated
// descriptor header (`inline const attnc::KernelDesc& NAME()`) fail to compile.
const std::set<std::string> &keywords() {
  static const std::set<std::string> k = {"alignas",
                                          "alignof",
                                          "and",
                                          "and_eq",
                                          "asm",
                                          "auto",
                                          "bitand",
                                          "bitor",
                                          "bool",
                                          "break",
                                          "case",
                                          "catch",
                                          "char",
                                          "char8_t",
                                          "char16_t",
                                          "char32_t",
                                          "class",
                                          "compl",
                                          "concept",
                                          "const",
                                          "consteval",
                                          "constexpr",
                                          "constinit",
                                          "const_cast",
                                          "continue",
                                          "co_await",
                                          "co_return",
                                          "co_yield",
                                          "decltype",
                                          "default",
                                          "delete",
                                          "do",
                                          "double",
                                          "dynamic_cast",
                                          "else",
                                          "enum",
                                          "explicit",
                                          "export",
                                          "extern",
                                          "false",
                                          "float",
                                          "for",
                                          "friend",
                                          "goto",
                                          "if",
                                          "inline",
                                          "int",
                                          "long",
                                          "mutable",
                                          "namespace",
                                          "new",
                                          "noexcept",
                                          "not",
                                          "not_eq",
                                          "nullptr",
                                          "operator",
                                          "or",
                                          "or_eq",
                                          "private",
                                          "protected",
                                          "public",
                                          "register",
                                          "reinterpret_cast",
                                          "requires",
                                          "restrict",
                                          "return",
                                          "short",
                                          "signed",
                                          "sizeof",
                                          "static",
                                          "static_assert",
                                          "static_cast",
                                          "struct",
                                          "switch",
                                          "template",
                                          "this",
                                          "thread_local",
                                          "throw",
                                          "true",
                                          "try",
                                          "typedef",
                                          "typeid",
                                          "typename",
                                          "typeof",
                                          "typeof_unqual",
                                          "union",
                                          "unsigned",
                                          "using",
                                          "virtual",
                                          "void",
                                          "volatile",
                                          "wchar_t",
                                          "while",
                                          "xor",
                                          "xor_eq"};
  return k;
}

// Macros of the C library that the headers around a kernel may define; they are no symbols, so
// the lookup in the C library below does not see them.
const std::set<std::string> &libcMacros() {
  static const std::set<std::string> m = {"assert",  "errno",  "offsetof", "setjmp", "va_arg",
                                          "va_copy", "va_end", "va_start", "NULL",   "EOF",
                                          "stdin",   "stdout", "stderr"};
  return m;
}

// What a Halide runtime defines besides halide_* (`nm` of `attnc --emit=runtime` for a CPU and a
// CUDA target, Halide 21); everything it needs from outside is in the C library.
const std::set<std::string> &halideRuntimeSymbols() {
  static const std::set<std::string> s = {
      "copy_to_device_already_locked", "cuda_allocation_pool", "cuda_device_crop_from_offset",
      "cuda_do_multidimensional_copy", "register_cuda_allocation_pool"};
  return s;
}

// Whether the C library (libc and libm, where the math functions live) defines `name`: the C
// library of this machine, which is the one a kernel links against here.
bool inCLibrary(const std::string &name) {
  static void *const libs[] = {dlopen(LIBC_SO, RTLD_LAZY | RTLD_LOCAL),
                               dlopen(LIBM_SO, RTLD_LAZY | RTLD_LOCAL)};
  for (void *lib : libs)
    if (lib && dlsym(lib, name.c_str()))
      return true;
  return false;
}

} // namespace

std::string reservedSymbolReason(const std::string &name) {
  if (keywords().count(name))
    return "it is a C or C++ keyword";
  if (name.find("__") != std::string::npos ||
      (name.size() > 1 && name[0] == '_' && std::isupper((unsigned char)name[1])))
    return "C and C++ reserve names that contain '__' or start with '_' and a capital letter";
  if (name == "main")
    return "it is the entry point of a C or C++ program";
  if (name.rfind("halide_", 0) == 0)
    return "names that start with 'halide_' belong to the Halide runtime";
  if (halideRuntimeSymbols().count(name))
    return "it is a symbol of the Halide runtime";
  if (name.size() > 2 && name[0] == 'c' && name[1] == 'u' && std::isupper((unsigned char)name[2]))
    return "names that start with 'cu' and a capital letter belong to the CUDA driver API, which "
           "the Halide runtime looks up";
  if (libcMacros().count(name))
    return "it is a macro of the C library";
  if (inCLibrary(name))
    return "it is a symbol of the C library";
  return "";
}

} // namespace attnc::dsl
