// Internal: what call() reads of the Halide runtime hooks in halide_hooks.cpp.
#pragma once

#include <string>

namespace attnc::detail {
// Forgets the last message Halide reported (before a kernel runs).
void clear_halide_error();
// The last message Halide reported on this thread, else on any thread; empty when none.
std::string last_halide_error();
} // namespace attnc::detail
