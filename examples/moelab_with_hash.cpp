// examples/moelab_with_hash.cpp — the `moelab` command line with a router registered outside nn/:
// the hash router of examples/hash_router.h (the one examples/custom_router.cpp trains), so the
// experiments run it like a built-in scheme.
//
//   build/moelab_with_hash phonebook --help                      # `router` lists hash among its choices
//   build/moelab_with_hash phonebook --preset demo --set router=hash --set k=1
//   build/moelab_with_hash teacher-student --preset toy --set router=hash --set student_k=1
//       --set router_options=seed:7                             # (one command line)
//
// This is the whole recipe for a scheme of your own: register it by name, then hand argc and argv
// to moelab_main (tasks/cli/moelab_main.h), the function the `moelab` program itself runs. Every
// setting, preset, check, run folder and report is the same; config.json records router = "hash",
// and in phonebook and shortest-path the model names (so the point names) end in "-hash". The hash
// router takes k = 1 only: the experiments' check builds it once per model before any work, so
// `--set router=hash` with the default k = 2 exits with status 2 and the router's own message.
#include "examples/hash_router.h"
#include "nn/moe/router.h"
#include "tasks/cli/moelab_main.h"

int main(int argc, char** argv) {
  moelab::register_router("hash", moelab::examples::make_hash_router);  // before any settings are declared
  return moelab::moelab_main(argc, argv);
}
