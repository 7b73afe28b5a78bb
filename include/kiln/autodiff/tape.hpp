// kiln/autodiff/tape.hpp: the statement-level tape. Each statement that materialises an
// expression of vars records one entry; backward() runs the entries in reverse, each as one fused
// loop. Every thread has its own tape, and kiln::value_and_grad and friends use a fresh one per
// call, so two threads differentiating at once never share one.
// IWYU pragma: private, include <kiln/kiln.hpp>
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

namespace kiln {
namespace detail {

// One recorded statement: it knows its output and its inputs, and how to send the output's
// adjoint to the inputs' adjoints.
class tape_entry {
 public:
  virtual ~tape_entry() = default;
  // Adds this statement's contribution to its inputs' adjoints; nothing if its output has none.
  virtual void backward() = 0;
  // Whether the statement's output is gone: no later statement read it and the user dropped it,
  // so no gradient can reach this entry.
  virtual bool expired() const noexcept = 0;
};

class tape {
 public:
  tape() = default;
  tape(tape const&) = delete;
  tape& operator=(tape const&) = delete;

  // Identifies the tape and its current contents: it changes when the tape is cleared, so a var
  // recorded before a backward() cannot be differentiated through the new contents.
  std::uint64_t id() const noexcept { return id_; }

  void record(std::unique_ptr<tape_entry> entry) {
    entries_.push_back(std::move(entry));
    // Forward passes that are never differentiated would otherwise grow the tape forever; dropping
    // expired entries whenever it has doubled keeps the cost amortised O(1) per statement.
    if (entries_.size() >= 2 * kept_after_sweep_ + 64) sweep();
  }

  // Runs every entry's backward, newest first, then clears the tape.
  void backward_and_clear() {
    for (auto it = entries_.rbegin(); it != entries_.rend(); ++it) (*it)->backward();
    clear();
  }

  void clear() noexcept {
    entries_.clear();
    kept_after_sweep_ = 0;
    id_ = next_id();
  }

  std::size_t size() const noexcept { return entries_.size(); }

  // The tape statements on this thread record onto.
  static tape& active() noexcept { return *active_slot(); }

 private:
  friend class tape_scope;

  // Newest first, so that an entry dropped releases its inputs before their own entries are seen.
  void sweep() {
    for (std::size_t k = entries_.size(); k-- > 0;)
      if (entries_[k]->expired()) entries_[k].reset();
    std::erase(entries_, nullptr);
    kept_after_sweep_ = entries_.size();
  }

  static std::uint64_t next_id() noexcept {
    static std::atomic<std::uint64_t> counter{1};
    return counter.fetch_add(1, std::memory_order_relaxed);
  }
  static tape*& active_slot() noexcept {
    thread_local tape thread_tape;
    thread_local tape* active = &thread_tape;
    return active;
  }

  std::vector<std::unique_ptr<tape_entry>> entries_;
  std::size_t kept_after_sweep_ = 0;
  std::uint64_t id_ = next_id();
};

// Makes a fresh tape the active one on this thread for its lifetime (the functional API runs f
// under one), then restores the previous tape.
class tape_scope {
 public:
  tape_scope() noexcept : previous_(std::exchange(tape::active_slot(), &tape_)) {}
  ~tape_scope() { tape::active_slot() = previous_; }
  tape_scope(tape_scope const&) = delete;
  tape_scope& operator=(tape_scope const&) = delete;

  detail::tape& get() noexcept { return tape_; }

 private:
  detail::tape tape_;
  detail::tape* previous_;
};

inline bool& grad_mode_disabled() noexcept {
  thread_local bool disabled = false;
  return disabled;
}

}  // namespace detail

// While one lives, statements on this thread record nothing and their results do not require
// gradients (torch.no_grad()): for evaluation passes and optimiser updates.
class no_grad_guard {
 public:
  no_grad_guard() noexcept : previous_(std::exchange(detail::grad_mode_disabled(), true)) {}
  ~no_grad_guard() { detail::grad_mode_disabled() = previous_; }
  no_grad_guard(no_grad_guard const&) = delete;
  no_grad_guard& operator=(no_grad_guard const&) = delete;

 private:
  bool previous_;
};

}  // namespace kiln
