// The autograd profiler (<metagrad/profiler.hpp>) and the graph picture (<metagrad/graph_dot.hpp>):
// exact event counts for known programs, shapes, nesting and self times, the table, the Chrome
// trace (checked by a strict JSON reader), user ranges, threads, NVTX ranges, and to_dot.
#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

// This file is the program's NVTX tool when CMake found the toolkit's nvtx3 (and so defined
// MG_WITH_NVTX): it defines nvtx3's static injection hook below (so the header must not define
// its weak default, and reads our declaration instead).
#if defined(MG_WITH_NVTX) && __has_include(<nvtx3/nvToolsExt.h>)
#include <cstdint>
#define NVTX_STATIC_INJECTION_IMPL
extern "C" int (*InitializeInjectionNvtx2_fnptr)(const void* (*)(std::uint32_t));
#endif

#include <metagrad/autograd.hpp>
#include <metagrad/function.hpp>
#include <metagrad/fuse.hpp>
#include <metagrad/graph_dot.hpp>
#include <metagrad/profiler.hpp>
#include <metagrad/tensor.hpp>

#include "support/harness_runtime.hpp"

using mg::tensor;
using mg::tensor_list;
using mg_test::expect_error;
namespace prof = mg::autograd::profiler;

namespace {

std::string bw(const std::string& node) { return "autograd::engine::evaluate_function: " + node; }

tensor leaf(std::initializer_list<double> v) { return tensor(v, mg::f64).requires_grad_(); }

std::map<std::string, int> count_by_name(const std::vector<prof::event>& events) {
  std::map<std::string, int> n;
  for (const auto& e : events) ++n[e.name];
  return n;
}

const prof::event& only(const std::vector<prof::event>& events, const std::string& name) {
  const prof::event* found = nullptr;
  for (const auto& e : events)
    if (e.name == name) {
      EXPECT_EQ(found, nullptr) << "two events named " << name;
      found = &e;
    }
  if (!found) throw std::runtime_error("no event named " + name);
  return *found;
}

// ---- a strict JSON reader (RFC 8259), enough to check the trace ------------------------------

struct json {
  enum kind { null, boolean, number, string, array, object } k = null;
  double num = 0;
  std::string str;
  std::vector<json> items;
  std::vector<std::string> keys;  // an object's members: keys[i] names values[i]
  std::vector<json> values;
  const json* get(const std::string& key) const {
    for (std::size_t i = 0; i < keys.size(); ++i)
      if (keys[i] == key) return &values[i];
    return nullptr;
  }
};

class json_reader {
 public:
  explicit json_reader(std::string text) : s_(std::move(text)) {}
  json document() {
    json v = value();
    ws();
    if (i_ != s_.size()) fail("trailing characters");
    return v;
  }

 private:
  [[noreturn]] void fail(const std::string& what) {
    throw std::runtime_error("JSON: " + what + " at offset " + std::to_string(i_));
  }
  void ws() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\n' || s_[i_] == '\r' || s_[i_] == '\t'))
      ++i_;
  }
  bool eat(char c) {
    ws();
    if (i_ < s_.size() && s_[i_] == c) {
      ++i_;
      return true;
    }
    return false;
  }
  void expect(char c) {
    if (!eat(c)) fail(std::string("expected '") + c + "'");
  }
  void literal(const char* word) {
    for (const char* p = word; *p; ++p, ++i_)
      if (i_ >= s_.size() || s_[i_] != *p) fail(std::string("bad literal, expected ") + word);
  }
  json value() {
    ws();
    if (i_ >= s_.size()) fail("unexpected end");
    json v;
    const char c = s_[i_];
    if (c == '{') {
      v.k = json::object;
      ++i_;
      if (eat('}')) return v;
      do {
        ws();
        std::string key = string_literal();
        expect(':');
        v.keys.push_back(std::move(key));
        v.values.push_back(value());
      } while (eat(','));
      expect('}');
    } else if (c == '[') {
      v.k = json::array;
      ++i_;
      if (eat(']')) return v;
      do v.items.push_back(value());
      while (eat(','));
      expect(']');
    } else if (c == '"') {
      v.k = json::string;
      v.str = string_literal();
    } else if (c == 't' || c == 'f') {
      v.k = json::boolean;
      literal(c == 't' ? "true" : "false");
    } else if (c == 'n') {
      literal("null");
    } else {
      v.k = json::number;
      v.num = number();
    }
    return v;
  }
  std::string string_literal() {
    if (i_ >= s_.size() || s_[i_] != '"') fail("expected a string");
    ++i_;
    std::string r;
    while (true) {
      if (i_ >= s_.size()) fail("unterminated string");
      const char c = s_[i_++];
      if (c == '"') return r;
      if (static_cast<unsigned char>(c) < 0x20) fail("control character in a string");
      if (c != '\\') {
        r += c;
        continue;
      }
      if (i_ >= s_.size()) fail("unterminated escape");
      const char e = s_[i_++];
      switch (e) {
        case '"':
        case '\\':
        case '/':
          r += e;
          break;
        case 'b':
          r += '\b';
          break;
        case 'f':
          r += '\f';
          break;
        case 'n':
          r += '\n';
          break;
        case 'r':
          r += '\r';
          break;
        case 't':
          r += '\t';
          break;
        case 'u': {
          if (i_ + 4 > s_.size()) fail("short \\u escape");
          unsigned code = 0;
          for (int k = 0; k < 4; ++k) {
            const char h = s_[i_++];
            if (!std::isxdigit(static_cast<unsigned char>(h))) fail("bad \\u escape");
            code = code * 16 + static_cast<unsigned>(std::isdigit(static_cast<unsigned char>(h))
                                                         ? h - '0'
                                                         : std::tolower(h) - 'a' + 10);
          }
          if (code >= 0x80) fail("non-ASCII \\u escape (not used by the trace)");
          r += static_cast<char>(code);
          break;
        }
        default:
          fail("bad escape");
      }
    }
  }
  double number() {
    const std::size_t b = i_;
    if (i_ < s_.size() && s_[i_] == '-') ++i_;
    const auto digits = [&] {
      const std::size_t d = i_;
      while (i_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[i_]))) ++i_;
      if (i_ == d) fail("expected digits");
      return i_ - d;
    };
    const std::size_t lead = i_;
    if (digits() > 1 && s_[lead] == '0') fail("leading zero");
    if (i_ < s_.size() && s_[i_] == '.') {
      ++i_;
      digits();
    }
    if (i_ < s_.size() && (s_[i_] == 'e' || s_[i_] == 'E')) {
      ++i_;
      if (i_ < s_.size() && (s_[i_] == '+' || s_[i_] == '-')) ++i_;
      digits();
    }
    return std::stod(s_.substr(b, i_ - b));
  }
  std::string s_;
  std::size_t i_ = 0;
};

json read_json_file(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return json_reader(ss.str()).document();
}

std::filesystem::path temp_file(const std::string& name) {
  return std::filesystem::temp_directory_path() /
         ("metagrad_profiler_test_" +
          std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + "_" + name);
}

// ---- the table ---------------------------------------------------------------------------------

double parse_time_us(const std::string& cell) {
  std::size_t used = 0;
  const double v = std::stod(cell, &used);
  const std::string unit = cell.substr(used);
  if (unit == "us") return v;
  if (unit == "ms") return v * 1e3;
  if (unit == "s") return v * 1e6;
  throw std::runtime_error("bad time cell: " + cell);
}

struct table_row {
  std::string name;
  std::vector<std::string> cells;  // the columns after Name
};

// The rows of a table: the lines between the second and third rule. The name column is as wide as
// the rule's first run of dashes; the other cells are separated by two or more spaces.
std::vector<table_row> parse_table(const std::string& table, std::vector<std::string>* header) {
  std::vector<std::string> lines;
  std::istringstream in(table);
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  std::vector<std::size_t> rules;
  for (std::size_t i = 0; i < lines.size(); ++i)
    if (!lines[i].empty() && lines[i][0] == '-') rules.push_back(i);
  EXPECT_EQ(rules.size(), 3u) << table;
  if (rules.size() != 3) return {};
  const std::size_t name_w = lines[rules[0]].find(' ');
  const auto split = [&](const std::string& line) {
    table_row r;
    r.name = line.substr(0, name_w);
    r.name.erase(r.name.find_last_not_of(' ') + 1);
    std::string rest = line.substr(name_w);
    std::size_t i = 0;
    while (i < rest.size()) {
      while (i < rest.size() && rest[i] == ' ') ++i;
      if (i >= rest.size()) break;
      std::size_t j = i;
      while (j < rest.size() && !(rest[j] == ' ' && j + 1 < rest.size() && rest[j + 1] == ' ')) ++j;
      r.cells.push_back(rest.substr(i, j - i));
      i = j;
    }
    return r;
  };
  if (header) {
    const table_row h = split(lines[rules[0] + 1]);
    *header = {h.name};
    header->insert(header->end(), h.cells.begin(), h.cells.end());
  }
  std::vector<table_row> rows;
  for (std::size_t i = rules[1] + 1; i < rules[2]; ++i) rows.push_back(split(lines[i]));
  return rows;
}

// The known program of the counting tests: 3 muls and 1 sum forward, x used twice.
tensor known_program(const tensor& x, const tensor& w) {
  tensor a = x * w;    // mul
  tensor b = a * x;    // mul
  tensor c = b * 2.0;  // mul (a number operand)
  return c.sum();      // sum
}

}  // namespace

// ---- counting ----------------------------------------------------------------------------------

TEST(Profiler, CountsEveryForwardOpAndBackwardNode) {
  tensor x = leaf({1., 2., 3.}), w = leaf({4., 5., 6.});
  prof::profile p;
  tensor y = known_program(x, w);
  const std::size_t forward_events = p.events().size();
  y.backward();
  p.stop();
  EXPECT_EQ(forward_events, 4u);  // nothing else ran forward
  const auto events = p.events();
  const auto avg = p.key_averages();
  EXPECT_EQ(avg.count("mul"), 3u);
  EXPECT_EQ(avg.count("sum"), 1u);
  EXPECT_EQ(avg.count(bw("sum")), 1u);
  EXPECT_EQ(avg.count(bw("mul")), 3u);
  EXPECT_EQ(avg.count(bw("accumulate_grad")), 2u);
  // The forward ops are the top-level op events recorded before backward started; what backward
  // ran itself (sum's backward expands g; x's two gradients are added) is nested or counted apart.
  std::map<std::string, int> top_ops;
  for (const auto& e : events)
    if (e.kind == prof::event_kind::op && e.parent == 0) ++top_ops[e.name];
  EXPECT_EQ(top_ops["mul"], 3);
  EXPECT_EQ(top_ops["sum"], 1);
  for (const auto& e : events) {
    if (e.kind != prof::event_kind::backward) continue;
    EXPECT_EQ(e.parent, 0u) << e.name;  // backward nodes run one after another, not nested
  }
  // and nothing else: sum's backward expands g (nested in its node), and the engine adds the two
  // gradients that reach x (between nodes), the second into the first in place (Note [Buffers
  // summed in place])
  EXPECT_EQ(count_by_name(events), (std::map<std::string, int>{{"mul", 3},
                                                               {"sum", 1},
                                                               {"expand", 1},
                                                               {"add_", 1},
                                                               {bw("mul"), 3},
                                                               {bw("sum"), 1},
                                                               {bw("accumulate_grad"), 2}}));
  EXPECT_EQ(only(events, "expand").parent, only(events, bw("sum")).id);
  EXPECT_EQ(only(events, "add_").parent, 0u);
  EXPECT_EQ(mg_test::values(x.grad()), (std::vector<double>{16, 40, 72}));  // 4 x w
}

// Seed (torch.autograd.profiler.profile): y = x ** 2; y.backward() inside the profile.
TEST(Profiler, SeedPowAndBackward) {
  tensor x = mg::randn({1, 1}, {.requires_grad = true});
  std::string printed;
  {
    prof::profile p;
    tensor y = mg::pow(x, 2);
    y.backward();
    std::ostringstream os;
    os << p;
    printed = os.str();
    const auto n = count_by_name(p.events());
    EXPECT_EQ(n,
              (std::map<std::string, int>{{"pow", 1}, {bw("pow"), 1}, {bw("accumulate_grad"), 1}}));
  }
  EXPECT_NE(printed.find("pow"), std::string::npos) << printed;
  EXPECT_NE(printed.find(bw("accumulate_grad")), std::string::npos) << printed;
}

namespace {
struct my_exp {
  static constexpr const char* name = "my_exp";
  static tensor forward(mg::context& ctx, const tensor& x) {
    tensor r = mg::exp(x);
    ctx.save_for_backward(r);
    return r;
  }
  static tensor_list backward(mg::context& ctx, const tensor_list& g) {
    auto [r] = ctx.saved_tensors<1>();
    return {g[0] * r};
  }
};
}  // namespace

TEST(Profiler, CustomFunctionsAndFusedOpsAreOps) {
  tensor x = leaf({0.5, 1.0});
  prof::profile p;
  tensor y = mg::apply<my_exp>(x);
  auto f = mg::fuse([](auto a, auto b) { return sum(a * b); });
  tensor z = f(y, x);
  z.backward();
  p.stop();
  const auto ev = p.events();
  const auto& op = only(ev, "my_exp");
  const auto& e = only(ev, "exp");
  EXPECT_EQ(e.parent, op.id);  // the op its forward ran is nested in it
  EXPECT_EQ(count_by_name(ev)["fused"], 1);
  const auto& node = only(ev, bw("my_exp"));
  EXPECT_EQ(node.kind, prof::event_kind::backward);
  int muls_in_backward = 0;
  for (const auto& m : ev)
    if (m.name == "mul" && m.parent == node.id) ++muls_in_backward;
  EXPECT_EQ(muls_in_backward, 1);  // g[0] * r, run by the custom backward
  EXPECT_EQ(count_by_name(ev)[bw("fused")], 1);
}

TEST(Profiler, InPlaceOpsAndListCatAreOps) {
  tensor x = leaf({1., 2.});
  prof::profile p{{.record_shapes = true}};
  tensor z = x * 1.0;
  z.add_(1.0);
  tensor c = mg::cat({z, x, x});
  p.stop();
  const auto ev = p.events();
  EXPECT_EQ(count_by_name(ev),
            (std::map<std::string, int>{{"mul", 1}, {"add_", 1}, {"add", 1}, {"cat", 1}}));
  EXPECT_EQ(only(ev, "add").parent, only(ev, "add_").id);  // the out-of-place op it runs
  EXPECT_EQ(only(ev, "add_").input_shapes, (std::vector<mg::shape_t>{{2}}));
  EXPECT_EQ(only(ev, "cat").input_shapes, (std::vector<mg::shape_t>{{2}, {2}, {2}}));
}

// ---- shapes ------------------------------------------------------------------------------------

TEST(Profiler, ShapesOnlyWhenAsked) {
  tensor x = leaf({1., 2., 3.}), w = leaf({4., 5., 6.});
  {
    prof::profile p;
    known_program(x, w);
    for (const auto& e : p.events()) EXPECT_TRUE(e.input_shapes.empty()) << e.name;
    const std::string t = p.key_averages().table();
    EXPECT_EQ(t.find("Input Shapes"), std::string::npos) << t;
    for (const auto& r : p.key_averages().rows()) EXPECT_EQ(r.input_shapes, "");
  }
  prof::profile p{{.record_shapes = true}};
  tensor y = known_program(x, w);
  y.backward();
  p.stop();
  const auto ev = p.events();
  std::vector<std::vector<mg::shape_t>> mul_shapes;
  for (const auto& e : ev)
    if (e.name == "mul" && e.parent == 0) mul_shapes.push_back(e.input_shapes);
  ASSERT_EQ(mul_shapes.size(), 3u);
  EXPECT_EQ(mul_shapes[0], (std::vector<mg::shape_t>{{3}, {3}}));
  EXPECT_EQ(mul_shapes[1], (std::vector<mg::shape_t>{{3}, {3}}));
  EXPECT_EQ(mul_shapes[2], (std::vector<mg::shape_t>{{3}, {}}));  // the number: 0-d
  EXPECT_EQ(only(ev, "sum").input_shapes, (std::vector<mg::shape_t>{{3}}));
  EXPECT_EQ(only(ev, bw("sum")).input_shapes, (std::vector<mg::shape_t>{{}}));  // g of a 0-d sum

  const auto avg = p.key_averages();
  EXPECT_EQ(avg.find("sum")->input_shapes, "[[3]]");
  EXPECT_EQ(avg.find("mul")->input_shapes, "mixed");
  EXPECT_FALSE(avg.find("no such op"));
  const std::string t = avg.table();
  EXPECT_NE(t.find("Input Shapes"), std::string::npos) << t;
  EXPECT_NE(t.find("[[3]]"), std::string::npos) << t;

  const auto by_shape = p.key_averages({.group_by_input_shape = true});
  std::map<std::string, std::size_t> muls;
  for (const auto& r : by_shape.rows())
    if (r.name == "mul") muls[r.input_shapes] += r.count;
  // the forward's, plus what backward multiplied (none: elementwise backward is one kernel)
  EXPECT_EQ(muls["[[3], [3]]"], 2u);
  EXPECT_EQ(muls["[[3], []]"], 1u);
  EXPECT_EQ(by_shape.count("mul"), 3u);
  EXPECT_NE(by_shape.table().find("[[3], []]"), std::string::npos);
}

// ---- the table ---------------------------------------------------------------------------------

TEST(Profiler, TableIsSortedByTotalTimeWithTorchColumns) {
  tensor x = mg::randn({64, 64}, {.requires_grad = true});
  prof::profile p{{.record_shapes = true}};
  for (int i = 0; i < 3; ++i) {
    prof::record_function r("step");
    tensor y = mg::sum(mg::tanh(mg::matmul(x, x)) * x);
    y.backward();
  }
  p.stop();
  const auto avg = p.key_averages();
  std::vector<std::string> header;
  const std::string text = avg.table();
  const auto rows = parse_table(text, &header);
  EXPECT_EQ(header,
            (std::vector<std::string>{"Name", "Self CPU %", "Self CPU", "CPU total %", "CPU total",
                                      "CPU time avg", "# of Calls", "Input Shapes"}));
  ASSERT_EQ(rows.size(), avg.rows().size()) << text;
  double previous = 1e300;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    ASSERT_GE(rows[i].cells.size(), 6u) << text;
    EXPECT_EQ(rows[i].name, avg.rows()[i].name.substr(0, rows[i].name.size()));
    const double total = parse_time_us(rows[i].cells[3]), self = parse_time_us(rows[i].cells[1]);
    EXPECT_LE(total, previous) << "row " << i << " out of order:\n" << text;
    EXPECT_LE(self, total + 1e-3) << rows[i].name;
    EXPECT_EQ(std::stoul(rows[i].cells[5]), avg.rows()[i].count);
    previous = total;
  }
  const auto step = avg.find("step");
  ASSERT_TRUE(step);
  EXPECT_EQ(step->count, 3u);
  EXPECT_LE(step->self_cpu_us, step->cpu_total_us);
  for (const auto& r : avg.rows()) {
    EXPECT_GE(r.self_cpu_us, 0.0) << r.name;
    EXPECT_LE(r.self_cpu_us, r.cpu_total_us + 1e-9) << r.name;
  }
  // the total of self times is the sum of the top-level events' durations on this one thread
  double top = 0;
  for (const auto& e : p.events())
    if (e.parent == 0) top += e.duration_us;
  EXPECT_NEAR(avg.self_cpu_total_us(), top, 1e-6 * top + 1e-6);
  EXPECT_NE(text.find("Self CPU time total: "), std::string::npos);

  // other sort keys and a row limit
  const auto by_count =
      parse_table(avg.table({.sort_by = prof::sort_key::count, .row_limit = 3}), nullptr);
  ASSERT_EQ(by_count.size(), 3u);
  EXPECT_GE(std::stoul(by_count[0].cells[5]), std::stoul(by_count[1].cells[5]));
  EXPECT_GE(std::stoul(by_count[1].cells[5]), std::stoul(by_count[2].cells[5]));
  const auto total = avg.total_average();
  std::size_t n = 0;
  for (const auto& r : avg.rows()) n += r.count;
  EXPECT_EQ(total.count, n);
  EXPECT_EQ(total.count, p.events().size());
}

TEST(Profiler, LongNamesAreCut) {
  prof::profile p;
  { prof::record_function r(std::string(100, 'n')); }
  const std::string t = p.key_averages().table({.max_name_width = 20});
  EXPECT_NE(t.find(std::string(17, 'n') + "..."), std::string::npos) << t;
  EXPECT_EQ(t.find(std::string(18, 'n')), std::string::npos) << t;
}

// ---- nesting and user ranges -------------------------------------------------------------------

TEST(Profiler, RecordFunctionRangesNestAndContainTheirOps) {
  tensor x = leaf({1., 2.}), w = leaf({3., 4.});
  prof::profile p;
  {
    prof::record_function outer("outer");
    tensor a = x * w;
    {
      prof::record_function inner("inner");
      tensor b = a + w;
    }
  }
  p.stop();
  const auto ev = p.events();
  ASSERT_EQ(ev.size(), 4u);
  const auto &outer = only(ev, "outer"), &inner = only(ev, "inner");
  const auto &mul = only(ev, "mul"), &add = only(ev, "add");
  EXPECT_EQ(outer.kind, prof::event_kind::user);
  EXPECT_EQ(outer.parent, 0u);
  EXPECT_EQ(inner.parent, outer.id);
  EXPECT_EQ(mul.parent, outer.id);
  EXPECT_EQ(add.parent, inner.id);
  const auto contains = [](const prof::event& o, const prof::event& i) {
    return o.start_us <= i.start_us && i.start_us + i.duration_us <= o.start_us + o.duration_us;
  };
  EXPECT_TRUE(contains(outer, inner));
  EXPECT_TRUE(contains(outer, mul));
  EXPECT_TRUE(contains(inner, add));
  EXPECT_FALSE(contains(inner, mul));
  // self = total minus the ranges nested directly inside, on the same thread
  EXPECT_NEAR(outer.self_us, outer.duration_us - mul.duration_us - inner.duration_us, 1e-6);
  EXPECT_NEAR(inner.self_us, inner.duration_us - add.duration_us, 1e-6);
  EXPECT_NEAR(add.self_us, add.duration_us, 1e-9);
  for (const auto& e : ev) {
    EXPECT_GE(e.duration_us, 0.0);
    EXPECT_GE(e.self_us, 0.0);
    EXPECT_LE(e.self_us, e.duration_us);
    EXPECT_EQ(e.thread, outer.thread);
  }
}

TEST(Profiler, WithoutAProfileNothingIsRecorded) {
  tensor x = leaf({1., 2.});
  {
    prof::record_function r("nobody listens");
    (x * x).sum().backward();
  }
  prof::profile p;
  (x * 3.0).sum();
  EXPECT_EQ(count_by_name(p.events()), (std::map<std::string, int>{{"mul", 1}, {"sum", 1}}));
}

TEST(Profiler, NothingIsRecordedAfterTheProfileStops) {
  tensor x = leaf({1., 2.});
  prof::profile p;
  tensor y = x * x;
  EXPECT_TRUE(p.recording());
  p.stop();
  EXPECT_FALSE(p.recording());
  y.sum().backward();
  { prof::record_function r("late"); }
  p.stop();  // twice: harmless
  EXPECT_EQ(count_by_name(p.events()), (std::map<std::string, int>{{"mul", 1}}));
  // a range open when the profile stops is dropped
  prof::profile q;
  {
    prof::record_function r("open at stop");
    q.stop();
  }
  EXPECT_TRUE(q.events().empty());
  // the next profile sees only its own events
  std::vector<prof::event> later;
  {
    prof::profile r;
    (x + 1.0).sum();
    later = r.events();
  }
  EXPECT_EQ(count_by_name(later), (std::map<std::string, int>{{"add", 1}, {"sum", 1}}));
  EXPECT_EQ(count_by_name(p.events()), (std::map<std::string, int>{{"mul", 1}}));
}

TEST(Profiler, DisabledProfileRecordsNothing) {
  tensor x = leaf({1., 2.});
  prof::profile off{{.enabled = false}};
  prof::profile on;  // a disabled profile does not take the slot
  (x * x).sum().backward();
  EXPECT_FALSE(off.recording());
  EXPECT_TRUE(off.events().empty());
  EXPECT_TRUE(off.key_averages().rows().empty());
  EXPECT_FALSE(on.events().empty());
}

TEST(Profiler, OneProfileAtATime) {
  prof::profile p;
  expect_error([] { prof::profile q; }, {"profile", "already recording", "stop()"});
  p.stop();
  prof::profile q;  // fine once the first stopped
  EXPECT_TRUE(q.recording());
}

TEST(Profiler, ThreadsRecordIntoOneProfile) {
  constexpr int threads = 4, steps = 25;
  prof::profile p;
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([t] {
      tensor x = mg::full({4}, 0.5 + t, {.dtype = mg::f64, .requires_grad = true});
      for (int s = 0; s < steps; ++s) {
        prof::record_function r("step");
        (x * x).sum().backward();
      }
    });
  for (auto& th : pool) th.join();
  p.stop();
  const auto ev = p.events();
  const auto n = count_by_name(ev);
  EXPECT_EQ(n.at("mul"), threads * steps);
  EXPECT_EQ(n.at("sum"), threads * steps);
  EXPECT_EQ(n.at("step"), threads * steps);
  EXPECT_EQ(n.at(bw("mul")), threads * steps);
  EXPECT_EQ(n.at(bw("accumulate_grad")), threads * steps);
  std::map<std::uint64_t, const prof::event*> by_id;
  std::map<std::uint32_t, int> per_thread;
  for (const auto& e : ev) {
    by_id[e.id] = &e;
    ++per_thread[e.thread];
  }
  EXPECT_EQ(by_id.size(), ev.size());  // ids are unique
  EXPECT_EQ(per_thread.size(), static_cast<std::size_t>(threads));
  for (const auto& e : ev) {
    if (e.name == "step") {
      EXPECT_EQ(e.parent, 0u);
    }
    if (e.name == "mul" || e.name == bw("mul")) {
      ASSERT_TRUE(by_id.count(e.parent)) << e.name;
      EXPECT_EQ(by_id[e.parent]->name, "step");
      EXPECT_EQ(by_id[e.parent]->thread, e.thread);  // nesting never crosses threads
    }
  }
}

// ---- the Chrome trace --------------------------------------------------------------------------

TEST(Profiler, ChromeTraceIsJsonWithOneCompleteEventPerRange) {
  tensor x = leaf({1., 2., 3.}), w = leaf({4., 5., 6.});
  prof::profile p{{.record_shapes = true}};
  {
    prof::record_function r("a \"quoted\" \\ name\twith\ncontrol characters");
    known_program(x, w).backward();
  }
  p.stop();
  const auto path = temp_file("trace.json");
  p.export_chrome_trace(path.string());
  const json doc = read_json_file(path);
  std::filesystem::remove(path);
  ASSERT_EQ(doc.k, json::object);
  const json* evs = doc.get("traceEvents");
  ASSERT_TRUE(evs && evs->k == json::array);
  const auto ev = p.events();
  ASSERT_EQ(evs->items.size(), ev.size());
  std::map<std::string, int> names;
  for (std::size_t i = 0; i < ev.size(); ++i) {
    const json& e = evs->items[i];
    ASSERT_EQ(e.k, json::object);
    EXPECT_EQ(e.get("ph")->str, "X");
    EXPECT_EQ(e.get("name")->str, ev[i].name);
    ++names[e.get("name")->str];
    EXPECT_EQ(e.get("ts")->k, json::number);
    EXPECT_GE(e.get("ts")->num, 0.0);
    EXPECT_GE(e.get("dur")->num, 0.0);
    EXPECT_NEAR(e.get("dur")->num, ev[i].duration_us, 1e-3);
    EXPECT_EQ(e.get("pid")->k, json::number);
    EXPECT_EQ(e.get("tid")->num, ev[i].thread);
    const json* shapes = e.get("args")->get("Input Shapes");
    ASSERT_TRUE(shapes && shapes->k == json::array);
    EXPECT_EQ(shapes->items.size(), ev[i].input_shapes.size());
  }
  EXPECT_EQ(names, count_by_name(ev));
  EXPECT_EQ(names["a \"quoted\" \\ name\twith\ncontrol characters"], 1);
  // what python3 and the browsers load, when a test asks for a copy (tests/runtime/CMakeLists.txt)
  if (const char* out = std::getenv("MG_PROFILER_TRACE_OUT")) p.export_chrome_trace(out);
}

TEST(Profiler, ChromeTraceErrorsNameThePathAndTheFix) {
  prof::profile p;
  (leaf({1.}) * 2.0).sum();
  p.stop();
  const std::string bad = "/nonexistent-metagrad-dir/trace.json";
  expect_error([&] { p.export_chrome_trace(bad); },
               {"export_chrome_trace", bad, "No such file or directory", "writable directory"});
  expect_error([&] { p.export_chrome_trace(""); }, {"export_chrome_trace", "empty"});
  // a profile that recorded nothing writes an empty, valid trace
  prof::profile off{{.enabled = false}};
  const auto path = temp_file("empty.json");
  off.export_chrome_trace(path.string());
  const json doc = read_json_file(path);
  std::filesystem::remove(path);
  EXPECT_TRUE(doc.get("traceEvents")->items.empty());
}

// ---- NVTX
// ----------------------------------------------------------------------------------------

#if MG_PROFILER_NVTX
// A static NVTX injection (nvtx3's documented tool interface): it records the ranges pushed.
namespace {
std::mutex nvtx_mutex;
std::vector<std::string> nvtx_log;  // "+name" on push, "-" on pop

int on_push(const char* name) {
  std::lock_guard lock(nvtx_mutex);
  nvtx_log.push_back(std::string("+") + name);
  return 0;
}
int on_pop() {
  std::lock_guard lock(nvtx_mutex);
  nvtx_log.emplace_back("-");
  return 0;
}
int inject_nvtx(NvtxGetExportTableFunc_t get_table) {
  const auto* cb = static_cast<const NvtxExportTableCallbacks*>(get_table(NVTX_ETID_CALLBACKS));
  NvtxFunctionTable table = nullptr;
  unsigned size = 0;
  if (!cb || !cb->GetModuleFunctionTable(NVTX_CB_MODULE_CORE, &table, &size)) return 0;
  *table[NVTX_CBID_CORE_RangePushA] = reinterpret_cast<NvtxFunctionPointer>(&on_push);
  *table[NVTX_CBID_CORE_RangePop] = reinterpret_cast<NvtxFunctionPointer>(&on_pop);
  return 1;
}
}  // namespace
extern "C" {
NvtxInitializeInjectionNvtxFunc_t InitializeInjectionNvtx2_fnptr = &inject_nvtx;
}
#endif

TEST(Profiler, EmitNvtxGuardPushesOneRangePerOpAndNode) {
  tensor x = leaf({1., 2., 3.}), w = leaf({4., 5., 6.});
  {
    prof::emit_nvtx_guard off(false);  // disabled: nothing
    prof::emit_nvtx_guard nvtx;
    prof::record_function r("user");
    known_program(x, w).backward();
  }
  (x * w).sum();  // after the guard: no ranges
  EXPECT_EQ(mg_test::values(x.grad()), (std::vector<double>{16, 40, 72}));
#if MG_PROFILER_NVTX
  static_assert(prof::emit_nvtx_guard::available);
  std::vector<std::string> log;
  {
    std::lock_guard lock(nvtx_mutex);
    log = nvtx_log;
  }
  // balanced, properly nested pushes and pops
  int depth = 0;
  std::map<std::string, int> pushed;
  for (const auto& s : log) {
    if (s == "-") {
      --depth;
      ASSERT_GE(depth, 0);
    } else {
      ++depth;
      ++pushed[s.substr(1)];
    }
  }
  EXPECT_EQ(depth, 0);
  EXPECT_EQ(log.front(), "+user");
  EXPECT_EQ(log.back(), "-");
  EXPECT_EQ(pushed["user"], 1);
  EXPECT_EQ(pushed["mul"], 3);
  EXPECT_EQ(pushed["sum"], 1);
  EXPECT_EQ(pushed[bw("mul")], 3);
  EXPECT_EQ(pushed[bw("sum")], 1);
  EXPECT_EQ(pushed[bw("accumulate_grad")], 2);
  // with a profile at the same time, both see the same ranges
  {
    std::lock_guard lock(nvtx_mutex);
    nvtx_log.clear();
  }
  prof::profile p;
  {
    prof::emit_nvtx_guard nvtx;
    (x * w).sum();
  }
  p.stop();
  std::lock_guard lock(nvtx_mutex);
  EXPECT_EQ(nvtx_log, (std::vector<std::string>{"+mul", "-", "+sum", "-"}));
  EXPECT_EQ(count_by_name(p.events()), (std::map<std::string, int>{{"mul", 1}, {"sum", 1}}));
#else
  static_assert(!prof::emit_nvtx_guard::available);
#endif
}

// ---- the graph picture
// ---------------------------------------------------------------------------

namespace {
std::size_t occurrences(const std::string& s, const std::string& what) {
  std::size_t n = 0;
  for (std::size_t i = s.find(what); i != std::string::npos; i = s.find(what, i + what.size())) ++n;
  return n;
}
}  // namespace

TEST(GraphDot, SmallGraphNodesEdgesShapesAndSavedTensors) {
  tensor x = leaf({1., 2., 3.}), w = leaf({4., 5., 6.});
  tensor m = x * w;
  tensor y = (m * 2.0).sum();
  const std::string dot = mg::autograd::to_dot({y});
  EXPECT_EQ(dot.rfind("digraph autograd {", 0), 0u) << dot;
  EXPECT_EQ(dot.substr(dot.size() - 2), "}\n");
  EXPECT_EQ(occurrences(dot, "[label="), 5u) << dot;  // sum, mul, mul, two leaves
  EXPECT_EQ(occurrences(dot, " -> "), 4u) << dot;     // sum<-mul, mul<-mul, mul<-x, mul<-w
  EXPECT_EQ(occurrences(dot, "\"output 0\\nsum\\n-> f64[]"), 1u) << dot;
  EXPECT_EQ(occurrences(dot, "darkolivegreen1"), 1u) << dot;
  EXPECT_EQ(occurrences(dot, "\"mul\\n-> f64[3]"), 2u) << dot;
  EXPECT_EQ(occurrences(dot, "leaf\\nf64[3]"), 2u) << dot;
  EXPECT_EQ(occurrences(dot, "lightblue"), 2u) << dot;
  EXPECT_EQ(occurrences(dot, "saved: f64[3] (leaf)"), 2u) << dot;  // x * w keeps both leaves
  EXPECT_EQ(occurrences(dot, "saved: number"), 0u) << dot;  // m * 2.0: the number is in the node
  EXPECT_EQ(occurrences(dot, "saved: f64[3] (shape only)"), 1u) << dot;  // sum: the shape
  EXPECT_EQ(mg::autograd::to_dot({y}, {.show_saved = false}).find("saved:"), std::string::npos);
  y.backward();
  const std::string after = mg::autograd::to_dot({y});
  EXPECT_EQ(occurrences(after, "saved: freed"), 2u) << after;  // x and w
  EXPECT_EQ(occurrences(after, "(shape only)"), 1u) << after;  // shapes are kept
}

// 0-d saved values: an input kept as its storage alone, an output, a view at an offset.
TEST(GraphDot, ZeroDSavedValues) {
  tensor x = leaf({1., 2.});
  tensor h = x * 3.0;
  tensor y = mg::sin(h.select(0, 1)) + mg::exp(h.sum());
  const std::string dot = mg::autograd::to_dot({y});
  EXPECT_EQ(occurrences(dot, "saved: f64[] (input)"), 1u) << dot;   // sin's, a view at offset 1
  EXPECT_EQ(occurrences(dot, "saved: f64[] (output)"), 1u) << dot;  // exp's
  tensor z = mg::sin(h.sum());
  EXPECT_EQ(occurrences(mg::autograd::to_dot({z}), "saved: f64[] (input)"), 1u);  // storage alone
}

TEST(GraphDot, SharedNodesOnceAndSeveralOutputs) {
  tensor x = leaf({1., 2.});
  tensor s = mg::sin(x);
  tensor a = s * s;  // one node, two edges to sin
  tensor b = s + 1.0;
  const std::string dot = mg::autograd::to_dot({a, b, x, tensor({1., 2.}, mg::f64)});
  EXPECT_EQ(occurrences(dot, "\"sin\\n"), 1u) << dot;
  EXPECT_EQ(occurrences(dot, "[label="), 5u) << dot;  // mul, add, sin, x's accumulator, plain
  EXPECT_EQ(occurrences(dot, " -> "), 4u) << dot;     // sin->mul twice, sin->add, x->sin
  EXPECT_NE(dot.find("output 0\\nmul"), std::string::npos) << dot;
  EXPECT_NE(dot.find("output 1\\nadd"), std::string::npos) << dot;
  EXPECT_NE(dot.find("output 2\\nleaf\\nf64[2]"), std::string::npos) << dot;
  EXPECT_NE(dot.find("output 3\\nf64[2]\\ndoes not require grad"), std::string::npos) << dot;
  expect_error([] { mg::autograd::to_dot({tensor{}}); }, {"to_dot", "output 0", "undefined"});
}

TEST(GraphDot, LongChainWithoutRecursion) {
  constexpr int n = 200000;
  tensor x = leaf({1.});
  tensor y = x;
  for (int i = 0; i < n; ++i) y = y * 1.0;
  const std::string dot = mg::autograd::to_dot({y});
  EXPECT_EQ(occurrences(dot, "[label="), static_cast<std::size_t>(n + 1));
  EXPECT_EQ(occurrences(dot, " -> "), static_cast<std::size_t>(n));
}
