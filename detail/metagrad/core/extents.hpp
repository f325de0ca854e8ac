// A vector of trivially copyable elements that keeps up to N of them inline: the shape and
// stride containers of the static engine's working arrays (xt/pool.hpp), and mg::shape_t.
//
// Note [Cheap extents]: an xt::xarray keeps its shape, strides and back-strides in three
// xt::svector<_, 4>. Moving one swaps them element by element through an out-of-line swap that
// resizes both sides, and resizing one is an out-of-line call as well: in a loop over small
// arrays (an LSTM step on 14 elements) these were 40% of all instructions. `extents` holds up to
// N elements inline and more on the heap, like svector; moving it copies the inline words (or
// takes the heap block), and every member is inline. Elements must be trivially copyable.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <initializer_list>
#include <iterator>
#include <memory>
#include <stdexcept>
#include <type_traits>
#include <vector>

#include <metagrad/core/config.hpp>

namespace mg::detail {

template <class T, std::size_t N>
class extents {
  static_assert(std::is_trivially_copyable_v<T> && N > 0,
                "extents holds trivially copyable elements, at least one inline");

 public:
  using value_type = T;
  using allocator_type = std::allocator<T>;
  using size_type = std::size_t;
  using difference_type = std::ptrdiff_t;
  using reference = T&;
  using const_reference = const T&;
  using pointer = T*;
  using const_pointer = const T*;
  using iterator = T*;
  using const_iterator = const T*;
  using reverse_iterator = std::reverse_iterator<iterator>;
  using const_reverse_iterator = std::reverse_iterator<const_iterator>;

  extents() noexcept = default;
  explicit extents(size_type n) { resize(n); }
  extents(size_type n, const T& v) { assign(n, v); }
  extents(std::initializer_list<T> il) { assign(il.begin(), il.end()); }
  template <class It>
  requires std::input_iterator<It> extents(It first, It last) { assign(first, last); }
  extents(const std::vector<T>& v) { assign(v.begin(), v.end()); }

  extents(const extents& o) { copy_from(o); }
  extents(extents&& o) noexcept { take(o); }
  extents& operator=(const extents& o) {
    if (this != &o) copy_from(o);
    return *this;
  }
  extents& operator=(extents&& o) noexcept {
    if (this != &o) {
      release();
      take(o);
    }
    return *this;
  }
  extents& operator=(std::initializer_list<T> il) {
    assign(il.begin(), il.end());
    return *this;
  }
  ~extents() { release(); }

  template <class It>
  void assign(It first, It last) {
    if constexpr (std::random_access_iterator<It>) {
      const auto n = static_cast<size_type>(std::distance(first, last));
      if (n <= N && !heap_) {  // an unrolled copy: no call to memmove for a few words
        for (size_type i = 0; i < N; ++i)
          if (i < n) inline_[i] = static_cast<T>(first[i]);
      } else {
        reserve(n);
        std::copy(first, last, data());
      }
      n_ = n;
    } else {
      clear();
      for (; first != last; ++first) push_back(*first);
    }
  }
  void assign(size_type n, const T& v) {
    reserve(n);
    std::fill_n(data(), n, v);
    n_ = n;
  }

  T* data() noexcept { return heap_ ? heap_ : inline_.data(); }
  const T* data() const noexcept { return heap_ ? heap_ : inline_.data(); }
  T& operator[](size_type i) noexcept { return data()[i]; }
  const T& operator[](size_type i) const noexcept { return data()[i]; }
  T& at(size_type i) {
    if (i >= n_) throw std::out_of_range("extents::at");
    return data()[i];
  }
  const T& at(size_type i) const {
    if (i >= n_) throw std::out_of_range("extents::at");
    return data()[i];
  }
  T& front() noexcept { return data()[0]; }
  const T& front() const noexcept { return data()[0]; }
  T& back() noexcept { return data()[n_ - 1]; }
  const T& back() const noexcept { return data()[n_ - 1]; }

  iterator begin() noexcept { return data(); }
  iterator end() noexcept { return data() + n_; }
  const_iterator begin() const noexcept { return data(); }
  const_iterator end() const noexcept { return data() + n_; }
  const_iterator cbegin() const noexcept { return begin(); }
  const_iterator cend() const noexcept { return end(); }
  reverse_iterator rbegin() noexcept { return reverse_iterator(end()); }
  reverse_iterator rend() noexcept { return reverse_iterator(begin()); }
  const_reverse_iterator rbegin() const noexcept { return const_reverse_iterator(end()); }
  const_reverse_iterator rend() const noexcept { return const_reverse_iterator(begin()); }
  const_reverse_iterator crbegin() const noexcept { return rbegin(); }
  const_reverse_iterator crend() const noexcept { return rend(); }

  bool empty() const noexcept { return n_ == 0; }
  size_type size() const noexcept { return n_; }
  size_type capacity() const noexcept { return heap_ ? cap_ : N; }
  size_type max_size() const noexcept { return std::size_t(-1) / sizeof(T); }
  allocator_type get_allocator() const noexcept { return {}; }

  // New elements are value-initialised (zero), as svector's are. Inline, every word past the old
  // size is zeroed, without a branch per word (a blend of the N words) and without a call: xtensor
  // resizes the strides and back-strides of every array it makes, twice per array.
  MG_INLINE void resize(size_type n) {
    if (n <= N && !heap_) {
      for (size_type i = 0; i < N; ++i) inline_[i] = i < n_ ? inline_[i] : T{};
    } else {
      reserve(n);
      if (n > n_) std::fill(data() + n_, data() + n, T{});
    }
    n_ = n;
  }
  void resize(size_type n, const T& v) {
    reserve(n);
    if (n > n_) std::fill(data() + n_, data() + n, v);
    n_ = n;
  }
  void reserve(size_type n) {
    if (n > capacity()) grow(n);
  }
  void clear() noexcept { n_ = 0; }
  void shrink_to_fit() noexcept {}
  void push_back(const T& v) {
    if (n_ == capacity()) grow(2 * n_);
    data()[n_++] = v;
  }
  void pop_back() noexcept { --n_; }

  T& emplace_back(const T& v) {
    push_back(v);
    return back();
  }

  iterator insert(const_iterator pos, const T& v) { return insert(pos, size_type{1}, v); }
  iterator insert(const_iterator pos, size_type n, const T& v) {
    const T copy = v;  // v may be an element of *this
    const auto at = static_cast<size_type>(pos - begin());
    reserve(n_ + n);
    T* p = data();
    std::copy_backward(p + at, p + n_, p + n_ + n);
    std::fill_n(p + at, n, copy);
    n_ += n;
    return p + at;
  }
  iterator insert(const_iterator pos, std::initializer_list<T> il) {
    return insert(pos, il.begin(), il.end());
  }
  template <class It>
  iterator insert(const_iterator pos, It first, It last) {
    const std::vector<T> add(first, last);  // (first, last) may point into *this
    const auto at = static_cast<size_type>(pos - begin());
    reserve(n_ + add.size());
    T* p = data();
    std::copy_backward(p + at, p + n_, p + n_ + add.size());
    std::copy(add.begin(), add.end(), p + at);
    n_ += add.size();
    return p + at;
  }
  iterator erase(const_iterator pos) { return erase(pos, pos + 1); }
  iterator erase(const_iterator first, const_iterator last) {
    const auto at = static_cast<size_type>(first - begin());
    const auto k = static_cast<size_type>(last - first);
    T* p = data();
    std::copy(p + at + k, p + n_, p + at);
    n_ -= k;
    return p + at;
  }

  void swap(extents& o) noexcept { std::swap(*this, o); }

  friend bool operator==(const extents& a, const extents& b) {
    if (a.n_ != b.n_) return false;
    for (size_type i = 0; i < a.n_; ++i)
      if (a[i] != b[i]) return false;
    return true;
  }
  friend bool operator<(const extents& a, const extents& b) {
    return std::lexicographical_compare(a.begin(), a.end(), b.begin(), b.end());
  }

 private:
  void take(extents& o) noexcept {
    n_ = o.n_;
    heap_ = o.heap_;
    cap_ = o.cap_;
    inline_ = o.inline_;  // all N words, whether used or not: a fixed-size copy
    if (heap_) {
      o.heap_ = nullptr;
      o.n_ = 0;
    }
  }
  void copy_from(const extents& o) {
    if (!o.heap_ && !heap_) {
      inline_ = o.inline_;
      n_ = o.n_;
    } else {
      assign(o.begin(), o.end());
    }
  }
  void release() noexcept {
    if (heap_) std::allocator<T>{}.deallocate(heap_, cap_);
    heap_ = nullptr;
  }
  void grow(size_type n) {
    n = std::max(n, 2 * N);
    T* p = std::allocator<T>{}.allocate(n);
    std::copy(begin(), end(), p);
    release();
    heap_ = p;
    cap_ = n;
  }

  size_type n_ = 0;
  T* heap_ = nullptr;  // null: the elements are inline_
  size_type cap_ = 0;
  std::array<T, N> inline_{};
};

// xtensor resizes every array's strides and back-strides through resize_container, found by
// argument-dependent lookup: this one is inlined where xtensor's generic one stayed a call.
template <class T, std::size_t N>
MG_INLINE bool resize_container(extents<T, N>& c, std::size_t size) {
  c.resize(size);
  return true;
}

// Whether two shapes (any ranges of extents) are equal: a loop, where std::equal calls memcmp
// (a call per comparison, on shapes of one or two extents).
template <class A, class B>
bool same_extents(const A& a, const B& b) {
  if (a.size() != b.size()) return false;
  auto j = b.begin();
  for (auto i = a.begin(); i != a.end(); ++i, ++j)
    if (static_cast<std::size_t>(*i) != static_cast<std::size_t>(*j)) return false;
  return true;
}

}  // namespace mg::detail
