// Note [Lowering] (lower.hpp): raw programs to valid programs.
#include "fuzz/lower.hpp"

#include <algorithm>
#include <cmath>
#include <memory>
#include <numeric>
#include <optional>
#include <random>
#include <set>

#include <metagrad/autograd.hpp>
#include <metagrad/tensor.hpp>

#include "fuzz/run.hpp"

namespace mg_fuzz {
namespace {

constexpr double margin = 0.05;  // distance kept from kinks, poles and ties
constexpr double largest = 1e3;  // largest magnitude of a value

using storage_ptr = std::shared_ptr<mg::detail::storage>;

// ---- Note [Version model] -------------------------------------------------------------------
// torch's rule for saved tensors modified in place, modelled independently of the library: each
// recorded op is a node with edges to its operands' nodes and the tensors torch saves for it
// (which depend on which operands require grad: `x * c` with only x requiring grad saves c; the
// table below was read off torch 1.13). An in-place write makes a new node for the tensor (and a
// copy-slices node for its base when it is a view); a view used after its storage was written
// gets a fresh node on its base's (torch regenerates views). Backward fails exactly when a node
// it reaches from the loss saved a tensor whose storage's version has changed since.
struct saved_entry {
  storage_ptr store;
  std::uint64_t version = 0;
  bool ambiguous = false;  // torch's saving differs by case (batched matmul): never written
  bool lenient = false;    // torch saves it, the library need not (Note [Lenient saves])
};
struct node {
  std::vector<int> next;
  std::vector<saved_entry> saved;
  std::string name;
};

struct slot {
  mg::tensor m, d;  // in the float64 run and in the declared-dtype run (recorded)
  int node = -1;
  std::uint64_t seen = 0;  // views: the storage version their node reflects
  bool multi = false;      // an output of unbind/chunk/split, or a view of one
};

bool broadcastable(const mg::shape_t& a, const mg::shape_t& b) {
  for (std::size_t i = 1; i <= std::min(a.size(), b.size()); ++i) {
    const auto x = a[a.size() - i], y = b[b.size() - i];
    if (x != y && x != 1 && y != 1) return false;
  }
  return true;
}
mg::shape_t broadcast(const mg::shape_t& a, const mg::shape_t& b) {
  mg::shape_t r(std::max(a.size(), b.size()), 1);
  for (std::size_t i = 1; i <= r.size(); ++i) {
    const auto x = i <= a.size() ? a[a.size() - i] : 1, y = i <= b.size() ? b[b.size() - i] : 1;
    r[r.size() - i] = x == 1 ? y : x;
  }
  return r;
}

int mod(int v, int n) { return n <= 0 ? 0 : ((v % n) + n) % n; }

bool all_finite_within(const mg::tensor& t, double bound) {
  for (double e : values_of(t))
    if (!std::isfinite(e) || std::abs(e) > bound) return false;
  return true;
}
// every element equals c or is at least `margin` from it
bool away(const mg::tensor& x, double c) {
  for (double e : values_of(x))
    if (e != c && !(std::abs(e - c) >= margin)) return false;
  return true;
}
// the elements of each slice of x along dim d are at least `margin` apart
bool distinct_along(const mg::tensor& x, std::int64_t d) {
  if (x.dim() == 0) return true;
  const mg::tensor m = x.transpose(d, -1).contiguous();
  const auto v = values_of(m);
  const auto n = static_cast<std::size_t>(m.shape().back());
  for (std::size_t s = 0; n > 0 && s < v.size(); s += n) {
    std::vector<double> row(v.begin() + static_cast<std::ptrdiff_t>(s),
                            v.begin() + static_cast<std::ptrdiff_t>(s + n));
    std::sort(row.begin(), row.end());
    for (std::size_t i = 1; i < n; ++i)
      if (!(row[i] - row[i - 1] >= margin)) return false;
  }
  return true;
}
bool above(const mg::tensor& x, double lo) {
  for (double e : values_of(x))
    if (!(e > lo + margin)) return false;
  return true;
}
bool nonzero(const mg::tensor& x, double m = margin) {
  for (double e : values_of(x))
    if (!(std::abs(e) >= m)) return false;
  return true;
}

double pow_exponent(int k) {
  static constexpr double table[] = {2, 3, -1, 0.5, 1.5, -2, 0, 1};
  return table[mod(k, 8)];
}

bool is_split(op o) {
  return o == op::unbind || o == op::chunk || o == op::split || o == op::split_sizes;
}

class builder {
 public:
  explicit builder(const raw_program& raw) : raw_(raw), rng_(raw.seed) {}

  lowered run() {
    lowered out;
    try {
      make_inputs();
      for (const auto& r : raw_.code) step(r);
      finish();
    } catch (const mg::error& e) {
      out.failure =
          std::string("the library raised an error while running the program: ") + e.what();
    }
    out.p = p_;
    return out;
  }

 private:
  const raw_program& raw_;
  std::mt19937 rng_;
  program p_;
  std::vector<slot> s_;
  std::vector<node> nodes_;
  std::vector<bool> used_;

  double uniform(double lo, double hi) {
    return std::uniform_real_distribution<double>(lo, hi)(rng_);
  }
  const mg::shape_t& shape(int j) const { return s_[j].m.shape(); }
  std::int64_t rank(int j) const { return static_cast<std::int64_t>(shape(j).size()); }

  void make_inputs() {
    const auto n = std::max<std::size_t>(1, std::min<std::size_t>(raw_.inputs.size(), 3));
    for (std::size_t i = 0; i < n; ++i) {
      const raw_input r = i < raw_.inputs.size() ? raw_.inputs[i] : raw_input{};
      input in;
      for (int d = 0; d < std::min<int>(r.rank, 3); ++d) in.shape.push_back(1 + r.dims[d] % 4);
      in.dtype = r.f32 ? mg::f32 : mg::f64;
      in.requires_grad = !r.constant || i == 0;
      const auto count =
          std::accumulate(in.shape.begin(), in.shape.end(), std::int64_t{1}, std::multiplies<>());
      for (std::int64_t e = 0; e < count; ++e) in.data.push_back(uniform(-1.5, 1.5));
      p_.inputs.push_back(in);
    }
    variant f64, declared;
    declared.f64 = false;
    const auto m = make_inputs_of(p_, f64), d = make_inputs_of(p_, declared);
    for (std::size_t i = 0; i < n; ++i) {
      slot sl;
      sl.m = m[i];
      sl.d = d[i];
      s_.push_back(sl);
      used_.push_back(false);
    }
  }
  static std::vector<mg::tensor> make_inputs_of(const program& p, const variant& v) {
    return mg_fuzz::make_inputs(p, v);
  }

  // The `pick`-th suitable value, counting from the latest; -1 if none.
  template <class Pred>
  int choose(std::uint8_t pick, Pred ok) const {
    std::vector<int> c;
    for (int j = static_cast<int>(s_.size()) - 1; j >= 0; --j)
      if (ok(j)) c.push_back(j);
    return c.empty() ? -1 : c[pick % c.size()];
  }
  int any(std::uint8_t pick) const {
    return choose(pick, [](int) { return true; });
  }

  // ---- the version model ----
  int add_node(std::string name, std::vector<int> next) {
    std::erase(next, -1);
    nodes_.push_back({std::move(next), {}, std::move(name)});
    return static_cast<int>(nodes_.size()) - 1;
  }
  int slot_of_impl(const mg::detail::tensor_impl* impl) const {
    for (std::size_t j = 0; j < s_.size(); ++j)
      if (s_[j].d.impl().get() == impl) return static_cast<int>(j);
    return -1;
  }
  // The node a value contributes when used now (a stale view is regenerated on its base).
  int effective(int j) {
    auto& sl = s_[j];
    const auto& impl = *sl.d.impl();
    if (impl.is_view && impl.store->version != sl.seen) {
      const int b = impl.base ? slot_of_impl(impl.base.get()) : -1;
      sl.seen = impl.store->version;
      // a base that no longer requires grad leaves the view without history
      if (b >= 0) sl.node = s_[b].d.requires_grad() ? add_node("as_strided", {effective(b)}) : -1;
    }
    return sl.d.requires_grad() ? sl.node : -1;
  }
  void save(int n, const mg::tensor& t, bool ambiguous = false) {
    nodes_[n].saved.push_back({t.impl()->store, t.impl()->store->version, ambiguous, false});
  }
  // Note [Lenient saves]: torch saves these, the library does not: pow(a, b)'s result when b
  // needs no gradient, the composites (logsumexp,
  // softmax, log_softmax and mse_loss are built of other ops, which save their own
  // intermediates) and the in-place ops whose gradient reads their result (exp_, sqrt_, tanh_,
  // sigmoid_, relu_ keep it apart from the tensor they write). Overwriting one may raise torch's
  // error or go on, and then the gradients must still be right (they are checked against
  // central differences). The `ambiguous` entries are where the library saves what torch does
  // not (docs/testing.md lists them): the generator never overwrites those.
  void save_lenient(int n, const mg::tensor& t) {
    nodes_[n].saved.push_back({t.impl()->store, t.impl()->store->version, false, true});
  }
  // An operand saved by an in-place op: at its version before the write.
  void save_before(int n, const mg::tensor& t, std::uint64_t version) {
    nodes_[n].saved.push_back({t.impl()->store, version, false});
  }
  // What torch saves (Note [Version model]); rg: which tensor operands require grad.
  void save_as_torch(int n, const instr& ins, const mg::tensor& result) {
    const auto opnd = [&](std::size_t i) -> const mg::tensor& { return s_[ins.in[i]].d; };
    const auto rg = [&](std::size_t i) { return opnd(i).requires_grad(); };
    switch (ins.o) {
      case op::number_div:  // torch: reciprocal(x) * n saves an intermediate; the library x
        save(n, opnd(0), true);
        break;
      case op::mul:
      case op::dot:
      case op::outer:
        if (rg(1)) save(n, opnd(0));
        if (rg(0)) save(n, opnd(1));
        break;
      case op::matmul: {
        const bool plain = opnd(0).dim() == 2 && opnd(1).dim() == 2;
        if (rg(1)) save(n, opnd(0), !plain);
        if (rg(0)) save(n, opnd(1), !plain);
        break;
      }
      case op::div:
        save(n, opnd(1));
        if (rg(1)) save(n, opnd(0));
        break;
      case op::maximum:
      case op::minimum:
      case op::atan2:
        save(n, opnd(0));
        save(n, opnd(1));
        break;
      case op::mse_loss:
        save_lenient(n, opnd(0));
        save_lenient(n, opnd(1));
        break;
      case op::pow_tensor:  // torch keeps the result even when only a requires grad
        save(n, opnd(0));
        save(n, opnd(1));
        if (rg(1))
          save(n, result);
        else
          save_lenient(n, result);
        break;
      case op::number_pow:
        save(n, opnd(0));
        save(n, result);
        break;
      case op::log:
      case op::log1p:
      case op::abs:
      case op::sin:
      case op::cos:
      case op::erf:
      case op::square:
      case op::softplus:
      case op::clamp:
      case op::pow_scalar:
      case op::var:
        save(n, opnd(0));
        break;
      case op::exp:
      case op::expm1:
      case op::sqrt:
      case op::rsqrt:
      case op::tan:
      case op::tanh:
      case op::sigmoid:
      case op::relu:
      case op::reciprocal:
        save(n, result);
        break;
      case op::softmax:
      case op::log_softmax:  // the library's max inside saves the input
        save(n, opnd(0), true);
        save_lenient(n, result);
        break;
      case op::cross_entropy:
        save(n, opnd(0), true);
        break;
      case op::prod:
      case op::norm:
        save(n, opnd(0));
        save(n, result);
        break;
      case op::logsumexp:
        save(n, opnd(0), true);
        save_lenient(n, result);
        break;
      case op::max:
      case op::min:
        if (!ins.flag) {  // along a dim torch and the library save the indices only
          save(n, opnd(0));
          save(n, result);
        }
        break;
      // in place: an op that reads the old value saves a copy of it (not versioned); mul_ and
      // div_ save their tensor operand (step)
      case op::exp_:
      case op::sqrt_:
      case op::tanh_:
      case op::sigmoid_:
      case op::relu_:
        save_lenient(n, result);
        break;
      default:
        break;
    }
  }
  // Whether writing t's storage now would overwrite a saved tensor (any node's).
  int conflict(const mg::tensor& t) const {
    int c = 0;
    for (const auto& n : nodes_)
      for (const auto& e : n.saved)
        if (e.store == t.impl()->store) c = std::max(c, e.ambiguous ? 2 : 1);
    return c;
  }
  // The set of values sharing j's storage, in one run.
  std::vector<int> aliases(int j, bool declared) const {
    std::vector<int> r;
    const auto& mine = declared ? s_[j].d : s_[j].m;
    for (std::size_t i = 0; i < s_.size(); ++i) {
      const auto& other = declared ? s_[i].d : s_[i].m;
      if (other.impl()->store == mine.impl()->store) r.push_back(static_cast<int>(i));
    }
    return r;
  }
  bool writable(int j) const {
    const auto& d = *s_[j].d.impl();
    const auto& m = *s_[j].m.impl();
    if (d.is_expanded() || m.is_expanded()) return false;
    if (aliases(j, true) != aliases(j, false)) return false;
    for (int a : aliases(j, true)) {
      if (s_[a].multi) return false;
      if (a < static_cast<int>(p_.inputs.size()) && p_.inputs[a].requires_grad) return false;
    }
    if (d.is_view) {
      const int b = d.base ? slot_of_impl(d.base.get()) : -1;
      if (b < 0 || !s_[b].d.is_contiguous() || !s_[b].m.is_contiguous()) return false;
    }
    return true;
  }

  // ---- building one instruction ----
  std::optional<instr> build(const raw_instr& r) {
    instr ins;
    ins.o = static_cast<op>(r.o % op_count);
    const auto k = [&](int i) { return static_cast<int>(r.k[i]); };
    const auto ak = [&](int i) { return std::abs(static_cast<int>(r.k[i])); };
    const bool b0 = r.bits & 1, b1 = r.bits & 2, b2 = r.bits & 4, b3 = r.bits & 8;
    const auto dim_of = [&](int j, int kk, bool negative) -> std::int64_t {
      const int d = mod(kk, static_cast<int>(rank(j)));
      return negative ? d - rank(j) : d;
    };
    const auto unary = [&] {
      ins.in = {any(r.pick[0])};
      return ins;
    };
    switch (ins.o) {
      case op::add:
      case op::sub:
      case op::mul:
      case op::div:
      case op::maximum:
      case op::minimum:
      case op::atan2:
      case op::pow_tensor:
      case op::mse_loss: {
        const int a = any(r.pick[0]);
        const int b = choose(r.pick[1], [&](int j) { return broadcastable(shape(a), shape(j)); });
        ins.in = {a, b};
        return ins;
      }
      case op::add_number:
      case op::mul_number:
      case op::number_sub:
        ins.num = k(0) / 8.0;
        return unary();
      case op::number_div:
        ins.num = k(0) == 0 ? 1.0 : k(0) / 8.0;
        return unary();
      case op::number_pow:
        ins.num = 0.5 + ak(0) / 16.0;
        return unary();
      case op::clamp:
        ins.num = -0.5 + k(0) / 16.0;
        ins.num2 = ins.num + 0.25 + ak(1) / 16.0;
        return unary();
      case op::pow_scalar:
        ins.num = pow_exponent(k(0));
        ins.flag = b0 && ins.num == std::floor(ins.num);
        return unary();
      case op::where: {
        const int a = any(r.pick[0]);
        const int b = choose(r.pick[1], [&](int j) { return broadcastable(shape(a), shape(j)); });
        const auto ab = broadcast(shape(a), shape(b));
        const int c = choose(r.pick[2], [&](int j) { return broadcastable(ab, shape(j)); });
        const auto abc = broadcast(ab, shape(c));
        const int d = choose(r.pick[3], [&](int j) { return broadcastable(abc, shape(j)); });
        ins.in = {a, b, c, d};
        ins.cmp = static_cast<comparison>(mod(k(0), 6));
        return ins;
      }
      case op::sum:
      case op::prod:
      case op::max:
      case op::min:
      case op::mean:
      case op::var:
      case op::norm:
      case op::logsumexp: {
        const int a = any(r.pick[0]);
        ins.in = {a};
        ins.flag = b0 && rank(a) > 0;
        ins.flag2 = ins.flag && b2;
        ins.ints = {ins.flag ? dim_of(a, k(0), b1) : 0};
        if (ins.o == op::var) {
          const auto count =
              ins.flag ? shape(a)[mod(k(0), static_cast<int>(rank(a)))] : s_[a].m.numel();
          ins.ints.push_back(!b3 && count > 1 ? 1 : 0);
        }
        return ins;
      }
      case op::topk: {
        const int a = choose(r.pick[0], [&](int j) { return rank(j) > 0; });
        if (a < 0) return {};
        ins.in = {a};
        const std::int64_t n = shape(a)[mod(k(0), static_cast<int>(rank(a)))];
        if (n == 0) return {};  // k = 0 and empty results: the op's own test has them
        ins.ints = {dim_of(a, k(0), b1), 1 + mod(k(1), static_cast<int>(n))};
        ins.flag = b0;  // largest
        return ins;
      }
      case op::argmax: {
        const int a = choose(r.pick[0], [&](int j) { return s_[j].m.numel() > 0; });
        if (a < 0) return {};
        ins.in = {a};
        ins.flag = b0 && rank(a) > 0;  // along a dim
        ins.flag2 = b2;                // argmin
        ins.ints = {ins.flag ? dim_of(a, k(0), b1) : 0, b3 ? 1 : 0};
        return ins;
      }
      case op::softmax:
      case op::log_softmax: {
        const int a = choose(r.pick[0], [&](int j) { return rank(j) > 0; });
        if (a < 0) return {};
        ins.in = {a};
        ins.ints = {dim_of(a, k(0), b1)};
        return ins;
      }
      case op::cross_entropy: {
        const int a = choose(r.pick[0], [&](int j) { return rank(j) == 1 || rank(j) == 2; });
        if (a < 0) return {};
        ins.in = {a};
        const auto c = shape(a).back();
        const auto n = rank(a) == 2 ? shape(a)[0] : 1;
        for (std::int64_t i = 0; i < n; ++i) ins.ints.push_back(mod(k(i % 4) + 3 * i, c));
        ins.flag = b0;
        return ins;
      }
      case op::expand: {
        const int a = any(r.pick[0]);
        ins.in = {a};
        if (b1) ins.ints.push_back(2);
        for (std::int64_t i = 0; i < rank(a); ++i)
          ins.ints.push_back(shape(a)[i] == 1 ? 1 + mod(k(i % 4), 3) : shape(a)[i]);
        ins.flag = b0;
        return ins;
      }
      case op::sum_to: {
        const int a = any(r.pick[0]);
        ins.in = {a};
        const int drop = mod(k(0), static_cast<int>(rank(a)) + 1);
        for (std::int64_t i = drop; i < rank(a); ++i)
          ins.ints.push_back((r.bits >> (i % 8)) & 1 ? 1 : shape(a)[i]);
        return ins;
      }
      case op::unsqueeze: {
        const int a = any(r.pick[0]);
        ins.in = {a};
        const int d = mod(k(0), static_cast<int>(rank(a)) + 1);
        ins.ints = {b1 ? d - rank(a) - 1 : d};
        return ins;
      }
      case op::t:
        ins.flag = b0;
        if (b0) {  // the member form: at most 2-D
          ins.in = {choose(r.pick[0], [&](int j) { return rank(j) <= 2; })};
          return ins;
        }
        return unary();
      case op::transpose:
      case op::permute:
      case op::slice:
      case op::select:
      case op::index_select:
      case op::unbind:
      case op::chunk:
      case op::split:
      case op::split_sizes: {
        const int a = choose(r.pick[0], [&](int j) { return rank(j) > 0; });
        if (a < 0) return {};
        ins.in = {a};
        const std::int64_t d = dim_of(a, k(0), b1);
        const std::int64_t n = shape(a)[mod(k(0), static_cast<int>(rank(a)))];
        switch (ins.o) {
          case op::transpose:
            ins.ints = {d, dim_of(a, k(1), b2)};
            break;
          case op::permute: {
            std::vector<std::int64_t> perm(rank(a));
            std::iota(perm.begin(), perm.end(), 0);
            std::shuffle(perm.begin(), perm.end(), std::mt19937(static_cast<unsigned>(ak(1))));
            ins.ints = perm;
            break;
          }
          case op::slice: {
            const std::int64_t start = mod(k(1), static_cast<int>(n));
            const std::int64_t end =
                b3 ? n + 3 : start + 1 + mod(k(2), static_cast<int>(n - start));
            ins.ints = {d, b2 ? start - n : start, end, 1 + mod(k(3), 2)};
            break;
          }
          case op::select: {
            const std::int64_t i = mod(k(1), static_cast<int>(n));
            ins.flag = b0;
            if (b0) {  // x[i]: along dim 0
              const auto n0 = shape(a)[0];
              const std::int64_t i0 = mod(k(1), static_cast<int>(n0));
              ins.ints = {0, b2 ? i0 - n0 : i0};
            } else {
              ins.ints = {d, b2 ? i - n : i};
            }
            break;
          }
          case op::index_select: {
            ins.ints = {d};
            const int count = 1 + mod(k(1), 4);
            for (int i = 0; i < count; ++i) ins.ints.push_back(mod(ak((i + 2) % 4) + 7 * i, n));
            ins.flag = b0;
            break;
          }
          case op::unbind:
            ins.ints = {d, mod(k(1), static_cast<int>(n))};
            break;
          case op::chunk:
          case op::split: {
            const std::int64_t param = 1 + mod(k(1), 3);
            const std::int64_t size = ins.o == op::split ? param : (n + param - 1) / param;
            const std::int64_t pieces = (n + size - 1) / size;
            ins.ints = {d, param, mod(k(2), static_cast<int>(pieces))};
            break;
          }
          case op::split_sizes: {
            if (n == 0) return {};  // no piece to pick
            std::vector<std::int64_t> sizes;
            std::int64_t left = n;
            std::mt19937 g(static_cast<unsigned>(ak(1)));
            while (left > 0) {
              const std::int64_t piece = 1 + static_cast<std::int64_t>(g() % left);
              sizes.push_back(piece);
              left -= piece;
            }
            if (b2)
              sizes.insert(sizes.begin() + static_cast<std::ptrdiff_t>(g() % sizes.size()), 0);
            std::vector<int> nonempty;
            for (std::size_t i = 0; i < sizes.size(); ++i)
              if (sizes[i] > 0) nonempty.push_back(static_cast<int>(i));
            ins.ints = {d, nonempty[mod(k(2), static_cast<int>(nonempty.size()))]};
            ins.ints.insert(ins.ints.end(), sizes.begin(), sizes.end());
            break;
          }
          default:
            break;
        }
        return ins;
      }
      case op::reshape:
      case op::view: {
        const int a = any(r.pick[0]);
        ins.in = {a};
        const std::int64_t n = s_[a].m.numel();
        switch (mod(k(0), 4)) {
          case 0:
            ins.ints = {n};
            break;
          case 1:
            ins.ints = {-1};
            break;
          case 2: {
            std::vector<std::int64_t> div;
            for (std::int64_t f = 1; f <= n; ++f)
              if (n % f == 0) div.push_back(f);
            const auto f = div[mod(k(1), static_cast<int>(div.size()))];
            ins.ints = {f, b0 ? -1 : n / f};
            break;
          }
          default: {
            ins.ints.assign(shape(a).begin(), shape(a).end());
            ins.ints.insert(ins.ints.begin() + mod(k(1), static_cast<int>(rank(a)) + 1), 1);
            break;
          }
        }
        if (ins.o == op::view) {  // only where both runs can view it
          for (bool declared : {false, true}) {
            const mg::tensor& x = declared ? s_[a].d : s_[a].m;
            mg::no_grad_guard ng;
            if (x.reshape(ins.ints).impl()->store != x.impl()->store) return {};
          }
        }
        return ins;
      }
      case op::flatten: {
        const int a = any(r.pick[0]);
        ins.in = {a};
        if (rank(a) == 0) {
          ins.ints = {0, -1};
        } else {
          const int start = mod(k(0), static_cast<int>(rank(a)));
          const int end = start + mod(k(1), static_cast<int>(rank(a)) - start);
          ins.ints = {start, b0 ? end - rank(a) : end};
        }
        return ins;
      }
      case op::squeeze: {
        const int a = any(r.pick[0]);
        ins.in = {a};
        ins.flag = b0 && rank(a) > 0;
        if (ins.flag) ins.ints = {dim_of(a, k(0), b1)};
        return ins;
      }
      case op::cat:
      case op::stack: {
        const bool cat = ins.o == op::cat;
        const int a = choose(r.pick[0], [&](int j) { return !cat || rank(j) > 0; });
        if (a < 0) return {};
        const int dm = mod(k(0), static_cast<int>(rank(a)) + (cat ? 0 : 1));
        const auto fits = [&](int j) {
          if (rank(j) != rank(a)) return false;
          for (std::int64_t i = 0; i < rank(a); ++i)
            if (shape(j)[i] != shape(a)[i] && !(cat && i == dm)) return false;
          return true;
        };
        ins.in = {a, choose(r.pick[1], fits)};
        if (b0) ins.in.push_back(choose(r.pick[2], fits));
        ins.ints = {b1 ? dm - rank(a) - (cat ? 0 : 1) : dm};
        return ins;
      }
      case op::matmul: {
        const int a = choose(r.pick[0], [&](int j) { return rank(j) > 0; });
        if (a < 0) return {};
        const auto& sa = shape(a);
        const auto inner = sa.back();
        const int b = choose(r.pick[1], [&](int j) {
          const auto& sb = shape(j);
          if (sb.empty() || s_[j].d.dtype() != s_[a].d.dtype()) return false;
          if ((sb.size() == 1 ? sb[0] : sb[sb.size() - 2]) != inner) return false;
          if (sa.size() > 2 && sb.size() > 2)
            return broadcastable(mg::shape_t(sa.begin(), sa.end() - 2),
                                 mg::shape_t(sb.begin(), sb.end() - 2));
          return true;
        });
        if (b < 0) return {};
        ins.in = {a, b};
        return ins;
      }
      case op::dot:
      case op::outer: {
        const int a = choose(r.pick[0], [&](int j) { return rank(j) == 1; });
        if (a < 0) return {};
        const int b = choose(r.pick[1], [&](int j) {
          return rank(j) == 1 && s_[j].d.dtype() == s_[a].d.dtype() &&
                 (ins.o == op::outer || shape(j)[0] == shape(a)[0]);
        });
        if (b < 0) return {};
        ins.in = {a, b};
        return ins;
      }
      case op::to_dtype:
        ins.ints = {b0 ? 1 : 0};
        return unary();
      case op::to_device:
        if (!device_available()) return {};
        return unary();
      case op::contiguous:
      case op::clone:
        ins.flag = b0;
        return unary();
      default:
        break;
    }
    // in place
    const int t = choose(r.pick[0], [&](int j) { return writable(j); });
    if (t < 0) return {};
    ins.in = {t};
    const auto fits_target = [&](int j) {
      return broadcastable(shape(t), shape(j)) && broadcast(shape(t), shape(j)) == shape(t);
    };
    switch (ins.o) {
      case op::add_:
      case op::sub_:
      case op::mul_:
      case op::div_:
        if (!b0) {
          const int b = choose(r.pick[1], fits_target);
          if (b < 0) return {};
          ins.in.push_back(b);
        } else {
          ins.num = ins.o == op::div_ && k(0) == 0 ? 1.5 : k(0) / 8.0;
        }
        return ins;
      case op::copy_: {
        const int b = choose(r.pick[1], fits_target);
        if (b < 0) return {};
        ins.in.push_back(b);
        return ins;
      }
      case op::pow_:
        ins.num = pow_exponent(k(0));
        return ins;
      case op::clamp_:
        ins.num = -0.5 + k(0) / 16.0;
        ins.num2 = ins.num + 0.25 + ak(1) / 16.0;
        return ins;
      case op::fill_:
        ins.num = k(0) / 8.0;
        return ins;
      default:
        return ins;
    }
  }

  // Whether the op's operands keep it where central differences hold (float64 values).
  // In both runs: rounding to float32 can move a value across a kink or break a tie.
  bool in_domain(const instr& ins) const { return in_domain(ins, false) && in_domain(ins, true); }
  bool in_domain(const instr& ins, bool declared) const {
    mg::no_grad_guard ng;
    const auto a = [&](std::size_t i) -> mg::tensor {
      const slot& sl = s_[ins.in[i]];
      return declared ? sl.d.detach().to(mg::f64) : sl.m;
    };
    switch (ins.o) {
      case op::div:
        return nonzero(a(1));
      case op::number_div:
      case op::reciprocal:
        return nonzero(a(0));
      case op::maximum:
      case op::minimum:
        return away(a(0) - a(1), 0);
      case op::where:
        return away(a(0) - a(1), 0);
      case op::atan2: {
        const auto y = values_of(a(0) + 0.0 * a(1)), x = values_of(a(1) + 0.0 * a(0));
        for (std::size_t i = 0; i < y.size(); ++i)
          if (y[i] * y[i] + x[i] * x[i] < margin * margin || (std::abs(y[i]) < margin && x[i] < 0))
            return false;
        return true;
      }
      case op::pow_tensor:
      case op::log:
      case op::sqrt:
      case op::rsqrt:
      case op::log_:
      case op::sqrt_:
        return above(a(0), 0);
      case op::log1p:
        return above(a(0), -1);
      case op::abs:
      case op::relu:
      case op::abs_:
      case op::relu_:
        return away(a(0), 0);
      case op::tan:
        return nonzero(mg::cos(a(0)), 0.2);
      case op::softplus:
        return away(a(0), 20);
      case op::clamp:
      case op::clamp_:
        return away(a(0), ins.num) && away(a(0), ins.num2);
      case op::pow_scalar:
      case op::pow_: {
        const double p = ins.num;
        if (p != std::floor(p)) return above(a(0), 0);
        return p >= 0 || nonzero(a(0));
      }
      case op::max:
      case op::min: {
        const mg::tensor x = a(0);
        const bool mx = ins.o == op::max;
        const mg::tensor e =
            ins.flag ? (mx ? mg::max(x, ins.ints[0], true).values
                     : mg::min(x, ins.ints[0], true).values)
                     : (mx ? mg::max(x) : mg::min(x));
        return away(x - e, 0);
      }
      case op::norm:
        return above(ins.flag ? mg::norm(a(0), ins.ints[0], false) : mg::norm(a(0)), 0);
      case op::topk:  // ranks that a perturbation cannot swap
        return distinct_along(a(0), ins.ints[0]);
      case op::argmax:
        return ins.flag ? distinct_along(a(0), ins.ints[0]) : distinct_along(a(0).flatten(), 0);
      case op::div_:
        return ins.in.size() < 2 || nonzero(a(1));
      default:
        return true;
    }
  }

  void step(const raw_instr& r) {
    std::optional<instr> built = build(r);
    if (!built) return;
    instr ins = *built;
    for (int j : ins.in)
      if (j < 0) return;
    if (!in_domain(ins)) return;
    std::vector<mg::tensor> m, d;
    for (const auto& sl : s_) {
      m.push_back(sl.m);
      d.push_back(sl.d);
    }
    const bool in_place = writes_in_place(ins.o);
    // the result, on copies when the op writes in place
    {
      mg::no_grad_guard ng;
      auto mc = m;
      auto dc = d;
      if (in_place) {
        mc[ins.in[0]] = mc[ins.in[0]].clone();
        dc[ins.in[0]] = dc[ins.in[0]].detach().clone();
      }
      if (!all_finite_within(mg_fuzz::apply(ins, mc, false, true), largest)) return;
      if (!all_finite_within(mg_fuzz::apply(ins, dc), largest * 10)) return;
    }
    if (in_place) {
      const int c = conflict(s_[ins.in[0]].d);
      if (c == 2 || (c == 1 && !(r.bits & 0x80))) return;
    }
    // the version model's edges, before the write changes any version
    std::vector<int> pre;
    for (std::size_t i = 0; i < ins.in.size(); ++i) pre.push_back(effective(ins.in[i]));
    const int target = in_place ? ins.in[0] : -1;
    int base = -1, base_node = -1;
    if (in_place && s_[target].d.impl()->is_view) {
      base = slot_of_impl(s_[target].d.impl()->base.get());
      base_node = effective(base);
    }

    std::vector<std::uint64_t> versions;
    for (int j : ins.in) versions.push_back(s_[j].d.impl()->store->version);
    mg::tensor rm, rd;
    {
      mg::no_grad_guard ng;
      rm = mg_fuzz::apply(ins, m, false, true);
    }
    rd = mg_fuzz::apply(ins, d);
    for (int j : ins.in) used_[j] = true;
    p_.code.push_back(ins);

    if (!in_place) {
      slot sl;
      sl.m = rm;
      sl.d = rd;
      sl.seen = rd.impl()->store->version;
      sl.multi = is_split(ins.o);
      for (int j : ins.in)
        if (s_[j].multi && rd.impl()->store == s_[j].d.impl()->store) sl.multi = true;
      const int same = slot_of_impl(rd.impl().get());
      if (same >= 0) {
        sl.node = s_[same].node;  // the op returned its operand itself
      } else if (rd.requires_grad()) {
        std::vector<int> next;
        // where's condition (a comparison of its first two operands) gets no gradient
        for (std::size_t i = ins.o == op::where ? 2 : 0; i < ins.in.size(); ++i)
          next.push_back(pre[i]);
        sl.node = add_node(name_of(ins.o), next);
        save_as_torch(sl.node, ins, rd);
      }
      s_.push_back(sl);
      used_.push_back(false);
      return;
    }
    // in place
    used_[target] = false;  // the written tensor is a result again
    if (!rd.requires_grad()) return;
    // every in-place node has an edge to the tensor's old history (copy_, fill_ and zero_
    // send it zeros, torch's CopyBackwards and FillBackward)
    std::vector<int> next;
    next.push_back(pre[0]);
    for (std::size_t i = 1; i < ins.in.size(); ++i) next.push_back(pre[i]);
    const int w = add_node(name_of(ins.o), next);
    // mul_ and div_ save their tensor operand as torch does (the old value is a copy)
    if (ins.in.size() > 1 && (ins.o == op::div_ || (ins.o == op::mul_ && pre[0] >= 0)))
      save_before(w, s_[ins.in[1]].d, versions[1]);
    save_as_torch(w, ins, rd);
    const auto* impl = s_[target].d.impl().get();
    const auto version = impl->store->version;
    if (base < 0) {
      for (auto& sl : s_)
        if (sl.d.impl().get() == impl) {
          sl.node = w;
          sl.seen = version;
        }
      return;
    }
    const int cs = add_node("copy_slices", {base_node, w});
    const auto* base_impl = s_[base].d.impl().get();
    for (auto& sl : s_)
      if (sl.d.impl().get() == base_impl) sl.node = cs;
    const int view_node = add_node("as_strided", {cs});
    for (auto& sl : s_)
      if (sl.d.impl().get() == impl) {
        sl.node = view_node;
        sl.seen = version;
      }
  }

  void finish() {
    // outputs: the values nothing read since they were last written, that require grad
    for (std::size_t j = 0; j < s_.size(); ++j)
      if (!used_[j] && s_[j].d.requires_grad()) p_.outputs.push_back(static_cast<int>(j));
    if (p_.outputs.size() > 4) p_.outputs.erase(p_.outputs.begin(), p_.outputs.end() - 4);
    if (p_.outputs.empty()) {
      for (int j = static_cast<int>(s_.size()) - 1; j >= 0 && p_.outputs.empty(); --j)
        if (s_[j].d.requires_grad()) p_.outputs.push_back(j);
    }
    for (int o : p_.outputs) {
      std::vector<double> w;
      for (std::int64_t e = 0; e < s_[o].m.numel(); ++e) w.push_back(uniform(-1, 1));
      p_.weights.push_back(w);
    }
    // the version model: what backward reaches from the loss
    std::vector<int> stack;
    for (int o : p_.outputs) stack.push_back(effective(o));
    std::set<int> seen;
    while (!stack.empty()) {
      const int n = stack.back();
      stack.pop_back();
      if (n < 0 || !seen.insert(n).second) continue;
      for (const auto& e : nodes_[n].saved) {
        if (e.store->version == e.version) continue;
        if (e.lenient)
          p_.version_error_allowed = true;
        else
          p_.expected_error = std::string("the saved tensor of ") + nodes_[n].name +
                              " was modified by an in-place operation";
      }
      for (int x : nodes_[n].next) stack.push_back(x);
    }
  }
};

}  // namespace

lowered lower(const raw_program& raw) { return builder(raw).run(); }

}  // namespace mg_fuzz
