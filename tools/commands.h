// commands.h — the subcommands of the `tensorscope` command-line tool.
//
// cli_main.cc picks one by its first argument and passes the rest (argv[0] is the
// subcommand's name). Each returns the process's exit code and reports on stdout and
// stderr; none throws.
#pragma once

namespace tensorscope::tools {

// status_command.cc: 0 a daemon answered, 1 none runs or it did not answer, 2 bad usage.
int run_status_command(int argc, char** argv);

// compare_command.cc: 0 all match, 1 something differs, 2 bad input.
int run_compare_command(int argc, char** argv);

// view_command.cc: serves the live view until interrupted; 0 then, 1 cannot serve, 2 bad usage.
int run_view_command(int argc, char** argv);

}  // namespace tensorscope::tools
