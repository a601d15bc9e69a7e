#include "hetplan/core/error.h"

namespace hetplan {

Error make_error(const std::string& source, const std::string& field, const std::string& expected) {
  std::string msg;
  for (const std::string* part : {&source, &field, &expected}) {
    if (part->empty()) continue;
    if (!msg.empty()) msg += ": ";
    msg += *part;
  }
  return Error{msg};
}

}  // namespace hetplan
