// tasks/cli/moelab_main.h — the `moelab` command line as a function, so that other programs can
// run it after registering something of their own.
//
// examples/moelab.cpp is the program: its main returns moelab_main(argc, argv). A program that
// registers a routing scheme outside nn/ (nn/moe/router.h: register_router) before calling
// moelab_main gets the same command line, every experiment and setting included, with its scheme
// among the choices of `--set router=NAME` (examples/moelab_with_hash.cpp does it for the hash
// router of examples/custom_router.cpp):
//
//   int main(int argc, char** argv) {
//     moelab::register_router("hash", make_hash_router);
//     return moelab::moelab_main(argc, argv);      // moelab_with_hash phonebook --set router=hash ...
//   }
//
// Exit status: 0 done (or --help), 1 the run failed, 2 a bad option, value or combination, found
// before anything was written.
#pragma once

namespace moelab {

int moelab_main(int argc, char** argv);

}  // namespace moelab
