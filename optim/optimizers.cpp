// The update rules. Each loop body is PyTorch 1.13's _single_tensor_<name> for one element,
// operation by operation in the parameter's type T (scalars such as alpha are rounded to T,
// as PyTorch passes them to its kernels), quoted in the comments, and each op rounded as
// PyTorch's CPU kernel rounds it (as Ember's own ops do, core/ops/arithmetic.cpp):
//   x.add_(y, alpha=a)         fma(y, a, x)       (ufunc::add is vec::fmadd(y, alpha, x))
//   x.addcmul_(y, z, value=v)  fma(v * y, z, x)   (x + v * y * z: GCC contracts the last * and +
//                                                 in PyTorch's AVX2-compiled kernels)
//   x.addcdiv_(y, z, value=v)  x + (v * y) / z    (no fma: the op before the + is a division)
//   x.mul_(a), sqrt, x / a     one rounding each
// (Rounding every product separately and computing x + v * (y / z) puts 2.7% of AdamW's
// parameters 1 ulp off PyTorch's at the first step, and a fifth of both moments from the
// second, with random float32 gradients.) tests/optim/test_optim_bits.cpp
// compares every bit with PyTorch's (tests/fixtures/optim_bits.txt, float32 and float64).
#include "optim/optimizers.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <vector>

#include "core/base/error.h"
#include "core/kernels/parallel_for.h"
#include "core/tensor/overlap.h"
#include "optim/update_kernels.h"

namespace ember::optim {

namespace {

double as_bool(bool b) { return b ? 1.0 : 0.0; }

[[noreturn]] void unknown_option(const char* optimizer, const std::string& name) {
  fail(optimizer, ": unknown option '", name, "' in a state dict");
}

template <typename Options>
const Options& options_of(const OptimizerOptions& o) {
  return static_cast<const Options&>(o);
}

// A state tensor (zeros like the parameter) created on first use.
Tensor& state_like(ParamState& state, const std::string& key, const Tensor& param,
                   double fill = 0.0) {
  auto it = state.find(key);
  if (it == state.end()) it = state.emplace(key, full(param.shape(), fill, param.dtype())).first;
  return it->second;
}

// The step counter, a 0-d tensor of the default dtype (torch.tensor(0.) in PyTorch 1.13);
// returns the new value.
double increment_step(ParamState& state) {
  auto it = state.find("step");
  if (it == state.end()) it = state.emplace("step", scalar_tensor(0.0)).first;
  const double step = it->second.item() + 1;
  it->second.fill_(step);
  return step;
}

template <typename Fn>
void for_floating(const Tensor& p, Fn&& fn) {
  dispatch_floating(p.dtype(), [&](auto tag) { fn(tag); });
}

}  // namespace

// ---------------------------------------------------------------- SGD

std::map<std::string, double> SGDOptions::to_map() const {
  return {{"lr", lr_},
          {"momentum", momentum_},
          {"dampening", dampening_},
          {"weight_decay", weight_decay_},
          {"nesterov", as_bool(nesterov_)},
          {"maximize", as_bool(maximize_)}};
}
void SGDOptions::set(const std::string& name, double v) {
  if (name == "lr")
    lr_ = v;
  else if (name == "momentum")
    momentum_ = v;
  else if (name == "dampening")
    dampening_ = v;
  else if (name == "weight_decay")
    weight_decay_ = v;
  else if (name == "nesterov")
    nesterov_ = v != 0;
  else if (name == "maximize")
    maximize_ = v != 0;
  else
    unknown_option("SGD", name);
}

// PyTorch's checks: `if not 0.0 <= lr: raise ValueError("Invalid learning rate: ...")` (so nan
// is refused too), the same for momentum and weight_decay.
void SGDOptions::validate() const {
  check(lr_ >= 0, "SGD: invalid learning rate: ", lr_);
  check(momentum_ >= 0, "SGD: invalid momentum value: ", momentum_);
  check(weight_decay_ >= 0, "SGD: invalid weight_decay value: ", weight_decay_);
  check(!nesterov_ || (momentum_ > 0 && dampening_ == 0),
        "SGD: nesterov momentum requires a momentum and zero dampening");
}

SGD::SGD(std::vector<ParamGroup> groups, const SGDOptions& options)
    : Optimizer(std::move(groups), options.clone()) {}

std::vector<std::string> SGD::required_state(const OptimizerOptions&) const { return {}; }
std::vector<std::string> SGD::known_state() const { return {"momentum_buffer"}; }

Tensor SGD::step(const std::function<Tensor()>& closure) {
  Tensor loss = run_closure(closure);
  // Without momentum, weight decay or maximize, PyTorch's SGD adds the gradient itself into the
  // parameter (param.add_(grad, alpha=-lr)), which refuses a gradient that partially overlaps it
  // (p.grad = p.detach().t()): an Error here too, raised before any parameter is updated. With
  // any of the three it adds a new tensor and computes, as the update here does.
  for (const ParamGroup& g : param_groups()) {
    const auto& opt = options_of<SGDOptions>(*g.options);
    if (opt.momentum() != 0 || opt.weight_decay() != 0 || opt.maximize()) continue;
    for (const Tensor& p : g.params) {
      const Tensor grad = p.grad();
      if (grad.defined()) assert_no_partial_overlap(p, grad, "SGD");
    }
  }
  for_each_param([](Tensor& param, const Tensor& grad, const OptimizerOptions& o,
                    ParamState& state) {
    const auto& opt = options_of<SGDOptions>(o);
    const bool first = opt.momentum() != 0 && !state.count("momentum_buffer");
    Tensor buffer = opt.momentum() != 0 ? state_like(state, "momentum_buffer", param) : Tensor();
    for_floating(param, [&](auto tag) {
      using T = decltype(tag);
      const SgdArrays<T> arrays{param.data_ptr<T>(), grad.data_ptr<T>(),
                                buffer.defined() ? buffer.data_ptr<T>() : nullptr};
      const SgdConstants<T> constants{static_cast<T>(opt.weight_decay()),
                                      static_cast<T>(opt.momentum()),
                                      static_cast<T>(1 - opt.dampening()),
                                      static_cast<T>(-opt.lr()),
                                      opt.maximize(),
                                      opt.weight_decay() != 0,
                                      first,
                                      opt.nesterov()};
      kernels::parallel_ranges(param.numel(), param.numel(), [&](int64_t i0, int64_t i1) {
        sgd_update(arrays, constants, i0, i1);
      });
    });
  });
  return loss;
}

// ---------------------------------------------------------------- Adam and AdamW

namespace {

template <typename Options>
std::map<std::string, double> adam_map(const Options& o) {
  return {{"lr", o.lr()},
          {"beta1", std::get<0>(o.betas())},
          {"beta2", std::get<1>(o.betas())},
          {"eps", o.eps()},
          {"weight_decay", o.weight_decay()},
          {"amsgrad", as_bool(o.amsgrad())},
          {"maximize", as_bool(o.maximize())}};
}

template <typename Options>
void adam_set(Options& o, const char* optimizer, const std::string& name, double v) {
  if (name == "lr")
    o.lr(v);
  else if (name == "beta1")
    o.betas({v, std::get<1>(o.betas())});
  else if (name == "beta2")
    o.betas({std::get<0>(o.betas()), v});
  else if (name == "eps")
    o.eps(v);
  else if (name == "weight_decay")
    o.weight_decay(v);
  else if (name == "amsgrad")
    o.amsgrad(v != 0);
  else if (name == "maximize")
    o.maximize(v != 0);
  else
    unknown_option(optimizer, name);
}

template <typename Options>
void check_adam(const char* optimizer, const Options& o) {
  const auto [b1, b2] = o.betas();
  check(o.lr() >= 0, optimizer, ": invalid learning rate: ", o.lr());
  check(o.eps() >= 0, optimizer, ": invalid epsilon value: ", o.eps());
  check(b1 >= 0 && b1 < 1, optimizer, ": invalid beta parameter at index 0: ", b1);
  check(b2 >= 0 && b2 < 1, optimizer, ": invalid beta parameter at index 1: ", b2);
  check(o.weight_decay() >= 0, optimizer, ": invalid weight_decay value: ", o.weight_decay());
}

// One Adam (decoupled = false) or AdamW (decoupled = true) step of a parameter group, in one
// pass over memory: every parameter's elements, cut into blocks of kAdamBlock, are shared out to
// the threads in one parallel loop (the hundreds of small biases and LayerNorm parameters of a
// GPT do not each start one), and each element reads param, grad and both moments once and
// writes them back once (adam_update, update_kernels.h: PyTorch 1.13's _single_tensor_adam(w)
// for one element, rounded as the top of this file says, on vectors; tests/optim/
// test_optim_bits.cpp compares the bits with PyTorch's, test_adam_fused.cpp with an op-by-op
// scalar loop at 1 and 2 threads).
struct AdamJob {
  Tensor param, grad, exp_avg, exp_avg_sq, max_sq;
  double beta1, beta2, lr, wd, eps, step_size, bias_correction2_sqrt;
  bool decoupled, maximize, amsgrad;
};

template <typename T>
void adam_range(const AdamJob& job, int64_t begin, int64_t end) {
  const AdamArrays<T> arrays{job.param.data_ptr<T>(), job.grad.data_ptr<T>(),
                             job.exp_avg.data_ptr<T>(), job.exp_avg_sq.data_ptr<T>(),
                             job.amsgrad ? job.max_sq.data_ptr<T>() : nullptr};
  const AdamConstants<T> constants{static_cast<T>(job.beta1),
                                   static_cast<T>(job.beta2),
                                   static_cast<T>(1 - job.beta1),
                                   static_cast<T>(1 - job.beta2),
                                   static_cast<T>(job.wd),
                                   static_cast<T>(1 - job.lr * job.wd),
                                   static_cast<T>(job.bias_correction2_sqrt),
                                   static_cast<T>(job.eps),
                                   static_cast<T>(-job.step_size),
                                   job.decoupled,
                                   job.maximize,
                                   job.amsgrad,
                                   !job.decoupled && job.wd != 0};
  adam_update(arrays, constants, begin, end);
}

constexpr int64_t kAdamBlock = int64_t{1} << 15;

// Collects every parameter's job (its step counter incremented, its moments created on first
// use), then runs all of them in one parallel loop over blocks.
template <typename Options>
void adam_step(
    const std::function<void(
        const std::function<void(Tensor&, const Tensor&, const OptimizerOptions&, ParamState&)>&)>&
        for_each,
    bool decoupled) {
  std::vector<AdamJob> jobs;
  for_each([&](Tensor& param, const Tensor& grad, const OptimizerOptions& o, ParamState& state) {
    const auto& opt = options_of<Options>(o);
    const double step = increment_step(state);  // step_t += 1
    AdamJob job;
    job.param = param;
    job.grad = grad;
    job.exp_avg = state_like(state, "exp_avg", param);
    job.exp_avg_sq = state_like(state, "exp_avg_sq", param);
    if (opt.amsgrad()) job.max_sq = state_like(state, "max_exp_avg_sq", param);
    job.beta1 = std::get<0>(opt.betas());
    job.beta2 = std::get<1>(opt.betas());
    job.lr = opt.lr();
    job.wd = opt.weight_decay();
    job.eps = opt.eps();
    const double bias_correction1 = 1 - std::pow(job.beta1, step);
    const double bias_correction2 = 1 - std::pow(job.beta2, step);
    job.step_size = job.lr / bias_correction1;
    job.bias_correction2_sqrt = std::sqrt(bias_correction2);
    job.decoupled = decoupled;
    job.maximize = opt.maximize();
    job.amsgrad = opt.amsgrad();
    jobs.push_back(std::move(job));
  });
  struct Block {
    std::size_t job;
    int64_t begin, end;
  };
  std::vector<Block> blocks;
  int64_t elements = 0;
  for (std::size_t j = 0; j < jobs.size(); ++j) {
    const int64_t n = jobs[j].param.numel();
    elements += n;
    for (int64_t b = 0; b < n; b += kAdamBlock)
      blocks.push_back({j, b, std::min(n, b + kAdamBlock)});
  }
  const auto update_blocks = [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      const Block& k = blocks[static_cast<std::size_t>(b)];
      const AdamJob& job = jobs[k.job];
      for_floating(job.param, [&](auto tag) { adam_range<decltype(tag)>(job, k.begin, k.end); });
    }
  };
  // Parameters that share memory (two leaves viewing one buffer, or one's gradient viewing
  // another's values) are updated one after another, as PyTorch's loop: the later one reads what
  // the earlier one wrote. Two threads would race on the shared elements.
  std::vector<UpdateTensors> updates(jobs.size());
  for (std::size_t j = 0; j < jobs.size(); ++j) {
    updates[j].written = {jobs[j].param};
    updates[j].read = {jobs[j].grad};
  }
  const auto n_blocks = static_cast<int64_t>(blocks.size());
  if (updates_overlap(updates)) {
    update_blocks(0, n_blocks);
  } else {
    kernels::parallel_ranges(n_blocks, elements, update_blocks);
  }
}

}  // namespace

std::map<std::string, double> AdamOptions::to_map() const { return adam_map(*this); }
void AdamOptions::validate() const { check_adam("Adam", *this); }
void AdamWOptions::validate() const { check_adam("AdamW", *this); }

namespace {
std::vector<std::string> adam_required(const OptimizerOptions& o) {
  std::vector<std::string> keys = {"step", "exp_avg", "exp_avg_sq"};
  if (o.to_map().at("amsgrad") != 0) keys.push_back("max_exp_avg_sq");
  return keys;
}
}  // namespace

std::vector<std::string> Adam::required_state(const OptimizerOptions& o) const {
  return adam_required(o);
}
std::vector<std::string> Adam::known_state() const {
  return {"step", "exp_avg", "exp_avg_sq", "max_exp_avg_sq"};
}
std::vector<std::string> AdamW::required_state(const OptimizerOptions& o) const {
  return adam_required(o);
}
std::vector<std::string> AdamW::known_state() const {
  return {"step", "exp_avg", "exp_avg_sq", "max_exp_avg_sq"};
}
void AdamOptions::set(const std::string& name, double v) { adam_set(*this, "Adam", name, v); }
std::map<std::string, double> AdamWOptions::to_map() const { return adam_map(*this); }
void AdamWOptions::set(const std::string& name, double v) { adam_set(*this, "AdamW", name, v); }

Adam::Adam(std::vector<ParamGroup> groups, const AdamOptions& options)
    : Optimizer(std::move(groups), options.clone()) {}

Tensor Adam::step(const std::function<Tensor()>& closure) {
  Tensor loss = run_closure(closure);
  adam_step<AdamOptions>([this](const auto& update) { for_each_param(update); },
                         /*decoupled=*/false);
  return loss;
}

AdamW::AdamW(std::vector<ParamGroup> groups, const AdamWOptions& options)
    : Optimizer(std::move(groups), options.clone()) {}

Tensor AdamW::step(const std::function<Tensor()>& closure) {
  Tensor loss = run_closure(closure);
  adam_step<AdamWOptions>([this](const auto& update) { for_each_param(update); },
                          /*decoupled=*/true);
  return loss;
}

// ---------------------------------------------------------------- RMSprop

std::map<std::string, double> RMSpropOptions::to_map() const {
  return {{"lr", lr_},
          {"alpha", alpha_},
          {"eps", eps_},
          {"weight_decay", weight_decay_},
          {"momentum", momentum_},
          {"centered", as_bool(centered_)},
          {"maximize", as_bool(maximize_)}};
}
void RMSpropOptions::set(const std::string& name, double v) {
  if (name == "lr")
    lr_ = v;
  else if (name == "alpha")
    alpha_ = v;
  else if (name == "eps")
    eps_ = v;
  else if (name == "weight_decay")
    weight_decay_ = v;
  else if (name == "momentum")
    momentum_ = v;
  else if (name == "centered")
    centered_ = v != 0;
  else if (name == "maximize")
    maximize_ = v != 0;
  else
    unknown_option("RMSprop", name);
}

void RMSpropOptions::validate() const {
  check(lr_ >= 0, "RMSprop: invalid learning rate: ", lr_);
  check(eps_ >= 0, "RMSprop: invalid epsilon value: ", eps_);
  check(momentum_ >= 0, "RMSprop: invalid momentum value: ", momentum_);
  check(weight_decay_ >= 0, "RMSprop: invalid weight_decay value: ", weight_decay_);
  check(alpha_ >= 0, "RMSprop: invalid alpha value: ", alpha_);
}

RMSprop::RMSprop(std::vector<ParamGroup> groups, const RMSpropOptions& options)
    : Optimizer(std::move(groups), options.clone()) {}

std::vector<std::string> RMSprop::required_state(const OptimizerOptions& o) const {
  const std::map<std::string, double> m = o.to_map();
  std::vector<std::string> keys = {"step", "square_avg"};
  if (m.at("momentum") > 0) keys.push_back("momentum_buffer");
  if (m.at("centered") != 0) keys.push_back("grad_avg");
  return keys;
}
std::vector<std::string> RMSprop::known_state() const {
  return {"step", "square_avg", "momentum_buffer", "grad_avg"};
}

Tensor RMSprop::step(const std::function<Tensor()>& closure) {
  Tensor loss = run_closure(closure);
  for_each_param(
      [](Tensor& param, const Tensor& grad, const OptimizerOptions& o, ParamState& state) {
        const auto& opt = options_of<RMSpropOptions>(o);
        increment_step(state);
        Tensor& square_avg = state_like(state, "square_avg", param);
        Tensor buffer = opt.momentum() > 0 ? state_like(state, "momentum_buffer", param) : Tensor();
        Tensor grad_avg = opt.centered() ? state_like(state, "grad_avg", param) : Tensor();
        for_floating(param, [&](auto tag) {
          using T = decltype(tag);
          const RmspropArrays<T> arrays{param.data_ptr<T>(), grad.data_ptr<T>(),
                                        square_avg.data_ptr<T>(),
                                        buffer.defined() ? buffer.data_ptr<T>() : nullptr,
                                        grad_avg.defined() ? grad_avg.data_ptr<T>() : nullptr};
          const RmspropConstants<T> constants{static_cast<T>(opt.alpha()),
                                              static_cast<T>(1 - opt.alpha()),
                                              static_cast<T>(opt.weight_decay()),
                                              static_cast<T>(opt.eps()),
                                              static_cast<T>(opt.momentum()),
                                              static_cast<T>(-opt.lr()),
                                              opt.maximize(),
                                              opt.weight_decay() != 0};
          kernels::parallel_ranges(param.numel(), param.numel(), [&](int64_t i0, int64_t i1) {
            rmsprop_update(arrays, constants, i0, i1);
          });
        });
      });
  return loss;
}

// ---------------------------------------------------------------- Adagrad

std::map<std::string, double> AdagradOptions::to_map() const {
  return {{"lr", lr_},
          {"lr_decay", lr_decay_},
          {"weight_decay", weight_decay_},
          {"initial_accumulator_value", initial_accumulator_value_},
          {"eps", eps_},
          {"maximize", as_bool(maximize_)}};
}
void AdagradOptions::set(const std::string& name, double v) {
  if (name == "lr")
    lr_ = v;
  else if (name == "lr_decay")
    lr_decay_ = v;
  else if (name == "weight_decay")
    weight_decay_ = v;
  else if (name == "initial_accumulator_value")
    initial_accumulator_value_ = v;
  else if (name == "eps")
    eps_ = v;
  else if (name == "maximize")
    maximize_ = v != 0;
  else
    unknown_option("Adagrad", name);
}

void AdagradOptions::validate() const {
  check(lr_ >= 0, "Adagrad: invalid learning rate: ", lr_);
  check(lr_decay_ >= 0, "Adagrad: invalid lr_decay value: ", lr_decay_);
  check(weight_decay_ >= 0, "Adagrad: invalid weight_decay value: ", weight_decay_);
  check(initial_accumulator_value_ >= 0,
        "Adagrad: invalid initial_accumulator_value value: ", initial_accumulator_value_);
  check(eps_ >= 0, "Adagrad: invalid epsilon value: ", eps_);
}

Adagrad::Adagrad(std::vector<ParamGroup> groups, const AdagradOptions& options)
    : Optimizer(std::move(groups), options.clone()) {}

std::vector<std::string> Adagrad::required_state(const OptimizerOptions&) const {
  return {"step", "sum"};
}
std::vector<std::string> Adagrad::known_state() const { return {"step", "sum"}; }

Tensor Adagrad::step(const std::function<Tensor()>& closure) {
  Tensor loss = run_closure(closure);
  for_each_param(
      [](Tensor& param, const Tensor& grad, const OptimizerOptions& o, ParamState& state) {
        const auto& opt = options_of<AdagradOptions>(o);
        Tensor& sum = state_like(state, "sum", param, opt.initial_accumulator_value());
        const double step = increment_step(state);  // step_t += 1
        const double clr = opt.lr() / (1 + (step - 1) * opt.lr_decay());
        for_floating(param, [&](auto tag) {
          using T = decltype(tag);
          const AdagradArrays<T> arrays{param.data_ptr<T>(), grad.data_ptr<T>(), sum.data_ptr<T>()};
          const AdagradConstants<T> constants{static_cast<T>(opt.weight_decay()),
                                              static_cast<T>(opt.eps()), static_cast<T>(-clr),
                                              opt.maximize(), opt.weight_decay() != 0};
          kernels::parallel_ranges(param.numel(), param.numel(), [&](int64_t i0, int64_t i1) {
            adagrad_update(arrays, constants, i0, i1);
          });
        });
      });
  return loss;
}

}  // namespace ember::optim
