// Internal to the runtime, free of libtorch: a ResNet (torchvision's v1.5 layout) read off a
// model description of the zoo's resnet family, as the runtime's ResNet module is built.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "hetplan/core/error.h"
#include "hetplan/model/model.h"

namespace hetplan::runtime::detail {

// One block as the description lays it out.
struct BlockShape {
  std::int64_t in = 0, width = 0, out = 0, stride = 1;
  bool bottleneck = false, project = false;
};

// The description's blocks and the stem's width, for a CNN whose layers are "stem", blocks
// "layer<s>.<i>" and "head", with basic or bottleneck blocks as its convolutions say; refused with
// the reason otherwise.
Result<std::pair<std::int64_t, std::vector<BlockShape>>> resnet_shape(const model::Model& m);

// Whether the runtime reads m as a ResNet (resnet_shape), or why not.
Result<bool> check_resnet(const model::Model& m);

}  // namespace hetplan::runtime::detail
