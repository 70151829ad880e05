// nn::init: torch.nn.init's initialisers, with PyTorch's formulas (in double, as Python computes
// them) and draw order, so that the same seed gives the same weights bit for bit.
//
// Every initialiser fills its tensor in place under NoGradGuard (so it works on parameters)
// and returns it. `gen` null means the default generator (the one ember::manual_seed seeds).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "core/base/generator.h"
#include "core/tensor/tensor.h"

namespace ember::nn::init {

// Values drawn from U(a, b), N(mean, std), or set to a constant.
Tensor& uniform_(Tensor& tensor, double a = 0.0, double b = 1.0, Generator* gen = nullptr);
Tensor& normal_(Tensor& tensor, double mean = 0.0, double std = 1.0, Generator* gen = nullptr);
Tensor& constant_(Tensor& tensor, double value);
Tensor& zeros_(Tensor& tensor);
Tensor& ones_(Tensor& tensor);

// The recommended gain for a nonlinearity: 1 for "linear", the conv variants and "sigmoid";
// 5/3 for "tanh"; sqrt(2) for "relu"; sqrt(2 / (1 + slope^2)) for "leaky_relu" (slope = param,
// 0.01 when not given); 3/4 for "selu".
double calculate_gain(const std::string& nonlinearity, std::optional<double> param = std::nullopt);

// For a weight [out, in, k...]: fan_in = in * prod(k), fan_out = out * prod(k).
struct Fans {
  int64_t fan_in;
  int64_t fan_out;
};
Fans calculate_fan_in_and_fan_out(const Tensor& tensor);

// He et al. (2015): U(-bound, bound) with bound = gain * sqrt(3 / fan), or N(0, gain^2 / fan),
// where gain = calculate_gain(nonlinearity, a) and fan is fan_in or fan_out (mode).
// nn.Linear initialises its weight with kaiming_uniform_(weight, a = sqrt(5)).
// A tensor with no elements is left as is.
Tensor& kaiming_uniform_(Tensor& tensor, double a = 0.0, const std::string& mode = "fan_in",
                         const std::string& nonlinearity = "leaky_relu", Generator* gen = nullptr);
Tensor& kaiming_normal_(Tensor& tensor, double a = 0.0, const std::string& mode = "fan_in",
                        const std::string& nonlinearity = "leaky_relu", Generator* gen = nullptr);

// Glorot & Bengio (2010): std = gain * sqrt(2 / (fan_in + fan_out)); the uniform version draws
// from U(-sqrt(3) * std, sqrt(3) * std), the normal one from N(0, std^2).
Tensor& xavier_uniform_(Tensor& tensor, double gain = 1.0, Generator* gen = nullptr);
Tensor& xavier_normal_(Tensor& tensor, double gain = 1.0, Generator* gen = nullptr);

}  // namespace ember::nn::init
