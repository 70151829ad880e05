// Ctrl-C during training: the first SIGINT only raises a flag, which the training loop reads after
// each step; the loop then saves its checkpoint, says so and the program exits with
// kInterruptedExit. A second SIGINT ends the program at once (the handler is installed for one
// signal only: SA_RESETHAND puts the default action back). Not part of the library.
//
//   examples::catch_interrupt();
//   for (...) { step(); if (examples::interrupted()) { save(); return examples::kInterruptedExit; } }
#pragma once

#include <signal.h>  // sigaction

#include <csignal>

namespace ember::examples {

// The exit status of a run that Ctrl-C stopped after saving: 128 + SIGINT, what a shell reports
// for a program killed by Ctrl-C, so that a script (`train_gpt && next`) sees that the run did not
// finish, although its checkpoint is saved.
inline constexpr int kInterruptedExit = 128 + SIGINT;

namespace detail {
// Written by the signal handler: a volatile sig_atomic_t is what a handler may safely write
// (async-signal-safe); everything else (saving, printing) happens in the loop that reads it.
inline volatile std::sig_atomic_t interrupt_requested = 0;
inline void on_interrupt(int) { interrupt_requested = 1; }
}  // namespace detail

// Installs the handler of the first SIGINT (system calls it interrupts are restarted).
inline void catch_interrupt() {
  struct sigaction action {};
  action.sa_handler = detail::on_interrupt;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART | SA_RESETHAND;
  sigaction(SIGINT, &action, nullptr);
}

// Puts SIGINT's default action back: a Ctrl-C ends the program at once. For the work after the
// training loop, once its checkpoint is saved (a Ctrl-C there is not put off to a step's end).
inline void release_interrupt() {
  struct sigaction action {};
  action.sa_handler = SIG_DFL;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, nullptr);
}

// Whether a SIGINT has come since catch_interrupt().
inline bool interrupted() { return detail::interrupt_requested != 0; }

}  // namespace ember::examples
