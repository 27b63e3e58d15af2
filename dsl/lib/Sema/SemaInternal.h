// What Sema's stages share: the builtins, the function table and one kernel's analysis state.
#pragma once

#include "attnc/dsl/Sema.h"

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace attnc::dsl::sema {

// --- builtins and reserved names (Scope.cpp) ---------------------------------------------------
struct Builtin {
  const char *name;
  int arity;
};
const Builtin *findBuiltin(const std::string &n);
bool isReservedKeyword(const std::string &n);
bool isReductionName(const std::string &n);

// Extent of a dimension whose range was already reported as unknown; never compared.
inline const char *const kUnknownExtent = "<unknown>";

constexpr int64_t kInt32Max = 2147483647, kInt32Min = -2147483647 - 1;

// How deep the checker goes into an expression (a check that starts this deep checks nothing):
// deeper expressions, which only expansions make, would run later recursive walks out of stack.
constexpr int kMaxCheckDepth = 4000;

// --- functions (Functions.cpp) -----------------------------------------------------------------
// Functions (`def`) of a module, with what each parameter is: found once, before any kernel.
struct FunctionInfo {
  enum class Param { Unused, Scalar, Tensor };
  FunctionDef *def = nullptr;
  std::vector<Param> params;
  std::vector<Loc> paramUse;     // first use of each parameter
  std::vector<size_t> paramUses; // number of uses of each parameter in the body
  int state = 0;                 // 0: not analysed, 1: in progress, 2: done
  bool ok = false;               // analysed without errors
};
using FunctionTable = std::map<std::string, FunctionInfo>;

// The module's functions by name, each checked once where it is defined.
FunctionTable analyzeFunctions(Module &m, DiagEngine &diags);

// --- constant folding (ConstFold.cpp) ----------------------------------------------------------
// A number as the language writes it, with an optional sign: digits, an optional fraction and an
// optional exponent (no hex, no blanks, no inf or nan).
bool isLanguageNumber(const std::string &s);
// Whether a -D value is written as a list (`1,2,3` or `[1,2,3]`).
bool isListValue(const std::string &v);
// The value of a checked condition over constants; nullopt for anything else.
std::optional<double> evalStatic(const Expr &e);

// --- function expansion (Expand.cpp) ----------------------------------------------------------
// An argument cheap enough to copy into every use (names, numbers, index arithmetic); one that
// reads a tensor is bound once with `let`. Copying keeps bare indices bare, so `w(o, c)` in a
// function still fixes the range of the caller's index `o`.
bool isCheapArgument(const Expr &e);

// The size of what checking makes of an argument or expansion before it is checked, as far as the
// expansion stage can tell (Expand.cpp).
size_t preparedNodes(const Expr &e);

// Diagnostics found before their turn, reported (with the `in call to` notes in force then) when
// the checker reaches them, and not at all where it stops before.
using Deferred = std::vector<Diagnostic>;

// A tensor argument: the tensor, the subscripts it is already read with, and its boundary mode.
struct View {
  std::string tensor;
  std::vector<const Expr *> prefix;
  Loc loc;
  std::string boundary;
};

// How a call's arguments replace its function's parameters in the body.
struct Expansion {
  std::map<std::string, View> views;                // tensor parameters
  std::map<std::string, const Expr *> copies;       // cheap scalar arguments
  std::map<std::string, std::string> renames;       // let-bound parameters and the body's binders
  std::vector<std::pair<std::string, size_t>> lets; // let-bound parameters: name, argument
};

// A call of a function as the expansion stage (ExpandCalls.cpp) leaves it for the checker
// (Expr::expansion): what each step of expanding it found, and the expansion. The checker checks
// the arguments between the steps, as it always did, so a step's diagnostics wait for it: an
// argument with an error stops the expansion, and what the later steps found is not reported.
struct PendingExpansion {
  const FunctionInfo *fn = nullptr;
  Deferred arity;                // wrong number of arguments: stops the expansion
  Deferred depth;                // calls nested too deeply: stops it
  Deferred fits;                 // the stage's own size limit, before binding: stops it (*)
  std::vector<Deferred> binding; // per argument: a tensor parameter given something else
  Deferred substitution;         // a view read with two boundary modes; the expansion goes on
  Deferred tooLarge;             // the stage's own size limit, after substituting: stops it (*)
  // (*) reported only where the checker's own limit, on the checked arguments, lets the call by
  // The names the expansion binds, provisional until the checker names them (freshName) where
  // expansion inside the checker did: per argument bound with `let` (else empty), then the
  // body's binders (provisional, as spelled).
  std::vector<std::string> argumentNames;
  std::vector<std::pair<std::string, std::string>> binderNames;
  // The body with the arguments bound, its binders renamed and the calls in it prepared in turn;
  // null where a step stopped the expansion. Arguments copied into it are copies (Expr::copyOf)
  // of the unchecked arguments until the checker puts in copies of the checked ones.
  ExprPtr body;
  // Once the call is replaced: its checked arguments (placeExpansion says why they are kept).
  std::vector<ExprPtr> args;
  size_t nodes = 0;      // of the expansion once checked (preparedNodes), when `prepared`
  bool prepared = false; // the calls in `body` are prepared
};

// --- one kernel --------------------------------------------------------------------------------
// A name visible in an expression: an index, or a value bound by `let`.
struct ScopeEntry {
  std::string name;
  IndexDecl *index = nullptr;
  Expr *let = nullptr;
  const Expr *reduce = nullptr; // the sum (max, ...) whose index it is
};

// Candidate extents of an index from its uses as a bare tensor subscript.
struct RangeUse {
  std::string extent; // printed extent expression
  const Expr *extentExpr;
  std::string origin; // "k dimension 2 (Nk)"
  Loc loc;
};

// The analysis of one kernel. Like clang's Sema, one class whose members are defined in one file
// per stage, because the stages share the kernel's names: the expansion stage prepares every call
// before any expression is checked, and checking an expression puts the prepared expansions in
// place (once their arguments are checked: an argument with an error is not copied into the body)
// and infers the ranges of the indices it binds. Each member is listed under the file that
// defines it.
class KernelSema {
public:
  KernelSema(Kernel &k, DiagEngine &d, const SemaOptions &o, FunctionTable &fns)
      : k_(k), diags_(d), opts_(o), functions_(fns) {}

  // Sema.cpp: the kernel's stages in order.
  void run();

private:
  friend class SubscriptCheck;

  Kernel &k_;
  DiagEngine &diags_;
  const SemaOptions &opts_;

  // Sema.cpp: one definition, from its names to its subscripts.
  void analyzeDefinition(Definition &def);

  // Scope.cpp: what each name of the kernel is.
  std::map<std::string, TensorDecl *> tensors_;
  std::map<std::string, Loc> sizeLocs_;
  std::map<std::string, ConstDecl *> consts_;
  FunctionTable &functions_;
  std::set<std::string> definitionNames_;
  std::vector<ScopeEntry> scope_;
  std::map<std::string, std::string> spelled_; // fresh name of an expanded binder -> its spelling
  const std::string &shown(const std::string &n) const;
  bool checkNewName(const std::string &name, Loc loc, const char *what);
  void declareTensors();
  ExprPtr dimExpr(const DimSpec &d);
  static ExprPtr factorExpr(const std::string &symbol, long long value, Loc loc);
  void checkIndexName(const IndexDecl &idx);
  const ScopeEntry *lookup(const std::string &name);
  bool isStatic(const Expr &e, const std::string &subject, const std::string &why,
                std::vector<std::string> &inner, bool report = true);

  // ConstFold.cpp: kernel constants (with -D overrides) and 32-bit integer values.
  void declareConsts();
  void declareList(ConstDecl &c);
  std::string constNote(const Expr &a, const Expr *b = nullptr);
  void foldInt(Expr &e);

  // Requirements.cpp: `require` conditions.
  bool readsOnlyInputs(const Expr &e, bool report);
  bool requirementIsChecked(const Kernel::Requirement &r, bool report);
  void checkRequirement(Kernel::Requirement &r);

  // Ranges.cpp: the ranges of indices, explicit or inferred from their uses.
  std::map<const IndexDecl *, std::vector<RangeUse>> uses_;
  // Uses as the subscript of a constant list: a range only where no tensor gives one.
  std::map<const IndexDecl *, std::vector<RangeUse>> listUses_;
  std::vector<ExprPtr> listExtents_;     // the lengths listUses_ point to
  std::set<const IndexDecl *> badRange_; // indices whose explicit range was rejected
  bool rangeIsStatic(const IndexDecl &idx, bool report);
  void resolveRange(IndexDecl &idx);
  void settleRange(IndexDecl &idx);
  void settleLeftHandRanges(Definition &def, TensorDecl *target);

  // Subscripts.cpp: what subscripts reach, and requirements where that can overflow 32 bits.
  std::set<std::string> overflowChecks_; // conditions of the generated 32-bit requirements
  void checkSubscripts(const Expr &rhs, bool listsOnly = false);

  // Check.cpp: the types of expressions and what their names refer to.
  const Definition *current_ = nullptr;
  int checkDepth_ = 0;
  bool tooDeepReported_ = false;
  bool inSoftmax_ = false; // checking a softmax score or mask: `.exclude` reads are allowed
  bool reportDeferred(const Deferred &d);
  void checkSoftmax(Expr &e, Definition &def);
  void checkSinkAxes(const Expr &x, const Expr &softmax, const Definition &def);
  bool requireNumeric(const Expr &e, const std::string &what);
  void check(Expr &e);
  void checkNode(Expr &e);
  void checkIdent(Expr &e);
  void checkRead(Expr &e);
  void checkListRead(Expr &e, const ConstDecl &c);
  void checkLen(Expr &e);
  void checkCall(Expr &e);
  void checkBinary(Expr &e);
  // The bf16/f16 tensor whose values an arithmetic expression carries (a read of it, through
  // unary minus, products, quotients, sums with f32 values; an explicit conversion ends it), or
  // null; set for each Binary as it is checked.
  const TensorDecl *storageRead(const Expr &e) const;
  std::map<const Expr *, const TensorDecl *> storageOf_;
  void checkFunctionCall(Expr &e, PendingExpansion &x);

  // Expand.cpp: a call of a function replaced by its body, in steps that know no types: the
  // expansion stage takes them before checking, and the checker puts the expansion in place.
  std::set<std::string> usedNames_;       // for fresh names of expanded functions' binders
  std::map<std::string, int> nextSuffix_; // freshName: the first suffix not yet tried per base
  std::vector<const FunctionInfo *> expanding_; // calls being prepared, outermost first
  size_t preparedNodes_ = 0;                    // the expansion stage's count
  size_t expandedNodes_ = 0;                    // the checker's count, of the checked arguments
  size_t provisionalNames_ = 0;
  std::map<std::string, std::string> finalNames_; // provisional name -> fresh name
  void collectUsedNames();
  std::string freshName(const std::string &base);
  std::string provisionalName();
  void nameBinder(const std::string &provisional, const std::string &base);
  bool expansionArityOk(const Expr &call, const FunctionInfo &fi, Deferred &out);
  bool expansionDepthOk(const Expr &call, Deferred &out);
  bool expansionFits(const Expr &call, const FunctionInfo &fi, bool prepared, Deferred &out);
  bool bindArgument(const Expr &call, const FunctionInfo &fi, size_t i, Expansion &x,
                    PendingExpansion &p);
  bool expand(const Expr &call, const FunctionInfo &fi, Expansion &x, PendingExpansion &p);
  void finishExpansion(Expr &e);
  bool placeExpansion(Expr &call, PendingExpansion &p);
  void enterExpansion(Loc callLoc, const FunctionInfo &fi);
  void leaveExpansion();

  // ExpandCalls.cpp: the expansion stage, which prepares every call the checker will reach, in
  // the order and the scope it reaches them.
  std::vector<std::unique_ptr<PendingExpansion>> expansions_;
  std::set<std::string> localNames_; // definitions prepared so far that are local tensors
  void prepareExpansions();
  void prepare(Expr &e, int level);
  void prepareRange(IndexDecl &idx, int level);
  const FunctionInfo *calledFunction(const Expr &read) const;
  void prepareCall(Expr &call, const FunctionInfo &fi, int level);
};

} // namespace attnc::dsl::sema
