// mg::tensor on device cuda: the Thrust implementation of the runtime engine's device backend
// (Note [Device backends] in <metagrad/detail/device.hpp>). Including this header registers it.
//
// Each kernel is one Thrust algorithm over a counting iterator: the functor turns the linear
// index into an element offset per operand (nd_offset) and evaluates the op struct's forward
// through apply_elementwise. Contiguous operands were coalesced to rank 1 by the caller, so the
// common case costs one multiplication per operand, no division. Sums use reduce_by_key over
// the input walked with the kept dimensions outermost, so that the keys (output positions)
// come in runs; a full sum is one transform_reduce.
#pragma once

#include <cstddef>
#include <cstdint>
#include <new>

#include <thrust/copy.h>
#include <thrust/device_free.h>
#include <thrust/device_malloc.h>
#include <thrust/device_ptr.h>
#include <thrust/execution_policy.h>
#include <thrust/fill.h>
#include <thrust/for_each.h>
#include <thrust/functional.h>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/discard_iterator.h>
#include <thrust/iterator/transform_iterator.h>
#include <thrust/reduce.h>
#include <thrust/transform_reduce.h>

#include <metagrad/detail/config.hpp>
#include <metagrad/detail/device.hpp>
#include <metagrad/detail/storage.hpp>

namespace mg::cuda::detail {

// Note [Raw device pointers]: with an explicit policy (thrust::device) Thrust takes raw pointers
// to be in that system's memory, so the kernels pass T* rather than thrust::device_ptr<T>. Besides
// being shorter, this avoids the sequential systems writing through thrust::device_reference,
// which binds a reference to a null execution policy (UBSan reports it; CCCL 3.0).

using mg::detail::nd_offset;
using mg::detail::nd_operand;
using mg::detail::nd_space;
using mg::detail::op_code;
using index_iterator = thrust::counting_iterator<std::int64_t>;

template <class T>
struct elementwise_fn {
  op_code code;
  double param;
  nd_space s;
  nd_operand out, a, b;
  MG_HD void operator()(std::int64_t i) const {
    const T x = static_cast<const T*>(a.data)[nd_offset(s, a, i)];
    const T y = static_cast<const T*>(b.data)[nd_offset(s, b, i)];
    static_cast<T*>(out.data)[nd_offset(s, out, i)] =
        mg::detail::apply_elementwise<T>(code, param, x, y);
  }
};

template <class Out, class In>
struct copy_fn {
  nd_space s;
  nd_operand out, in;
  MG_HD void operator()(std::int64_t i) const {
    static_cast<Out*>(out.data)[nd_offset(s, out, i)] =
        static_cast<Out>(static_cast<const In*>(in.data)[nd_offset(s, in, i)]);
  }
};

// The element of x at linear index i of s.
template <class T>
struct gather_fn {
  nd_space s;
  nd_operand x;
  MG_HD T operator()(std::int64_t i) const {
    return static_cast<const T*>(x.data)[nd_offset(s, x, i)];
  }
};

struct divide_by {
  std::int64_t n;
  MG_HD std::int64_t operator()(std::int64_t i) const { return i / n; }
};

inline void* allocate(std::size_t nbytes) {
  try {
    return thrust::device_malloc<unsigned char>(nbytes).get();
  } catch (const std::bad_alloc&) {
    mg::detail::fail("allocate: the device has no room for ", nbytes,
                     " bytes; free tensors you no longer need (drop their handles) or use "
                     "smaller batches");
  }
}

inline void release(void* p) {
  thrust::device_free(thrust::device_pointer_cast(static_cast<unsigned char*>(p)));
}

inline void to_host(void* dst, const void* src, std::size_t nbytes) {
  thrust::copy_n(thrust::device_pointer_cast(static_cast<const unsigned char*>(src)), nbytes,
                 static_cast<unsigned char*>(dst));
}

inline void from_host(void* dst, const void* src, std::size_t nbytes) {
  thrust::copy_n(static_cast<const unsigned char*>(src), nbytes,
                 thrust::device_pointer_cast(static_cast<unsigned char*>(dst)));
}

inline void fill(void* dst, mg::dtype d, std::int64_t n, double value) {
  mg::detail::dispatch(d, [&]<class T>(std::type_identity<T>) {
    thrust::fill_n(thrust::device, static_cast<T*>(dst), n, static_cast<T>(value));
  });
}

inline void copy(const nd_space& s, mg::dtype out_t, const nd_operand& out, mg::dtype in_t,
                 const nd_operand& in) {
  mg::detail::dispatch(out_t, [&]<class O>(std::type_identity<O>) {
    mg::detail::dispatch(in_t, [&]<class I>(std::type_identity<I>) {
      thrust::for_each(thrust::device, index_iterator(0), index_iterator(s.numel),
                       copy_fn<O, I>{s, out, in});
    });
  });
}

inline void elementwise(op_code c, double param, mg::dtype d, const nd_space& s,
                        const nd_operand& out, const nd_operand& a, const nd_operand& b) {
  mg::detail::dispatch(d, [&]<class T>(std::type_identity<T>) {
    thrust::for_each(thrust::device, index_iterator(0), index_iterator(s.numel),
                     elementwise_fn<T>{c, param, s, out, a, b});
  });
}

inline void sum(mg::dtype d, const nd_space& s, const nd_operand& x, std::uint32_t reduced,
                void* out) {
  // Walk x with the kept dimensions first: then linear index / (reduced count) is the position
  // in the contiguous output.
  nd_space p;
  nd_operand px = x;
  std::int64_t reduced_count = 1;
  for (int pass = 0; pass < 2; ++pass)
    for (int k = 0; k < s.rank; ++k) {
      const bool is_reduced = (reduced >> k) & 1u;
      if (is_reduced != (pass == 1)) continue;
      p.extents[p.rank] = s.extents[k];
      px.strides[p.rank] = x.strides[k];
      ++p.rank;
      if (is_reduced) reduced_count *= s.extents[k];
    }
  p.numel = s.numel;
  mg::detail::dispatch(d, [&]<class T>(std::type_identity<T>) {
    const auto values = thrust::make_transform_iterator(index_iterator(0), gather_fn<T>{p, px});
    T* const result = static_cast<T*>(out);  // Note [Raw device pointers]
    if (reduced_count == s.numel) {
      const T total = thrust::reduce(thrust::device, values, values + s.numel, T(0));
      thrust::fill_n(thrust::device, result, 1, total);
    } else {
      const auto keys =
          thrust::make_transform_iterator(index_iterator(0), divide_by{reduced_count});
      thrust::reduce_by_key(thrust::device, keys, keys + s.numel, values,
                            thrust::make_discard_iterator(), result);
    }
  });
}

inline constexpr mg::detail::device_backend thrust_backend{
    "thrust", &allocate, &release, &to_host, &from_host, &fill, &copy, &elementwise, &sum};

// See Note [Device backends]: every translation unit that includes this header registers the
// same backend, so it does not matter which one initialises first.
inline const bool thrust_backend_registered = mg::detail::register_cuda_backend(&thrust_backend);

}  // namespace mg::cuda::detail
