// Running a program on the runtime engine, in one of several ways (a `variant`), and what a run
// gives: the loss, the gradients of the inputs that require grad, or the error it raised.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <metagrad/tensor.hpp>

#include "fuzz/program.hpp"

namespace mg_fuzz {

// How one run differs from the plain one. Every variant must give the plain run's gradients.
struct variant {
  bool f64 = true;  // every input in float64 (else each input's own dtype)
  mg::device device = mg::device::cpu;
  bool fuse = false;            // elementwise instructions run as mg::fuse nodes
  bool identity_hooks = false;  // a hook returning its gradient on every value that requires grad
  bool saved_hooks = false;     // identity pack/unpack hooks around the forward
  bool save_on_cpu = false;     // save_on_cpu_guard around the forward
  bool side_regions = false;    // extra work under no_grad and inference_mode between instructions
  bool reorder = false;         // independent instructions in another valid order
  bool other_thread = false;    // backward runs on another thread
  bool allow_mutation = false;  // allow_mutation_on_saved_tensors_guard around forward and backward
};

struct run_result {
  double loss = 0;
  std::vector<mg::tensor> grads;     // one per input that requires grad (undefined: not reached)
  std::optional<std::string> error;  // the mg::error the run raised, if any
};

// Whether this binary runs tensors on device cuda (one of its translation units registers the
// Thrust backend, on the CPU's OMP or CPP device system).
bool device_available();

// Whether the `fuse` variant runs instructions as mg::fuse nodes in this build.
bool fuse_available();

// The inputs as tensors of the variant's dtype and device (leaves; requires_grad per input).
std::vector<mg::tensor> make_inputs(const program& p, const variant& v,
                                    const std::vector<std::vector<double>>* data = nullptr);

// Applies one instruction to the values. Out of place: returns the new value; in place: writes
// values[in[0]] and returns it.
// all_f64: `to_dtype` converts to float64 whatever it names (the float64 run of a program).
mg::tensor apply(const instr& ins, const std::vector<mg::tensor>& values, bool fuse = false,
                 bool all_f64 = false);

// The loss of the program on these inputs (the values after the forward are left in *values).
mg::tensor forward(const program& p, const std::vector<mg::tensor>& inputs, const variant& v,
                   std::vector<mg::tensor>* values = nullptr);

// Forward and backward; gradients through .grad() of the inputs.
run_result run(const program& p, const variant& v);

// The loss in float64 without recording (for central differences), with the inputs' data given.
double loss_at(const program& p, const std::vector<std::vector<double>>& data);

// Values of a tensor as doubles, row-major.
std::vector<double> values_of(const mg::tensor& t);

// An order of the instructions other than the written one that a program must not notice:
// independent out-of-place instructions swapped, in-place writes kept in place.
std::vector<int> shuffled_order(const program& p, unsigned seed);

}  // namespace mg_fuzz
