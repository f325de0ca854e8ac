// mg::tensor on device cuda: the Thrust implementation of the runtime engine's backend (Note
// [Device backends] in <metagrad/backend/backend.hpp>). Including this header registers it, with
// the kernels of every built-in elementwise op; a user's op joins them through
// mg::cuda::register_ops in the same translation unit.
//
// Each kernel is one Thrust algorithm over a counting iterator: the functor turns the linear
// index into an element offset per operand (nd_offset) and runs the op struct's forward, or its
// backward, on the elements (element_kernels.hpp: the same per-element body as the CPU's).
// Contiguous operands were coalesced to rank 1 by the caller, so the common case costs one
// multiplication per operand, no division. Sums accumulate in double (Note [Accurate sums]):
// reduce_by_key over the input walked with the kept dimensions outermost, so that the keys
// (output positions) come in runs; a full sum is one reduce.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <new>
#include <type_traits>
#include <utility>

// Without a device system CUB fails deep inside its headers under a host compiler; say why here.
#if !defined(__CUDACC__) && !defined(THRUST_DEVICE_SYSTEM)
#error \
    "metagrad: compile <metagrad/cuda.hpp> with nvcc, or with a host compiler and -DTHRUST_DEVICE_SYSTEM=THRUST_DEVICE_SYSTEM_CPP (or _OMP with -fopenmp); thrust_create_target() sets it"
#endif

#include <thrust/copy.h>
#include <thrust/device_ptr.h>
#include <thrust/execution_policy.h>
#include <thrust/fill.h>
#include <thrust/for_each.h>
#include <thrust/functional.h>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/discard_iterator.h>
#include <thrust/iterator/transform_iterator.h>
#include <thrust/iterator/transform_output_iterator.h>
#include <thrust/reduce.h>
#include <thrust/transform.h>

#include <metagrad/cuda/blas.hpp>
#include <metagrad/cuda/memory.hpp>
#include <metagrad/cuda/stream.hpp>

#if MG_CUDA_DEVICE
#include <cub/device/device_reduce.cuh>
#include <cub/device/device_segmented_reduce.cuh>
#endif

#include <metagrad/backend/backend.hpp>
#include <metagrad/backend/element_kernels.hpp>
#include <metagrad/backend/registry.hpp>
#include <metagrad/concepts.hpp>
#include <metagrad/core/config.hpp>
#include <metagrad/core/storage.hpp>
#include <metagrad/ops.hpp>

namespace mg::cuda {

namespace detail {

// Note [Raw device pointers]: with an explicit policy (thrust::device) Thrust takes raw pointers
// to be in that system's memory, so the kernels pass T* rather than thrust::device_ptr<T>. Besides
// being shorter, this avoids the sequential systems writing through thrust::device_reference,
// which binds a reference to a null execution policy (UBSan reports it; CCCL 3.0).

using mg::detail::nd_offset;
using mg::detail::nd_operand;
using mg::detail::nd_space;
using index_iterator = thrust::counting_iterator<std::int64_t>;

template <class Op, class T, std::size_t N>
struct forward_fn {
  Op op;
  nd_space s;
  nd_operand out;
  nd_operand in[N];
  MG_HD void operator()(std::int64_t i) const {
    std::int64_t off[N];
    for (std::size_t k = 0; k < N; ++k) off[k] = nd_offset(s, in[k], i);
    mg::detail::forward_element<Op, T>(op, out, nd_offset(s, out, i), in, off,
                                       std::make_index_sequence<N>{});
  }
};

template <class Op, class T, std::size_t N>
struct backward_fn {
  Op op;
  nd_space s;
  nd_operand in[N];
  nd_operand y, g;
  nd_operand grads[N];
  MG_HD void operator()(std::int64_t i) const {
    std::int64_t off[N], goff[N];
    for (std::size_t k = 0; k < N; ++k) {
      off[k] = nd_offset(s, in[k], i);
      goff[k] = nd_offset(s, grads[k], i);
    }
    const T gv = static_cast<const T*>(g.data)[nd_offset(s, g, i)];
    mg::detail::backward_element<Op, T>(op, in, off, y, nd_offset(s, y, i), gv, grads, goff,
                                        std::make_index_sequence<N>{});
  }
};

template <class Op>
void forward(const void* op, mg::dtype value, const nd_space& s, const nd_operand& out,
             const nd_operand* in) {
  constexpr std::size_t N = mg::detail::op_arity<Op>();
  mg::detail::dispatch_floating(value, [&]<class T>(std::type_identity<T>) {
    forward_fn<Op, T, N> f{*static_cast<const Op*>(op), s, out, {}};
    for (std::size_t k = 0; k < N; ++k) f.in[k] = in[k];
    thrust::for_each(policy(), index_iterator(0), index_iterator(s.numel), f);
  });
}

template <class Op>
void backward(const void* op, mg::dtype value, const nd_space& s, const nd_operand* in,
              const nd_operand& y, const nd_operand& g, const nd_operand* grads) {
  if constexpr (mg::detail::is_differentiable<Op>()) {
    constexpr std::size_t N = mg::detail::op_arity<Op>();
    mg::detail::dispatch_floating(value, [&]<class T>(std::type_identity<T>) {
      backward_fn<Op, T, N> f{*static_cast<const Op*>(op), s, {}, y, g, {}};
      for (std::size_t k = 0; k < N; ++k) {
        f.in[k] = in[k];
        f.grads[k] = grads[k];
      }
      thrust::for_each(policy(), index_iterator(0), index_iterator(s.numel), f);
    });
  }
}

template <class Op>
inline constexpr mg::detail::elementwise_kernels kernels{&forward<Op>, &backward<Op>};

template <class Out, class In>
struct copy_fn {
  nd_space s;
  nd_operand out, in;
  MG_HD void operator()(std::int64_t i) const {
    static_cast<Out*>(out.data)[nd_offset(s, out, i)] =
        static_cast<Out>(static_cast<const In*>(in.data)[nd_offset(s, in, i)]);
  }
};

struct divide_by {
  std::int64_t n;
  MG_HD std::int64_t operator()(std::int64_t i) const { return i / n; }
};

struct times_by {
  std::int64_t n;
  MG_HD std::int64_t operator()(std::int64_t i) const { return i * n; }
};

// Note [Asynchronous device work]: a copy to the host waits for the work before it on the
// stream, and then for itself; a copy from the host returns once the source was read.
inline void to_host(void* dst, const void* src, std::size_t nbytes) {
#if MG_CUDA_DEVICE
  const cudaStream_t s = current_stream().native_handle();
  check(cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyDeviceToHost, s), "to(cpu)");
  check(cudaStreamSynchronize(s), "to(cpu)");
#else
  thrust::copy_n(policy(), thrust::device_pointer_cast(static_cast<const unsigned char*>(src)),
                 nbytes, static_cast<unsigned char*>(dst));
#endif
}

inline void from_host(void* dst, const void* src, std::size_t nbytes) {
#if MG_CUDA_DEVICE
  check(cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyHostToDevice, current_stream().native_handle()),
        "to(cuda)");
#else
  thrust::copy_n(static_cast<const unsigned char*>(src), nbytes,
                 thrust::device_pointer_cast(static_cast<unsigned char*>(dst)));
#endif
}

inline void fill(void* dst, mg::dtype d, std::int64_t n, double value) {
  mg::detail::dispatch(d, [&]<class T>(std::type_identity<T>) {
    thrust::fill_n(policy(), static_cast<T*>(dst), n, static_cast<T>(value));
  });
}

inline void copy(const nd_space& s, mg::dtype out_t, const nd_operand& out, mg::dtype in_t,
                 const nd_operand& in) {
  mg::detail::dispatch(out_t, [&]<class O>(std::type_identity<O>) {
    mg::detail::dispatch(in_t, [&]<class I>(std::type_identity<I>) {
      thrust::for_each(policy(), index_iterator(0), index_iterator(s.numel),
                       copy_fn<O, I>{s, out, in});
    });
  });
}

struct plus_fn {
  template <class A>
  static A identity() {
    return A(0);
  }
  template <class X, class Y>  // CUB may pass the output's type on one side
  MG_HD std::common_type_t<X, Y> operator()(X a, Y b) const {
    return std::common_type_t<X, Y>(a) + std::common_type_t<X, Y>(b);
  }
};
struct times_fn {
  template <class A>
  static A identity() {
    return A(1);
  }
  template <class X, class Y>
  MG_HD std::common_type_t<X, Y> operator()(X a, Y b) const {
    return std::common_type_t<X, Y>(a) * std::common_type_t<X, Y>(b);
  }
};
template <bool Max>
struct extreme_fn {  // NaN wins, as in torch
  template <class A>
  static A identity() {
    if constexpr (std::numeric_limits<A>::has_infinity) {
      return Max ? -std::numeric_limits<A>::infinity() : std::numeric_limits<A>::infinity();
    } else {
      return Max ? std::numeric_limits<A>::lowest() : std::numeric_limits<A>::max();
    }
  }
  template <class X, class Y>
  MG_HD std::common_type_t<X, Y> operator()(X a, Y b) const {
    using C = std::common_type_t<X, Y>;
    return mg::detail::pick_extreme<Max>(C(a), C(b));
  }
};

// The element of x at linear index i of s, as the accumulator type A.
template <class T, class A>
struct gather_as_fn {
  nd_space s;
  nd_operand x;
  MG_HD A operator()(std::int64_t i) const {
    return static_cast<A>(static_cast<const T*>(x.data)[nd_offset(s, x, i)]);
  }
};

template <class A, class T>
struct narrow_as_fn {
  MG_HD T operator()(A v) const { return static_cast<T>(v); }
};

// One reduction: Op combines accumulators; sums and products accumulate in double (Note
// [Accurate sums]), max and min in the element type.
template <class Op, bool Wide>
void reduce(mg::dtype d, const nd_space& s, const nd_operand& x, std::uint32_t reduced, void* out) {
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
    if constexpr (std::is_same_v<T, bool>) {
      mg::detail::fail("reduce: a bool tensor; convert it first, e.g. with .to(mg::f32)");
    } else {
      using A = std::conditional_t<Wide, double, T>;
      const auto values =
          thrust::make_transform_iterator(index_iterator(0), gather_as_fn<T, A>{p, px});
      T* const result = static_cast<T*>(out);  // Note [Raw device pointers]
      const std::int64_t segments = s.numel / reduced_count;
#if MG_CUDA_DEVICE
      // CUB on the current stream, the result written on the device (no host wait): one
      // reduction, or one segment (a block of threads) per output element.
      const auto results = thrust::make_transform_output_iterator(result, narrow_as_fn<A, T>{});
      const cudaStream_t stream = current_stream().native_handle();
      const auto run = [&](void* temp, std::size_t& bytes) {
        if (segments == 1)
          return cub::DeviceReduce::Reduce(temp, bytes, values, results, s.numel, Op{},
                                           Op::template identity<A>(), stream);
        const auto starts =
            thrust::make_transform_iterator(index_iterator(0), times_by{reduced_count});
        return cub::DeviceSegmentedReduce::Reduce(temp, bytes, values, results, segments, starts,
                                                  starts + 1, Op{}, Op::template identity<A>(),
                                                  stream);
      };
      std::size_t bytes = 0;
      check(run(nullptr, bytes), "reduce");
      scratch<unsigned char> temp(bytes ? bytes : 1);  // a null pointer asks CUB for the size
      check(run(temp.data(), bytes), "reduce");
#else
      if (segments == 1) {
        const A total = thrust::reduce(policy(), values, values + s.numel,
                                       Op::template identity<A>(), Op{});
        thrust::fill_n(policy(), result, 1, static_cast<T>(total));
      } else {
        scratch<A> acc(static_cast<std::size_t>(segments));
        const auto keys =
            thrust::make_transform_iterator(index_iterator(0), divide_by{reduced_count});
        thrust::reduce_by_key(policy(), keys, keys + s.numel, values,
                              thrust::make_discard_iterator(), acc.data(),
                              thrust::equal_to<std::int64_t>{}, Op{});
        thrust::transform(policy(), acc.data(), acc.data() + segments, result,
                          narrow_as_fn<A, T>{});
      }
#endif
    }
  });
}

inline constexpr mg::detail::backend thrust_backend{"thrust",
                                                    &allocate,
                                                    &release,
                                                    &to_host,
                                                    &from_host,
                                                    &fill,
                                                    &copy,
                                                    &reduce<plus_fn, true>,
                                                    &reduce<times_fn, true>,
                                                    &reduce<extreme_fn<true>, false>,
                                                    &reduce<extreme_fn<false>, false>,
                                                    &gemm,
                                                    &memory_stats,
                                                    &empty_cache,
                                                    &reset_peak,
                                                    &device_count,
                                                    &current_device,
                                                    &select_device};

template <class... Ops>
bool register_list(op_list<Ops...>);

}  // namespace detail

/// Gives the user's ctx-free ops kernels on device cuda; call it in the translation unit that
/// includes <metagrad/cuda.hpp> (compiled by nvcc for a GPU), once per program:
/// ```cpp
/// #include <metagrad/cuda.hpp>
/// static const bool registered = mg::cuda::register_ops<softplus, hypot2>();
/// ```
/// Each op's forward and backward must be MG_HD (they run in device functors) and the struct
/// trivially copyable (its attributes travel to the device by value). A built-in op needs no
/// registration. Returns true, so that it can initialise a variable.
template <class... Ops>
bool register_ops() {
  static_assert((StaticOp<Ops> && ...),
                "metagrad: register_ops takes ctx-free ops (mg::StaticOp: forward and backward)");
  static_assert((std::is_trivially_copyable_v<Ops> && ...),
                "metagrad: an op run on the device must be trivially copyable (its attributes are "
                "copied into the kernel)");
  static_assert((mg::detail::is_elementwise<Ops>() && ...),
                "metagrad: register_ops takes elementwise ops (forward and backward on elements)");
  ((mg::detail::op_kernels<Ops>[static_cast<std::size_t>(device_type::cuda)] =
        &detail::kernels<Ops>),
   ...);
  return true;
}

namespace detail {
template <class... Ops>
bool register_list(op_list<Ops...>) {
  return register_ops<Ops...>();
}

// See Note [Device backends]: every translation unit that includes this header registers the
// same backend and built-in kernels, so it does not matter which one initialises first.
inline const bool thrust_backend_registered =
    mg::detail::register_backend(device_type::cuda, &thrust_backend) &&
    register_list(mg::elementwise_ops{});
}  // namespace detail

}  // namespace mg::cuda
