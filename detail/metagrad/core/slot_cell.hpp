// Note [Slots built when computed]: a sweep holds its slots' values and its backward results in
// tuples, built before forward() fills them. For a number that costs nothing; a pooled xtensor
// array's default constructor allocates a one-element array (xtensor's 0-d value), which the
// computed value then replaces and frees: two trips to the pool and a move of three shape vectors
// per slot: 13% of the instructions of the LSTM objective's gradient on its 14-element
// arrays (benchmarks/lstm.cpp). A family names the types that are built only when computed
// (built_when_computed_v<T> = true); the sweep then keeps them in a slot_cell, storage with a flag
// that holds nothing until the value is set (built in place from the computation: set_from),
// and frees its value when cleared or destroyed. The sweep calls its policy's keep (keep_bwd) only
// where it converts: an op's value (a backward's gradients) already of the kept type is built in
// the cell itself, where each keep moved every array once more.
#pragma once

#include <memory>
#include <new>
#include <type_traits>
#include <utility>

#include <metagrad/core/config.hpp>

namespace mg::detail {

template <class T>
inline constexpr bool built_when_computed_v = false;

template <class T>
class slot_cell {
  union {
    T v_;
  };
  bool set_ = false;

 public:
  slot_cell() noexcept {}
  ~slot_cell() { clear(); }
  slot_cell(const slot_cell& o) : set_(o.set_) {
    if (set_) std::construct_at(&v_, o.v_);
  }
  slot_cell(slot_cell&& o) noexcept(std::is_nothrow_move_constructible_v<T>) : set_(o.set_) {
    if (set_) std::construct_at(&v_, std::move(o.v_));
  }
  slot_cell& operator=(const slot_cell& o) {
    if (this != &o) {
      if (o.set_) {
        set(o.v_);
      } else {
        clear();
      }
    }
    return *this;
  }
  slot_cell& operator=(slot_cell&& o) noexcept(std::is_nothrow_move_assignable_v<T>) {
    if (this != &o) {
      if (o.set_) {
        set(std::move(o.v_));
      } else {
        clear();
      }
    }
    return *this;
  }
  // The value, built in place the first time and assigned after.
  template <class U>
  void set(U&& u) {
    if (set_) {
      v_ = std::forward<U>(u);
    } else {
      std::construct_at(&v_, std::forward<U>(u));
      set_ = true;
    }
  }
  // The value f() returns, built in place (no move of it) the first time.
  template <class F>
  void set_from(F&& f) {
    if (set_) {
      v_ = std::forward<F>(f)();
    } else {
      ::new (static_cast<void*>(std::addressof(v_))) T(std::forward<F>(f)());
      set_ = true;
    }
  }
  void clear() noexcept {
    if (set_) {
      std::destroy_at(&v_);
      set_ = false;
    }
  }
  T& get() noexcept { return v_; }
  const T& get() const noexcept { return v_; }
};

// What a sweep stores for a value of type T, and the value it holds.
template <class T>
using slot_storage_t = std::conditional_t<built_when_computed_v<T>, slot_cell<T>, T>;

template <class T>
MG_HD MG_INLINE constexpr T& cell_value(slot_cell<T>& c) noexcept {
  return c.get();
}
template <class T>
MG_HD MG_INLINE constexpr const T& cell_value(const slot_cell<T>& c) noexcept {
  return c.get();
}
template <class T>
MG_HD MG_INLINE constexpr T& cell_value(T& c) noexcept {
  return c;
}
template <class T>
MG_HD MG_INLINE constexpr const T& cell_value(const T& c) noexcept {
  return c;
}

template <class T, class U>
MG_HD MG_INLINE constexpr void set_cell(slot_cell<T>& c, U&& u) {
  c.set(std::forward<U>(u));
}
template <class T, class U>
MG_HD MG_INLINE constexpr void set_cell(T& c, U&& u) {
  c = std::forward<U>(u);
}
template <class T, class F>
MG_HD MG_INLINE constexpr void set_cell_from(slot_cell<T>& c, F&& f) {
  c.set_from(std::forward<F>(f));
}
template <class T, class F>
MG_HD MG_INLINE constexpr void set_cell_from(T& c, F&& f) {
  c = std::forward<F>(f)();
}

}  // namespace mg::detail
