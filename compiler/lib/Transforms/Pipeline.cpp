// attnc's pass pipeline: its one definition, run by attnc (runPassPipeline) and registered for attn-opt.
#include "attnc/Transforms/Passes.h"

#include "attnc/Dialect/AttnOps.h"

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassOptions.h"
#include "mlir/Pass/PassRegistry.h"

using namespace mlir;

namespace attnc {

void buildPassPipeline(OpPassManager &pm, const PipelineOptions &opts) {
  // First: the passes below then see windows written on the image in window coordinates.
  pm.addPass(createWindowPartitionPass());
  pm.addPass(createSampleOrderPass(SampleOrderPassOptions{sampleOrderName(opts.sampleOrder)}));
  // Before the sums are split, bounded or fused: it rewrites only plain sums over a score.
  pm.addPass(createContractionOrderPass());
  // Only for attn-online-softmax, which fuses the sums it splits off: unfused, the split sums
  // would read the values once per softmax instead of once. Before attn-mask-bounds, which bounds
  // each new sum by its own softmax's mask.
  if (opts.onlineSoftmax)
    pm.addPass(createSplitSumsPass());
  // After the sampling order: a rewrite there may move the sums that mask bounds annotate.
  pm.addPass(createMaskBoundsPass());
  // Last: it consumes the softmax bounds that attn-mask-bounds records.
  if (opts.onlineSoftmax)
    pm.addPass(createOnlineSoftmaxPass(OnlineSoftmaxPassOptions{opts.onlineTile}));
  // After the patterns the passes above match, which read inputs where the user wrote them.
  pm.addPass(createGatherReadsPass());
  // Last: the subscripts of input reads as HalideGen will see them, gathered or not.
  pm.addPass(createRemainderBoundsPass());
}

LogicalResult runPassPipeline(ModuleOp module, const PipelineOptions &opts) {
  if (!opts.estimates.empty()) {
    Builder b(module.getContext());
    for (auto k : module.getOps<attn::KernelOp>()) {
      SmallVector<NamedAttribute> fields;
      if (auto old = k->getAttrOfType<DictionaryAttr>(kEstimatesAttr))
        for (NamedAttribute a : old)
          if (!opts.estimates.count(a.getName().str()))
            fields.push_back(a);
      for (auto &[name, v] : opts.estimates)
        fields.push_back(b.getNamedAttr(name, b.getI64IntegerAttr(v)));
      k->setAttr(kEstimatesAttr, b.getDictionaryAttr(fields));
    }
  }
  PassManager pm(module.getContext());
  buildPassPipeline(pm, opts);
  return pm.run(module);
}

namespace {

// PipelineOptions as textual pipeline options, spelt as attnc's flags.
struct AttnPipelineOptions : PassPipelineOptions<AttnPipelineOptions> {
  Option<SampleOrder> sampleOrder{
      *this, "sample-order", llvm::cl::desc("Where projections read by sampling are applied"),
      llvm::cl::init(SampleOrder::Auto),
      llvm::cl::values(
          clEnumValN(SampleOrder::Auto, "auto", "by the kernel's attn.estimates"),
          clEnumValN(SampleOrder::SampleFirst, "sample-first", "sample, then project"),
          clEnumValN(SampleOrder::ProjectFirst, "project-first", "project, then sample"))};
  Option<bool> onlineSoftmax{*this, "online-softmax", llvm::cl::desc("Run attn-online-softmax"),
                             llvm::cl::init(true)};
  Option<int64_t> onlineTile{*this, "online-tile",
                             llvm::cl::desc("attn-online-softmax's keys per tile (0: it picks)"),
                             llvm::cl::init(0)};
};

} // namespace

void registerAttnPipeline() {
  PassPipelineRegistration<AttnPipelineOptions>(
      "attn-pipeline", "attnc's passes, in attnc's order",
      [](OpPassManager &pm, const AttnPipelineOptions &o) {
        PipelineOptions opts;
        opts.sampleOrder = o.sampleOrder;
        opts.onlineSoftmax = o.onlineSoftmax;
        opts.onlineTile = o.onlineTile;
        buildPassPipeline(pm, opts);
      });
}

} // namespace attnc
