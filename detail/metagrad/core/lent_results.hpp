// Note [Gradients written into the results]: on the static engine's general path a gradient was
// computed into a working array and then copied into the result the caller receives; for the
// first layer of an MLP (a 784x128 float weight) that copy is 400 KB per step. When a wanted
// argument has one use and that use is an operand of an op that declares
// `writes_operand_gradients` (matmul), the op's product is written straight into the result:
//
// - general_sweep (xt/general.hpp) installs a lent_results for its sweep object, holding for each
//   wanted argument the storage of the result that receives its gradient;
// - the sweep (static/sweep.hpp), while such an op's backward runs, names the operands that are
//   those arguments (operand_lending);
// - the op's backward opens a result_for_operand around the product that is that operand's
//   gradient; the pooled allocator (xt/pool.hpp) hands the next allocation of exactly the
//   result's size the result's storage, once per result, and freeing it does nothing;
// - the copy into the result finds the gradient already there and is skipped.
//
// If anything else takes the storage first (a temporary of the same size), the product goes to a
// block of its own and is copied as before: the result is written last, after every array of the
// sweep was last read, so nothing read can live there. A registration belongs to one sweep object:
// sweeps nested in an op (mg::repeat's steps, a gradient inside a custom op) see none of it.
#pragma once

#include <array>
#include <cstddef>

namespace mg::detail {

// One sweep's results, by argument index.
struct lent_results {
  static constexpr std::size_t max_args = 16;
  static constexpr std::size_t none = std::size_t(-1);
  const void* owner = nullptr;         // the sweep whose arguments these are
  lent_results* previous = nullptr;    // the enclosing sweep's, while this one runs
  std::array<void*, max_args> data{};  // the result's storage, or null
  std::array<std::size_t, max_args> bytes{};
  std::array<bool, max_args> lent{};
  std::array<std::size_t, 2> operand{none, none};  // the op now running: operand j's argument

  bool holds(const void* p) const noexcept {
    for (std::size_t i = 0; i < max_args; ++i)
      if (lent[i] && data[i] == p) return true;
    return false;
  }
};

// The thread's state; the allocator reads only its first two members on every call.
struct lending_state {
  void* pending = nullptr;  // what the next allocation of pending_bytes receives
  std::size_t nlent = 0;    // results lent, in all the tables below
  std::size_t pending_bytes = 0;
  lent_results* table = nullptr;  // the innermost sweep's
};
inline lending_state& thread_lending() noexcept {
  thread_local lending_state s;
  return s;
}

// general_sweep's: installs `table` for its sweep, the enclosing one's back at the end.
class lending_scope {
 public:
  explicit lending_scope(lent_results& table) noexcept : table_(table) {
    lending_state& s = thread_lending();
    table.previous = s.table;
    s.table = &table;
  }
  ~lending_scope() {
    lending_state& s = thread_lending();
    for (bool l : table_.lent) s.nlent -= l ? 1 : 0;
    s.table = table_.previous;
  }
  lending_scope(const lending_scope&) = delete;
  lending_scope& operator=(const lending_scope&) = delete;

 private:
  lent_results& table_;
};

// The sweep's, around the backward of an op that writes its operands' gradients: ids[j] is the
// argument that operand j is (lent_results::none where it is not one, or has other uses).
class operand_lending {
 public:
  operand_lending(const void* sweep, const std::array<std::size_t, 2>& ids) noexcept {
    lent_results* t = thread_lending().table;
    if (t != nullptr && t->owner == sweep) {
      table_ = t;
      t->operand = ids;
    }
  }
  ~operand_lending() {
    if (table_ != nullptr) table_->operand = {lent_results::none, lent_results::none};
  }
  operand_lending(const operand_lending&) = delete;
  operand_lending& operator=(const operand_lending&) = delete;

 private:
  lent_results* table_ = nullptr;
};

// The op's, around the product that is operand j's gradient: the next allocation of the result's
// size is the result (when operand j is a registered argument whose result is not yet lent).
class result_for_operand {
 public:
  explicit result_for_operand(std::size_t j) noexcept {
    lending_state& s = thread_lending();
    const lent_results* t = s.table;
    if (t == nullptr || j >= 2) return;
    const std::size_t i = t->operand[j];
    if (i >= lent_results::max_args || t->data[i] == nullptr || t->lent[i]) return;
    armed_ = true;
    s.pending = t->data[i];
    s.pending_bytes = t->bytes[i];
  }
  ~result_for_operand() {
    if (armed_) thread_lending().pending = nullptr;
  }
  result_for_operand(const result_for_operand&) = delete;
  result_for_operand& operator=(const result_for_operand&) = delete;

 private:
  bool armed_ = false;
};

// How many results this thread's sweeps were lent (the tests read it).
inline std::size_t& lent_results_count() noexcept {
  thread_local std::size_t n = 0;
  return n;
}

// The allocator's, out of line: nothing is awaited or lent on almost every call, and the test
// of one per-thread word is all an allocation or a free pays for it.
[[gnu::noinline, gnu::cold]] inline void* take_lent_now(lending_state& s) noexcept {
  void* p = s.pending;
  s.pending = nullptr;
  lent_results* t = s.table;
  for (std::size_t i = 0; i < lent_results::max_args; ++i)
    if (t->data[i] == p && !t->lent[i]) {
      t->lent[i] = true;
      ++s.nlent;
    }
  ++lent_results_count();
  return p;
}
[[gnu::noinline, gnu::cold]] inline bool held_by_a_table(const lending_state& s,
                                                         const void* p) noexcept {
  for (const lent_results* t = s.table; t != nullptr; t = t->previous)
    if (t->holds(p)) return true;
  return false;
}
// The result's storage when an allocation of `bytes` is awaited, else null.
inline void* take_lent(std::size_t bytes) noexcept {
  lending_state& s = thread_lending();
  if (s.pending == nullptr || s.pending_bytes != bytes) return nullptr;
  return take_lent_now(s);
}
// Does p belong to a result (so that freeing it does nothing)?
inline bool is_lent(const void* p) noexcept {
  const lending_state& s = thread_lending();
  return s.nlent != 0 && held_by_a_table(s, p);
}

}  // namespace mg::detail
