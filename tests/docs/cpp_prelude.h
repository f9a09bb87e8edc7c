// cpp_prelude.h — what the documentation's C++ examples take as given: a model (the
// examples' CNN), an optimizer, a batch, a step count, a tensor requiring grad and a
// client. Included by the program tests/docs/cpp_examples.py writes.
#pragma once

#include <cstdio>
#include <iostream>

#include <torch/torch.h>

#include <tensorscope/tensorscope.h>

#include "cnn_model.h"

struct DocPrelude {
  tensorscope_examples::Cnn model;
  torch::optim::SGD optimizer{model->parameters(), torch::optim::SGDOptions(0.01)};
  torch::Tensor x = torch::randn({8, 1, 28, 28});
  torch::Tensor y = torch::randint(0, 10, {8});
  int steps = 3;
  torch::Tensor logits_tensor = torch::randn({8, 10}, torch::requires_grad());
  tensorscope::Client scope{tensorscope::ClientOptions().session("exp1").connect_timeout_ms(0)};
};
