// MLIRGen: lowers an analysed attnc AST into the attn dialect.
#pragma once

#include "attnc/dsl/AST.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"

namespace attnc {

// Registers every dialect attnc's IR uses (attn, arith, math) in `ctx`.
void registerAttncDialects(mlir::MLIRContext &ctx);

// `m` must have passed Sema. Returns null (after emitting MLIR diagnostics) if verification fails.
mlir::OwningOpRef<mlir::ModuleOp> mlirGen(mlir::MLIRContext &ctx, const dsl::Module &m,
                                          llvm::StringRef filename);

} // namespace attnc
