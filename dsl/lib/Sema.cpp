// Semantic analysis of .attn kernels: every rule here has a diagnostic with a source location.
// analyze() runs the stages in order (functions, then each kernel: names, constants, function
// expansion, requirements, then each definition: checking, ranges, subscripts); each stage is a
// file in Sema/.
#include "Sema/SemaInternal.h"

#include "attnc/dsl/Names.h"

namespace attnc::dsl {

namespace sema {

namespace {

// Definitions per kernel: Halide's compile time grows faster than their number (a chain of 1000
// pointwise definitions compiles in about a minute, 10000 not in hours).
constexpr size_t kMaxDefinitions = 1000;

} // namespace

void KernelSema::run() {
  collectUsedNames();
  declareTensors();
  declareConsts();
  for (auto &def : k_.defs)
    definitionNames_.insert(def->name);
  prepareExpansions();
  for (auto &r : k_.requirements)
    checkRequirement(r);
  // Reads of constant lists in requirements stay in the lists too (which may add requirements).
  for (size_t i = 0, n = k_.requirements.size(); i < n; ++i) {
    const Expr &cond = *k_.requirements[i].cond;
    if (cond.type == ScalarType::Bool)
      checkSubscripts(cond, /*listsOnly=*/true);
  }
  if (k_.defs.size() > kMaxDefinitions)
    diags_.error(k_.defs[kMaxDefinitions]->loc,
                 "kernel '" + k_.name + "' has more than " + std::to_string(kMaxDefinitions) +
                     " definitions, the most a kernel may have (compiling it would take hours)");
  for (size_t i = 0; i < k_.defs.size(); ++i)
    analyzeDefinition(*k_.defs[i]);
  for (auto &o : k_.outputs)
    if (!o->def)
      diags_.error(o->loc, "output '" + o->name + "' is never defined");
}

void KernelSema::analyzeDefinition(Definition &def) {
  current_ = &def;
  uses_.clear();
  listUses_.clear();
  TensorDecl *target = nullptr;
  checkNewName(def.name, def.loc,
               "definition"); // registered even when rejected: no follow-on errors
  bool ok = true;
  if (sizeLocs_.count(def.name) || consts_.count(def.name)) {
    diags_.error(def.loc,
                 "'" + def.name + "' is a size or constant and cannot be defined as a tensor");
    ok = false;
  }
  if (ok) {
    auto it = tensors_.find(def.name);
    if (it != tensors_.end()) {
      TensorDecl *t = it->second;
      if (t->role == TensorRole::Input) {
        diags_.error(def.loc, "cannot define '" + def.name + "': it is a kernel input");
        diags_.note(t->loc, "input '" + def.name + "' is declared here");
        ok = false;
      } else if (t->def) {
        diags_.error(def.loc, "redefinition of '" + def.name + "'");
        diags_.note(t->def->loc, "'" + def.name + "' was first defined here");
        ok = false;
      } else {
        target = t;
      }
    }
  }

  // Left-hand indices.
  std::set<std::string> seen;
  for (auto &idx : def.indices) {
    if (!seen.insert(idx.name).second)
      diags_.error(idx.loc, "index '" + idx.name + "' appears twice on the left-hand side");
    checkIndexName(idx);
    if (idx.range)
      resolveRange(idx);
  }
  if (target && target->dims.size() != def.indices.size()) {
    diags_.error(def.loc, "output '" + def.name + "' has rank " +
                              std::to_string(target->dims.size()) + " but is defined with " +
                              std::to_string(def.indices.size()) + " indices");
    ok = false;
  }

  for (auto &idx : def.indices)
    scope_.push_back({idx.name, &idx, nullptr});
  if (def.rhs->kind == ExprKind::Softmax) {
    checkSoftmax(*def.rhs, def);
  } else {
    check(*def.rhs);
  }
  scope_.clear();

  settleLeftHandRanges(def, target);
  if (!ok) {
    current_ = nullptr;
    return;
  }

  // Even a definition with errors is registered (as f32 when its type is unknown), so later
  // definitions that read it do not report follow-on errors.
  ScalarType t = def.rhs->type;
  if (t == ScalarType::Bool) {
    diags_.error(def.rhs->loc, "definition of '" + def.name +
                                   "' is a boolean; use select(cond, 1.0, 0.0) for a mask value");
    t = ScalarType::Float;
  }
  if (!target) {
    auto local = std::make_unique<TensorDecl>();
    local->name = def.name;
    local->loc = def.loc;
    local->role = TensorRole::Local;
    local->elemType = t == ScalarType::Int ? ElemType::I32 : ElemType::F32;
    target = local.get();
    tensors_[def.name] = target;
    k_.locals.push_back(std::move(local));
    for (auto &idx : def.indices) {
      if (idx.range) {
        target->extents.push_back(idx.range->hi->clone());
      } else { // already reported; any extent keeps the rank right for later reads
        auto unknown = std::make_unique<Expr>(ExprKind::Ident, idx.loc);
        unknown->name = kUnknownExtent;
        unknown->type = ScalarType::Int;
        target->extents.push_back(std::move(unknown));
      }
    }
  } else if (target->elemType == ElemType::I32 && t == ScalarType::Float) {
    diags_.error(def.rhs->loc, "type mismatch: output '" + def.name +
                                   "' is i32 but its definition is a float expression");
  }
  target->def = &def;
  def.tensor = target;
  current_ = nullptr;
  // Every index range is settled now, so subscripts can be bounded.
  checkSubscripts(*def.rhs);
}

} // namespace sema

bool isBuiltinFunction(const std::string &name) { return sema::findBuiltin(name) != nullptr; }

bool analyze(Module &m, DiagEngine &diags, const SemaOptions &opts) {
  // `-D f32=bf16` (or f16): every f32 input and output is stored in that type, the way a model
  // runs after `.to(torch.bfloat16)`; definitions still compute in f32 (docs/language.md §3).
  // One file then serves every storage type.
  // The last -D for it wins, as for constants.
  DType storage = DType::F32;
  for (const auto &[name, value] : opts.defines) {
    if (name != "f32")
      continue;
    DType t;
    if (!parse_dtype(value, &t) || (t != DType::F32 && t != DType::BF16 && t != DType::F16)) {
      diags.error(Loc{}, "-D f32=" + value + ": f32 tensors can be stored as bf16 or f16 only");
      continue;
    }
    storage = t;
  }
  if (storage != DType::F32)
    for (auto &k : m.kernels)
      for (auto *list : {&k->inputs, &k->outputs})
        for (auto &tensor : *list)
          if (tensor->elemType == DType::F32)
            tensor->elemType = storage;
  sema::FunctionTable functions = sema::analyzeFunctions(m, diags);
  std::set<std::string> names;
  for (auto &k : m.kernels) {
    if (!names.insert(k->name).second)
      diags.error(k->loc, "redefinition of kernel '" + k->name + "'");
    if (std::string why = reservedSymbolReason(k->name); !why.empty())
      diags.error(k->nameLoc, "kernel name '" + k->name + "' is reserved: " + why +
                                  " (a compiled kernel is a C function of its name)");
    sema::KernelSema(*k, diags, opts, functions).run();
  }
  // A -D must name a constant of some kernel in the file: a typo must not pass silently.
  for (const auto &[name, value] : opts.defines) {
    if (name == "f32")
      continue; // the storage type, above
    bool found = false;
    for (auto &k : m.kernels)
      for (auto &c : k->consts)
        found |= c.name == name;
    if (!found)
      diags.error(Loc{}, "-D " + name + "=" + value + ": no kernel in this file has a constant '" +
                             name + "'");
  }
  return !diags.hasErrors();
}

} // namespace attnc::dsl
