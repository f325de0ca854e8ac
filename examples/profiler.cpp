// docs/runtime.md, "Profiler" and "Graph picture": a small training step profiled, its table
// printed, its trace written, and the graph of its loss drawn as Graphviz text.
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>

#include <metagrad/metagrad.hpp>

int main() {
  const auto dir = std::filesystem::temp_directory_path();
  const std::string trace_path = (dir / "metagrad_example_trace.json").string();
  const std::string dot_path = (dir / "metagrad_example_graph.dot").string();
  mg::manual_seed(0);
  auto x = mg::randn({32, 16});
  auto w = mg::randn({16, 4}, {.requires_grad = true});
  auto b = mg::zeros({4}, {.requires_grad = true});

  // example-begin profiler
  namespace prof = mg::autograd::profiler;
  prof::profile p{{.record_shapes = true}};
  for (int step = 0; step < 3; ++step) {
    prof::record_function r("step");
    auto loss = mg::mean(mg::tanh(mg::matmul(x, w) + b) * 0.5);
    loss.backward();
  }
  p.stop();
  std::cout << p.key_averages().table({.row_limit = 8});
  p.export_chrome_trace(trace_path);  // open in ui.perfetto.dev or chrome://tracing

  auto row = p.key_averages().find("tanh");  // row->count == 3, row->cpu_total_us ...
  // example-end profiler

  // example-begin graph-dot
  auto loss = mg::mean(mg::tanh(mg::matmul(x, w) + b) * 0.5);
  std::ofstream(dot_path) << mg::autograd::to_dot({loss});  // dot -Tsvg graph.dot -o graph.svg
  // example-end graph-dot

  std::cout << "tanh calls: " << row->count << "\n"
            << "graph: " << mg::autograd::to_dot({loss}).size() << " bytes of dot\n";
  std::filesystem::remove(trace_path);
  std::filesystem::remove(dot_path);
}
