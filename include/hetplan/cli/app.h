// The hetplan command line: parses arguments, dispatches to a subcommand, prints results.
// Every user error is printed as one line on stderr with a non-zero exit code.
#pragma once

namespace hetplan::cli {

int run_main(int argc, char** argv);

}  // namespace hetplan::cli
