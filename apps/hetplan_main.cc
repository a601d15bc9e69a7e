#include "hetplan/cli/app.h"

int main(int argc, char** argv) { return hetplan::cli::run_main(argc, argv); }
