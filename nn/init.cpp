// torch/nn/init.py (PyTorch 1.13), line for line; all arithmetic in double, as in Python.
#include "nn/init.h"

#include <cmath>

#include "core/base/grad_mode.h"
#include "core/base/shape.h"
#include "core/tensor/random.h"

namespace ember::nn::init {

Tensor& uniform_(Tensor& tensor, double a, double b, Generator* gen) {
  ember::detail::check_defined(tensor, "nn::init::uniform_");
  NoGradGuard no_grad;
  return ember::uniform_(tensor, a, b, gen);
}

Tensor& normal_(Tensor& tensor, double mean, double std, Generator* gen) {
  ember::detail::check_defined(tensor, "nn::init::normal_");
  NoGradGuard no_grad;
  return ember::normal_(tensor, mean, std, gen);
}

Tensor& constant_(Tensor& tensor, double value) {
  ember::detail::check_defined(tensor, "nn::init::constant_");
  NoGradGuard no_grad;
  return tensor.fill_(value);
}

Tensor& zeros_(Tensor& tensor) {
  ember::detail::check_defined(tensor, "nn::init::zeros_");
  return constant_(tensor, 0.0);
}
Tensor& ones_(Tensor& tensor) {
  ember::detail::check_defined(tensor, "nn::init::ones_");
  return constant_(tensor, 1.0);
}

double calculate_gain(const std::string& nonlinearity, std::optional<double> param) {
  const bool linear = nonlinearity == "linear" || nonlinearity == "conv1d" ||
                      nonlinearity == "conv2d" || nonlinearity == "conv3d" ||
                      nonlinearity == "conv_transpose1d" || nonlinearity == "conv_transpose2d" ||
                      nonlinearity == "conv_transpose3d";
  if (linear || nonlinearity == "sigmoid") return 1.0;
  if (nonlinearity == "tanh") return 5.0 / 3;
  if (nonlinearity == "relu") return std::sqrt(2.0);
  if (nonlinearity == "leaky_relu") {
    const double negative_slope = param.value_or(0.01);
    return std::sqrt(2.0 / (1 + std::pow(negative_slope, 2)));
  }
  if (nonlinearity == "selu") return 3.0 / 4;
  fail("calculate_gain: unsupported nonlinearity ", nonlinearity);
}

Fans calculate_fan_in_and_fan_out(const Tensor& tensor) {
  ember::detail::check_defined(tensor, "nn::init::calculate_fan_in_and_fan_out");
  check(tensor.dim() >= 2,
        "calculate_fan_in_and_fan_out: fan in and fan out can not be computed for tensor with "
        "fewer than 2 dimensions (got shape ",
        tensor.shape(), ")");
  int64_t receptive_field_size = 1;  // the kernel's size, for a conv weight [out, in, k...]
  // Checked: an empty tensor's other sizes may be huge ([0, 2^40, 2^40, 2^40]).
  const char* op = "calculate_fan_in_and_fan_out";
  for (int64_t d = 2; d < tensor.dim(); ++d)
    receptive_field_size = checked_mul(receptive_field_size, tensor.size(d), op);
  return {checked_mul(tensor.size(1), receptive_field_size, op),
          checked_mul(tensor.size(0), receptive_field_size, op)};
}

namespace {

int64_t correct_fan(const Tensor& tensor, const std::string& mode) {
  check(mode == "fan_in" || mode == "fan_out", "kaiming: mode ", mode,
        " not supported, please use one of fan_in, fan_out");
  const Fans fans = calculate_fan_in_and_fan_out(tensor);
  return mode == "fan_in" ? fans.fan_in : fans.fan_out;
}

}  // namespace

Tensor& kaiming_uniform_(Tensor& tensor, double a, const std::string& mode,
                         const std::string& nonlinearity, Generator* gen) {
  ember::detail::check_defined(tensor, "nn::init::kaiming_uniform_");
  if (tensor.numel() == 0) return tensor;  // PyTorch warns "a no-op" and returns
  const auto fan = static_cast<double>(correct_fan(tensor, mode));
  const double gain = calculate_gain(nonlinearity, a);
  const double std = gain / std::sqrt(fan);
  const double bound = std::sqrt(3.0) * std;  // the uniform bounds from the standard deviation
  return init::uniform_(tensor, -bound, bound, gen);
}

Tensor& kaiming_normal_(Tensor& tensor, double a, const std::string& mode,
                        const std::string& nonlinearity, Generator* gen) {
  ember::detail::check_defined(tensor, "nn::init::kaiming_normal_");
  if (tensor.numel() == 0) return tensor;
  const auto fan = static_cast<double>(correct_fan(tensor, mode));
  const double gain = calculate_gain(nonlinearity, a);
  const double std = gain / std::sqrt(fan);
  return init::normal_(tensor, 0.0, std, gen);
}

Tensor& xavier_uniform_(Tensor& tensor, double gain, Generator* gen) {
  ember::detail::check_defined(tensor, "nn::init::xavier_uniform_");
  const Fans fans = calculate_fan_in_and_fan_out(tensor);
  const double std = gain * std::sqrt(2.0 / static_cast<double>(fans.fan_in + fans.fan_out));
  const double a = std::sqrt(3.0) * std;  // the uniform bounds from the standard deviation
  return init::uniform_(tensor, -a, a, gen);
}

Tensor& xavier_normal_(Tensor& tensor, double gain, Generator* gen) {
  ember::detail::check_defined(tensor, "nn::init::xavier_normal_");
  const Fans fans = calculate_fan_in_and_fan_out(tensor);
  const double std = gain * std::sqrt(2.0 / static_cast<double>(fans.fan_in + fans.fan_out));
  return init::normal_(tensor, 0.0, std, gen);
}

}  // namespace ember::nn::init
