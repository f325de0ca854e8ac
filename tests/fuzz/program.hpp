// Random differentiable programs: what the fuzzer generates, runs and prints.
//
// A program is a list of inputs (shape, dtype, requires_grad, values) and a straight-line list
// of instructions over numbered values. Each instruction applies one op of docs/ops.md to
// earlier values and defines a new value, or writes one in place (`target`). The loss of a
// program is the sum over its outputs of sum(output * weight), with fixed weights.
//
// Programs are not generated directly: RapidCheck generates a `raw_program` (small integers),
// and `lower` turns any raw program into a valid one (Note [Lowering], lower.cpp). So RapidCheck
// shrinks raw programs by its own rules (dropping instructions, smaller numbers) and every
// shrunk candidate is again a valid program.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <metagrad/tensor.hpp>

namespace mg_fuzz {

// The vocabulary. X(name, docs/ops.md's first code span of the op's row)
#define MG_FUZZ_OPS(X)                                                      \
  X(add, "a + b")                                                           \
  X(sub, "a - b")                                                           \
  X(mul, "a * b")                                                           \
  X(div, "a / b")                                                           \
  X(maximum, "maximum(a, b)")                                               \
  X(minimum, "minimum(a, b)")                                               \
  X(atan2, "atan2(a, b)")                                                   \
  X(pow_tensor, "pow(a, b)")                                                \
  X(add_number, "a + b")                                                    \
  X(mul_number, "a * b")                                                    \
  X(number_sub, "a - b")                                                    \
  X(number_div, "a / b")                                                    \
  X(number_pow, "pow(a, b)")                                                \
  X(neg, "-x")                                                              \
  X(exp, "exp(x)")                                                          \
  X(log, "log(x)")                                                          \
  X(log1p, "log1p(x)")                                                      \
  X(expm1, "expm1(x)")                                                      \
  X(sqrt, "sqrt(x)")                                                        \
  X(rsqrt, "rsqrt(x)")                                                      \
  X(abs, "abs(x)")                                                          \
  X(sin, "sin(x)")                                                          \
  X(cos, "cos(x)")                                                          \
  X(tan, "tan(x)")                                                          \
  X(tanh, "tanh(x)")                                                        \
  X(sigmoid, "sigmoid(x)")                                                  \
  X(relu, "relu(x)")                                                        \
  X(erf, "erf(x)")                                                          \
  X(square, "square(x)")                                                    \
  X(reciprocal, "reciprocal(x)")                                            \
  X(softplus, "softplus(x)")                                                \
  X(clamp, "clamp(x, lo, hi)")                                              \
  X(pow_scalar, "pow(x, p)")                                                \
  X(where, "where(c, a, b)")                                                \
  X(sum, "sum(x)")                                                          \
  X(prod, "prod(x)")                                                        \
  X(max, "max(x)")                                                          \
  X(min, "min(x)")                                                          \
  X(mean, "mean(x)")                                                        \
  X(var, "var(x, unbiased)")                                                \
  X(norm, "norm(x)")                                                        \
  X(logsumexp, "logsumexp(x)")                                              \
  X(softmax, "softmax(x, dim)")                                             \
  X(log_softmax, "log_softmax(x, dim)")                                     \
  X(mse_loss, "mse_loss(input, target)")                                    \
  X(cross_entropy, "cross_entropy(logits, targets)")                        \
  X(expand, "expand(x, shape)")                                             \
  X(sum_to, "sum_to(x, shape)")                                             \
  X(unsqueeze, "unsqueeze(x, dim)")                                         \
  X(t, "transpose(x)")                                                      \
  X(transpose, "transpose(x, d0, d1)")                                      \
  X(permute, "permute(x, dims)")                                            \
  X(reshape, "reshape(x, shape)")                                           \
  X(view, "view(x, shape)")                                                 \
  X(flatten, "flatten(x, start_dim = 0, end_dim = -1)")                     \
  X(squeeze, "squeeze(x)")                                                  \
  X(slice, "slice(x, dim, start, end, step = 1)")                           \
  X(select, "select(x, dim, i)")                                            \
  X(index_select, "index_select(x, dim, index)")                            \
  X(cat, "cat({a, b, ...}, dim = 0)")                                       \
  X(stack, "stack({a, b, ...}, dim = 0)")                                   \
  X(unbind, "unbind(x, dim = 0)")                                           \
  X(chunk, "chunk(x, chunks, dim = 0)")                                     \
  X(split, "split(x, split_size, dim = 0)")                                 \
  X(split_sizes, "split(x, sizes, dim = 0)")                                \
  X(matmul, "matmul(a, b)")                                                 \
  X(dot, "dot(a, b)")                                                       \
  X(outer, "outer(a, b)")                                                   \
  X(topk, "topk(x, k, dim = -1, largest = true)")                           \
  X(argmax, "argmax(x)")                                                    \
  X(to_dtype, "x.to(dtype)")                                                \
  X(to_device, "x.to(device)")                                              \
  X(contiguous, "x.contiguous()")                                           \
  X(clone, "x.clone()")                                                     \
  X(add_, "add_")                                                           \
  X(sub_, "sub_")                                                           \
  X(mul_, "mul_")                                                           \
  X(div_, "div_")                                                           \
  X(pow_, "pow_")                                                           \
  X(clamp_, "clamp_")                                                       \
  X(copy_, "copy_")                                                         \
  X(fill_, "fill_")                                                         \
  X(zero_, "zero_")                                                         \
  X(neg_, "neg_")                                                           \
  X(abs_, "abs_")                                                           \
  X(exp_, "exp_")                                                           \
  X(log_, "log_")                                                           \
  X(sqrt_, "sqrt_")                                                         \
  X(sin_, "sin_")                                                           \
  X(cos_, "cos_")                                                           \
  X(tanh_, "tanh_")                                                         \
  X(sigmoid_, "sigmoid_")                                                   \
  X(relu_, "relu_")

enum class op : std::uint8_t {
#define MG_FUZZ_ENUM(name, doc) name,
  MG_FUZZ_OPS(MG_FUZZ_ENUM)
#undef MG_FUZZ_ENUM
};
inline constexpr int op_count = 0
#define MG_FUZZ_COUNT(name, doc) +1
    MG_FUZZ_OPS(MG_FUZZ_COUNT)
#undef MG_FUZZ_COUNT
    ;

const char* name_of(op o);
const char* doc_name_of(op o);  // the op's name in docs/ops.md
bool writes_in_place(op o);     // add_ ... relu_

// The comparisons a `where` instruction uses as its condition.
enum class comparison : std::uint8_t { gt, lt, ge, le, eq, ne };
const char* name_of(comparison c);

struct instr {
  op o = op::add;
  std::vector<int> in;             // operand values; an in-place op writes in[0]
  std::vector<std::int64_t> ints;  // dims, shapes, indices (per op: see apply in run.cpp)
  double num = 0;                  // a number operand or attribute
  double num2 = 0;                 // a second one (clamp's hi)
  bool flag = false;               // keepdim, unbiased, a reduction along a dim ...
  bool flag2 = false;
  comparison cmp = comparison::gt;  // where's condition
};

struct input {
  mg::shape_t shape;
  mg::dtype dtype = mg::f64;
  bool requires_grad = true;
  std::vector<double> data;
};

struct program {
  std::vector<input> inputs;    // values 0 .. inputs.size() - 1
  std::vector<instr> code;      // each out-of-place instruction defines the next value
  std::vector<int> outputs;     // the values the loss sums over
  std::vector<std::vector<double>> weights;  // one per output, of its size
  // The backward must fail with a version-counter error (an in-place write to a tensor saved
  // for it), as torch's would; the text names the op whose saved tensor was overwritten.
  std::optional<std::string> expected_error;
  // torch's backward fails, the library's may go on (Note [Lenient saves], lower.cpp)
  bool version_error_allowed = false;

  int value_count() const;
  // The value an instruction defines (-1 for one that writes in place).
  std::vector<int> defined_values() const;
};

// A standalone C++ reproduction: a GoogleTest case that builds the program (and shows it as
// the equivalent mg code in a comment) and runs every property on it.
std::string to_cpp(const program& p, const std::string& test_name, const std::string& failure);
// The program as the mg calls it makes, one statement per line.
std::string to_mg_code(const program& p);

}  // namespace mg_fuzz
