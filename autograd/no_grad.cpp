// autograd/no_grad.cpp — the thread-local recording flag behind NoGradGuard.
#include "autograd/no_grad.h"

namespace moelab {
namespace {
thread_local bool recording = true;
}  // namespace

bool grad_enabled() { return recording; }

NoGradGuard::NoGradGuard() : previous_(recording) { recording = false; }
NoGradGuard::~NoGradGuard() { recording = previous_; }

}  // namespace moelab
