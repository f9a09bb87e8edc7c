// cli_main.cc — `tensorscope`, the command-line tool: `tensorscope status ...`,
// `tensorscope compare ...` and `tensorscope view ...` (commands.h).
#include <cstdio>
#include <string>

#include "commands.h"

namespace {

void usage(FILE* out) {
  std::fprintf(out,
               "usage: tensorscope status [--session NAME] [--runtime-dir DIR] [--json]\n"
               "Shows what the session's daemon is doing. Exit 1 when no daemon runs.\n"
               "usage: tensorscope compare A B [--atol X] [--rtol Y] [--json] [--hdf5-timeout S]\n"
               "Compares .npy files, dump directories, HDF5 recordings and PyTorch files\n"
               "(.pt/.pth, read without libtorch), with numpy's allclose rule.\n"
               "Exit 0 all match, 1 something differs, 2 bad input. More: tensorscope compare --help\n"
               "usage: tensorscope view [--session NAME] [--dir SESSION_DIR]... [--port N]\n"
               "Serves a page showing every stream live, in a browser. More: tensorscope view --help\n");
}

}  // namespace

int main(int argc, char** argv) {
  const std::string command = argc >= 2 ? argv[1] : "";
  if (command == "status") return tensorscope::tools::run_status_command(argc - 1, argv + 1);
  if (command == "compare") return tensorscope::tools::run_compare_command(argc - 1, argv + 1);
  if (command == "view") return tensorscope::tools::run_view_command(argc - 1, argv + 1);
  const bool help = command == "--help" || command == "-h";
  if (!help && !command.empty()) std::fprintf(stderr, "tensorscope: unknown command '%s'\n", command.c_str());
  usage(help ? stdout : stderr);
  return help ? 0 : 2;
}
