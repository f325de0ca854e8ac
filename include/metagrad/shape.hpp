// mg::shape_t: the extents (or strides) of a tensor, one per dimension, outermost first.
#pragma once

#include <algorithm>
#include <compare>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <iterator>
#include <new>
#include <type_traits>
#include <vector>

namespace mg {

/// A tensor shape: one extent per dimension, outermost first (row-major).
///
/// A vector of `std::int64_t` with the interface of `std::vector` that shapes use (iterators,
/// `size`, `operator[]`, `push_back`, `insert`, `erase`, `resize`, comparisons), which keeps up to
/// six extents inline: a tensor's shape and strides cost no allocation of their own. Longer shapes
/// move to the heap. It converts to and from `std::vector<std::int64_t>`.
///
/// Note [Inline shapes]: every tensor the runtime engine makes has a shape and strides, and every
/// op copies, broadcasts or compares a few of them; as `std::vector`s they were most of the heap
/// allocations of a small op (docs/performance.md, "The runtime engine on the same LSTM").
class shape_t {
 public:
  using value_type = std::int64_t;
  using size_type = std::size_t;
  using difference_type = std::ptrdiff_t;
  using reference = value_type&;
  using const_reference = const value_type&;
  using pointer = value_type*;
  using const_pointer = const value_type*;
  using iterator = value_type*;
  using const_iterator = const value_type*;
  using reverse_iterator = std::reverse_iterator<iterator>;
  using const_reverse_iterator = std::reverse_iterator<const_iterator>;

  static constexpr size_type inline_capacity = 6;

  shape_t() noexcept = default;
  explicit shape_t(size_type n, value_type v = 0) { assign(n, v); }
  shape_t(std::initializer_list<value_type> l) { assign(l.begin(), l.end()); }
  template <std::input_iterator It>
  requires std::is_convertible_v<std::iter_reference_t<It>, value_type> shape_t(It first, It last) {
    assign(first, last);
  }
  shape_t(const std::vector<value_type>& v) { assign(v.begin(), v.end()); }  // NOLINT: implicit
  shape_t(const shape_t& o) { assign(o.begin(), o.end()); }
  shape_t(shape_t&& o) noexcept { take(o); }
  shape_t& operator=(const shape_t& o) {
    if (this != &o) assign(o.begin(), o.end());
    return *this;
  }
  shape_t& operator=(shape_t&& o) noexcept {
    if (this != &o) {
      release();
      take(o);
    }
    return *this;
  }
  shape_t& operator=(std::initializer_list<value_type> l) {
    assign(l.begin(), l.end());
    return *this;
  }
  ~shape_t() { release(); }

  /// The same extents as a `std::vector`.
  operator std::vector<value_type>() const { return {begin(), end()}; }  // NOLINT: implicit

  // Element access and iterators.
  value_type* data() noexcept { return data_; }
  const value_type* data() const noexcept { return data_; }
  value_type& operator[](size_type i) noexcept { return data_[i]; }
  const value_type& operator[](size_type i) const noexcept { return data_[i]; }
  value_type& front() noexcept { return data_[0]; }
  const value_type& front() const noexcept { return data_[0]; }
  value_type& back() noexcept { return data_[size_ - 1]; }
  const value_type& back() const noexcept { return data_[size_ - 1]; }
  iterator begin() noexcept { return data_; }
  iterator end() noexcept { return data_ + size_; }
  const_iterator begin() const noexcept { return data_; }
  const_iterator end() const noexcept { return data_ + size_; }
  const_iterator cbegin() const noexcept { return data_; }
  const_iterator cend() const noexcept { return data_ + size_; }
  reverse_iterator rbegin() noexcept { return reverse_iterator(end()); }
  reverse_iterator rend() noexcept { return reverse_iterator(begin()); }
  const_reverse_iterator rbegin() const noexcept { return const_reverse_iterator(end()); }
  const_reverse_iterator rend() const noexcept { return const_reverse_iterator(begin()); }

  // Capacity.
  size_type size() const noexcept { return size_; }
  bool empty() const noexcept { return size_ == 0; }
  size_type capacity() const noexcept { return capacity_; }
  void reserve(size_type n) {
    if (n > capacity_) grow(n);
  }

  // Modifiers.
  void clear() noexcept { size_ = 0; }
  void assign(size_type n, value_type v) {
    size_ = 0;
    reserve(n);
    std::fill_n(data_, n, v);
    size_ = static_cast<std::uint32_t>(n);
  }
  template <std::input_iterator It>
  void assign(It first, It last) {
    size_ = 0;
    if constexpr (std::forward_iterator<It>) {
      const auto n = static_cast<size_type>(std::distance(first, last));
      reserve(n);
      for (size_type i = 0; i < n; ++i, ++first) data_[i] = static_cast<value_type>(*first);
      size_ = static_cast<std::uint32_t>(n);
    } else {
      for (; first != last; ++first) push_back(static_cast<value_type>(*first));
    }
  }
  void push_back(value_type v) {
    if (size_ == capacity_) grow(2 * size_);
    data_[size_++] = v;
  }
  value_type& emplace_back(value_type v) {
    push_back(v);
    return back();
  }
  void pop_back() noexcept { --size_; }
  void resize(size_type n, value_type v = 0) {
    reserve(n);
    if (n > size_) std::fill(data_ + size_, data_ + n, v);
    size_ = static_cast<std::uint32_t>(n);
  }
  iterator insert(const_iterator pos, value_type v) { return insert(pos, size_type{1}, v); }
  iterator insert(const_iterator pos, size_type n, value_type v) {
    const size_type at = open(pos, n);
    std::fill_n(data_ + at, n, v);
    return data_ + at;
  }
  template <std::forward_iterator It>
  iterator insert(const_iterator pos, It first, It last) {
    const shape_t values(first, last);  // the values may live in *this
    const size_type at = open(pos, values.size());
    std::copy(values.begin(), values.end(), data_ + at);
    return data_ + at;
  }
  iterator insert(const_iterator pos, std::initializer_list<value_type> l) {
    return insert(pos, l.begin(), l.end());
  }
  iterator erase(const_iterator pos) noexcept { return erase(pos, pos + 1); }
  iterator erase(const_iterator first, const_iterator last) noexcept {
    auto* f = data_ + (first - data_);
    auto* rest = std::copy(last, const_iterator(end()), f);
    size_ = static_cast<std::uint32_t>(rest - data_);
    return f;
  }
  void swap(shape_t& o) noexcept {
    shape_t t(std::move(o));
    o = std::move(*this);
    *this = std::move(t);
  }
  friend void swap(shape_t& a, shape_t& b) noexcept { a.swap(b); }

  // Comparisons, element by element (with each other and with std::vector).
  friend bool operator==(const shape_t& a, const shape_t& b) noexcept {
    return std::equal(a.begin(), a.end(), b.begin(), b.end());
  }
  friend std::strong_ordering operator<=>(const shape_t& a, const shape_t& b) noexcept {
    return std::lexicographical_compare_three_way(a.begin(), a.end(), b.begin(), b.end());
  }
  friend bool operator==(const shape_t& a, const std::vector<value_type>& b) noexcept {
    return std::equal(a.begin(), a.end(), b.begin(), b.end());
  }

 private:
  value_type* data_ = inline_;
  std::uint32_t size_ = 0;
  std::uint32_t capacity_ = inline_capacity;
  value_type inline_[inline_capacity];

  bool on_heap() const noexcept { return data_ != inline_; }
  void release() noexcept {
    if (on_heap()) delete[] data_;
  }
  // Room for at least n extents, keeping the first size_.
  void grow(size_type n) {
    n = std::max<size_type>(n, 2 * inline_capacity);
    auto* p = new value_type[n];
    std::copy(data_, data_ + size_, p);
    release();
    data_ = p;
    capacity_ = static_cast<std::uint32_t>(n);
  }
  // Moves o's extents here (this holds none), leaving o empty.
  void take(shape_t& o) noexcept {
    size_ = o.size_;
    if (o.on_heap()) {
      data_ = o.data_;
      capacity_ = o.capacity_;
      o.data_ = o.inline_;
      o.capacity_ = inline_capacity;
    } else {
      data_ = inline_;
      capacity_ = inline_capacity;
      std::copy(o.inline_, o.inline_ + o.size_, inline_);
    }
    o.size_ = 0;
  }
  // Opens a gap of n extents at pos; returns its index.
  size_type open(const_iterator pos, size_type n) {
    const auto at = static_cast<size_type>(pos - data_);
    reserve(size_ + n);
    std::copy_backward(data_ + at, data_ + size_, data_ + size_ + n);
    size_ += static_cast<std::uint32_t>(n);
    return at;
  }
};

}  // namespace mg
