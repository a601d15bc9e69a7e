// Internal to the runtime: a ResNet (torchvision's v1.5 layout) as a libtorch module, read off a
// model description of the zoo's resnet family, with batch normalisation over the stage's
// replicas so that a batch split between them trains as the whole batch does.
#pragma once

#include <memory>

#include "check/resnet_shape.h"
#include "hetplan/core/error.h"
#include "hetplan/model/model.h"
#include "torch_modules.h"

namespace hetplan::runtime::detail {

// The module for a CNN whose layers are "stem", blocks "layer<s>.<i>" and "head", with basic or
// bottleneck blocks as the description's convolutions say; refused with the reason otherwise.
Result<std::shared_ptr<TrainModule>> build_resnet_module(const model::Model& m);

}  // namespace hetplan::runtime::detail
