#include "hetplan/model/model.h"

namespace hetplan::model {

int dtype_bytes(DType t) {
  switch (t) {
    case DType::fp32:
    case DType::tf32:
      return 4;
    case DType::fp16:
      return 2;
    case DType::bf16:
      return 2;
    case DType::fp8:
      return 1;
    case DType::int32:
      return 4;
    case DType::int64:
      return 8;
  }
  return 0;
}

}  // namespace hetplan::model
