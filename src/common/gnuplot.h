// The one way the tools run gnuplot: without a shell, with every path and
// title passed as data.
//
// The script goes to gnuplot's standard input, read as a script file
// (`gnuplot -c /dev/stdin ARG...`), and `args` arrive in it as the strings
// ARG1..ARG9. gnuplot never parses them, so a path with a quote, `$(...)`,
// backquotes or '@' is just a name: nothing is executed and nothing breaks.
// Write the script with ARGn wherever a path or a title goes, e.g.
//   RunGnuplot("set terminal pngcairo\nset output ARG1\nplot ARG2 using 1:2\n", {png, csv});
#pragma once

#include <string>
#include <vector>

#include "engram/status.h"

namespace engram {

// Runs gnuplot on `script` with `args` as ARG1..ARG9 and waits for it.
// Unsupported if gnuplot is not installed; IOError if it fails (its own
// message is on stderr) or if `output` (the file the script draws) is then
// missing or empty; InvalidArgument for more than 9 args.
Status RunGnuplot(const std::string& script, const std::vector<std::string>& args, const std::string& output);

}  // namespace engram
