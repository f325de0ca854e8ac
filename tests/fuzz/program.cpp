// Names of the vocabulary, and programs printed as mg code and as reproductions.
#include "fuzz/program.hpp"

#include <sstream>

namespace mg_fuzz {

const char* name_of(op o) {
  switch (o) {
#define MG_FUZZ_NAME(name, doc) \
  case op::name:                \
    return #name;
    MG_FUZZ_OPS(MG_FUZZ_NAME)
#undef MG_FUZZ_NAME
  }
  return "?";
}

const char* doc_name_of(op o) {
  switch (o) {
#define MG_FUZZ_DOC(name, doc) \
  case op::name:               \
    return doc;
    MG_FUZZ_OPS(MG_FUZZ_DOC)
#undef MG_FUZZ_DOC
  }
  return "?";
}

bool writes_in_place(op o) { return static_cast<int>(o) >= static_cast<int>(op::add_); }

const char* name_of(comparison c) {
  switch (c) {
    case comparison::gt: return "gt";
    case comparison::lt: return "lt";
    case comparison::ge: return "ge";
    case comparison::le: return "le";
    case comparison::eq: return "eq";
    case comparison::ne: return "ne";
  }
  return "?";
}

int program::value_count() const {
  int n = static_cast<int>(inputs.size());
  for (const auto& i : code)
    if (!writes_in_place(i.o)) ++n;
  return n;
}

std::vector<int> program::defined_values() const {
  std::vector<int> d;
  int next = static_cast<int>(inputs.size());
  for (const auto& i : code) d.push_back(writes_in_place(i.o) ? -1 : next++);
  return d;
}

namespace {

std::string list(const std::vector<std::int64_t>& v, std::size_t from = 0, std::size_t to = ~0u) {
  std::ostringstream s;
  s << "{";
  for (std::size_t i = from; i < v.size() && i < to; ++i) s << (i > from ? ", " : "") << v[i];
  s << "}";
  return s.str();
}

std::string num(double x) {
  std::ostringstream s;
  s.precision(17);
  s << x;
  std::string r = s.str();
  if (r.find_first_of(".e") == std::string::npos && r.find("inf") == std::string::npos) r += ".0";
  return r;
}

std::string dtype_name(mg::dtype d) { return d == mg::f32 ? "mg::f32" : "mg::f64"; }

// One instruction as the mg expression it evaluates.
std::string expression(const instr& ins) {
  std::ostringstream s;
  const auto a = [&](std::size_t i) { return "v" + std::to_string(ins.in.at(i)); };
  const auto& k = ins.ints;
  const std::string along = ins.flag ? ", " + std::to_string(k.empty() ? 0 : k[0]) + ", " +
                                           (ins.flag2 ? "true" : "false")
                                     : "";
  switch (ins.o) {
    case op::add: s << a(0) << " + " << a(1); break;
    case op::sub: s << a(0) << " - " << a(1); break;
    case op::mul: s << a(0) << " * " << a(1); break;
    case op::div: s << a(0) << " / " << a(1); break;
    case op::maximum: case op::minimum: case op::atan2:
      s << "mg::" << name_of(ins.o) << "(" << a(0) << ", " << a(1) << ")"; break;
    case op::pow_tensor: s << "mg::pow(" << a(0) << ", " << a(1) << ")"; break;
    case op::add_number: s << a(0) << " + " << num(ins.num); break;
    case op::mul_number: s << a(0) << " * " << num(ins.num); break;
    case op::number_sub: s << num(ins.num) << " - " << a(0); break;
    case op::number_div: s << num(ins.num) << " / " << a(0); break;
    case op::number_pow: s << "mg::pow(" << num(ins.num) << ", " << a(0) << ")"; break;
    case op::neg: s << "-" << a(0); break;
    case op::clamp:
      s << "mg::clamp(" << a(0) << ", " << num(ins.num) << ", " << num(ins.num2) << ")"; break;
    case op::pow_scalar:
      s << "mg::pow(" << a(0) << ", "
        << (ins.flag ? std::to_string(static_cast<int>(ins.num)) : num(ins.num)) << ")";
      break;
    case op::where:
      s << "mg::where(mg::" << name_of(ins.cmp) << "(" << a(0) << ", " << a(1) << "), " << a(2)
        << ", " << a(3) << ")";
      break;
    case op::sum: case op::prod: case op::max: case op::min: case op::mean: case op::norm:
    case op::logsumexp:
      s << "mg::" << name_of(ins.o) << "(" << a(0) << along << ")";
      if (ins.flag && (ins.o == op::max || ins.o == op::min)) s << ".values";
      break;
    case op::topk:
      s << "mg::topk(" << a(0) << ", " << k[1] << ", " << k[0] << ", "
        << (ins.flag ? "true" : "false") << ").values";
      break;
    case op::argmax:
      s << "mg::" << (ins.flag2 ? "argmin(" : "argmax(") << a(0);
      if (ins.flag) s << ", " << k[0] << ", " << (k[1] ? "true" : "false");
      s << ").to(" << a(0) << ".dtype())";
      break;
    case op::var:
      if (ins.flag)
        s << "mg::var(" << a(0) << ", " << k[0] << ", " << (k[1] ? "true" : "false") << ", "
          << (ins.flag2 ? "true" : "false") << ")";
      else
        s << "mg::var(" << a(0) << ", " << (k[1] ? "true" : "false") << ")";
      break;
    case op::softmax: case op::log_softmax:
      s << "mg::" << name_of(ins.o) << "(" << a(0) << ", " << k[0] << ")"; break;
    case op::mse_loss: s << "mg::mse_loss(" << a(0) << ", " << a(1) << ")"; break;
    case op::cross_entropy:
      if (ins.flag)
        s << "mg::cross_entropy(" << a(0) << ", std::vector<std::int64_t>" << list(k) << ")";
      else
        s << "mg::cross_entropy(" << a(0) << ", mg_fuzz::indices(" << list(k) << ", "
          << a(0) << ")" << ")";
      break;
    case op::expand:
      if (ins.flag) s << a(0) << ".expand(" << list(k) << ")";
      else s << "mg::expand(" << a(0) << ", " << list(k) << ")";
      break;
    case op::sum_to: s << "mg::sum_to(" << a(0) << ", " << list(k) << ")"; break;
    case op::unsqueeze: s << a(0) << ".unsqueeze(" << k[0] << ")"; break;
    case op::t: s << (ins.flag ? a(0) + ".t()" : "mg::transpose(" + a(0) + ")"); break;
    case op::transpose: s << a(0) << ".transpose(" << k[0] << ", " << k[1] << ")"; break;
    case op::permute: s << a(0) << ".permute(" << list(k) << ")"; break;
    case op::reshape: s << a(0) << ".reshape(" << list(k) << ")"; break;
    case op::view: s << a(0) << ".view(" << list(k) << ")"; break;
    case op::flatten: s << a(0) << ".flatten(" << k[0] << ", " << k[1] << ")"; break;
    case op::squeeze:
      s << a(0) << ".squeeze(" << (ins.flag ? std::to_string(k[0]) : "") << ")"; break;
    case op::slice:
      s << "mg::slice(" << a(0) << ", " << k[0] << ", " << k[1] << ", " << k[2] << ", " << k[3]
        << ")";
      break;
    case op::select:
      if (ins.flag) s << a(0) << "[" << k[1] << "]";
      else s << a(0) << ".select(" << k[0] << ", " << k[1] << ")";
      break;
    case op::index_select:
      if (ins.flag)
        s << a(0) << ".index_select(" << k[0] << ", mg_fuzz::indices(" << list(k, 1) << ", "
          << a(0) << "))";
      else
        s << "mg::index_select(" << a(0) << ", " << k[0] << ", " << list(k, 1) << ")";
      break;
    case op::cat: case op::stack:
      s << "mg::" << name_of(ins.o) << "({";
      for (std::size_t i = 0; i < ins.in.size(); ++i) s << (i ? ", " : "") << a(i);
      s << "}, " << k[0] << ")";
      break;
    case op::unbind: s << a(0) << ".unbind(" << k[0] << ")[" << k[1] << "]"; break;
    case op::chunk: s << a(0) << ".chunk(" << k[1] << ", " << k[0] << ")[" << k[2] << "]"; break;
    case op::split: s << a(0) << ".split(" << k[1] << ", " << k[0] << ")[" << k[2] << "]"; break;
    case op::split_sizes:
      s << "mg::split(" << a(0) << ", std::vector<std::int64_t>" << list(k, 2) << ", " << k[0]
        << ")[" << k[1] << "]";
      break;
    case op::matmul: case op::dot: case op::outer:
      s << "mg::" << name_of(ins.o) << "(" << a(0) << ", " << a(1) << ")"; break;
    case op::to_dtype: s << a(0) << ".to(" << (k[0] == 0 ? "mg::f32" : "mg::f64") << ")"; break;
    case op::to_device:
      s << a(0) << ".to(mg::device::cuda).to(mg::device::cpu)  /* there and back */";
      break;
    case op::contiguous: s << a(0) << ".contiguous()"; break;
    case op::clone: s << (ins.flag ? "mg::clone(" + a(0) + ")" : a(0) + ".clone()"); break;
    case op::add_: case op::sub_: case op::mul_: case op::div_:
      s << a(0) << "." << name_of(ins.o) << "(" << (ins.in.size() > 1 ? a(1) : num(ins.num))
        << ")";
      break;
    case op::pow_: case op::fill_:
      s << a(0) << "." << name_of(ins.o) << "(" << num(ins.num) << ")"; break;
    case op::clamp_:
      s << a(0) << ".clamp_(" << num(ins.num) << ", " << num(ins.num2) << ")"; break;
    case op::copy_: s << a(0) << ".copy_(" << a(1) << ")"; break;
    default:
      if (writes_in_place(ins.o)) s << a(0) << "." << name_of(ins.o) << "()";
      else s << "mg::" << name_of(ins.o) << "(" << a(0) << ")";
      break;
  }
  return s.str();
}

std::string shape_list(const mg::shape_t& s) {
  return list(std::vector<std::int64_t>(s.begin(), s.end()));
}

std::string doubles(const std::vector<double>& v) {
  std::ostringstream s;
  s << "{";
  for (std::size_t i = 0; i < v.size(); ++i) s << (i ? ", " : "") << num(v[i]);
  s << "}";
  return s.str();
}

}  // namespace

std::string to_mg_code(const program& p) {
  std::ostringstream s;
  for (std::size_t i = 0; i < p.inputs.size(); ++i)
    s << "auto v" << i << " = mg_fuzz::input(" << shape_list(p.inputs[i].shape) << ", "
      << dtype_name(p.inputs[i].dtype) << ", " << (p.inputs[i].requires_grad ? "true" : "false")
      << ", " << doubles(p.inputs[i].data) << ");\n";
  const auto defined = p.defined_values();
  for (std::size_t i = 0; i < p.code.size(); ++i) {
    if (defined[i] >= 0) s << "auto v" << defined[i] << " = ";
    s << expression(p.code[i]) << ";\n";
  }
  s << "auto loss = ";
  for (std::size_t k = 0; k < p.outputs.size(); ++k)
    s << (k ? " + " : "") << "mg::sum(v" << p.outputs[k] << " * w" << k << ")";
  s << ";  // w" << (p.outputs.size() > 1 ? "k" : "0")
    << ": fixed weights of the output's shape\nloss.backward();\n";
  return s.str();
}

std::string to_cpp(const program& p, const std::string& test_name, const std::string& failure) {
  std::ostringstream s;
  s << "// A program the fuzzer found (scripts/fuzz.sh). What failed:\n";
  std::istringstream f(failure.substr(0, failure.find("\nthe program:")));
  for (std::string line; std::getline(f, line);) s << "//   " << line << "\n";
  s << "//\n// The program, as mg code:\n";
  std::istringstream c(to_mg_code(p));
  for (std::string line; std::getline(c, line);) s << "//   " << line << "\n";
  s << "#include \"fuzz/reproduction.hpp\"\n\n";
  s << "TEST(FuzzRegression, " << test_name << ") {\n";
  s << "  mg_fuzz::program p;\n";
  for (const auto& in : p.inputs)
    s << "  p.inputs.push_back({" << shape_list(in.shape) << ", " << dtype_name(in.dtype) << ", "
      << (in.requires_grad ? "true" : "false") << ", " << doubles(in.data) << "});\n";
  for (const auto& ins : p.code) {
    s << "  p.code.push_back({mg_fuzz::op::" << name_of(ins.o) << ", {";
    for (std::size_t i = 0; i < ins.in.size(); ++i) s << (i ? ", " : "") << ins.in[i];
    s << "}, " << list(ins.ints) << ", " << num(ins.num) << ", " << num(ins.num2) << ", "
      << (ins.flag ? "true" : "false") << ", " << (ins.flag2 ? "true" : "false")
      << ", mg_fuzz::comparison::" << name_of(ins.cmp) << "});\n";
  }
  s << "  p.outputs = {";
  for (std::size_t k = 0; k < p.outputs.size(); ++k) s << (k ? ", " : "") << p.outputs[k];
  s << "};\n  p.weights = {";
  for (std::size_t k = 0; k < p.weights.size(); ++k) s << (k ? ", " : "") << doubles(p.weights[k]);
  s << "};\n";
  if (p.expected_error) {
    s << "  p.expected_error = \"";
    for (char ch : *p.expected_error) s << (ch == '"' || ch == '\\' ? "\\" : "") << ch;
    s << "\";\n";
  }
  if (p.version_error_allowed) s << "  p.version_error_allowed = true;\n";
  s << "  mg_fuzz::expect_passes(p);\n}\n";
  return s.str();
}

}  // namespace mg_fuzz
