#include "hetplan/cli/app.h"

#include <cstdio>

namespace hetplan::cli {

int run_main(int, char**) {
  std::fputs("hetplan: not yet implemented\n", stderr);
  return 1;
}

}  // namespace hetplan::cli
