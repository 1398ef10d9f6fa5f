// medprof: the command-line client. Wiring only; see client/commands.h.
#include <sys/ioctl.h>
#include <unistd.h>

#include <iostream>
#include <string>
#include <vector>

#include "client/commands.h"

int main(int argc, char** argv) {
  std::ios::sync_with_stdio(true);
  std::vector<std::string> args(argv, argv + argc);
  medprof::client::CliIo io;
  io.in = &std::cin;
  io.out = &std::cout;
  io.err = &std::cerr;
  io.err_is_tty = isatty(STDERR_FILENO) == 1;
  if (io.err_is_tty) {
    winsize ws{};
    const bool known = ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0;
    // One column less than the terminal, so a full line never wraps and breaks the redraw.
    io.width = (known && ws.ws_col > 20) ? ws.ws_col - 1 : 99;
    io.height = (known && ws.ws_row > 4) ? ws.ws_row : 24;
  }
  return medprof::client::RunCli(args, medprof::ProcessEnv(), io);
}
