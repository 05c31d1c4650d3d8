// examples/moelab.cpp — the `moelab` command line: one entry point for every experiment.
//
//   moelab --help                          the experiments
//   moelab <experiment> --help             its options, every setting with its default, its presets
//   moelab <experiment> [--preset NAME] [--set key=value]... [--out DIR] [--threads N]
//                       [--device cpu|cuda] [--seed S]
//
// The command line itself is a library function, moelab_main (tasks/cli/moelab_main.h), so that a
// program can register a router of its own and then run the very same command line
// (examples/moelab_with_hash.cpp).
#include "tasks/cli/moelab_main.h"

int main(int argc, char** argv) { return moelab::moelab_main(argc, argv); }
