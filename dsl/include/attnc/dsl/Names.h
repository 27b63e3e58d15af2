// Names a compiled kernel cannot take: they would collide with C/C++, the C library or the Halide runtime.
#pragma once

#include <string>

namespace attnc::dsl {

// Why `name` cannot be the C symbol of a compiled kernel (a kernel's name, or attnc's
// --function-name), as a clause such as "it is a function of the C library"; empty when it can.
// A compiled kernel is an extern "C" function of that name, linked with the Halide runtime and the
// C library into the user's program, and named again in the generated C++ descriptor header, so
// C/C++ keywords, names C and C++ reserve, the C library's symbols and macros, `main`, and the
// symbols a Halide runtime defines or looks up (halide_*, the CUDA driver's cu*) are refused.
std::string reservedSymbolReason(const std::string &name);

} // namespace attnc::dsl
