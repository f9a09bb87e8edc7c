// cnn_model.h — the small CNN of the examples: an ordinary libtorch module, nothing
// tensorscope-specific in it (tracking needs no change to the model).
//
// Used by examples/train_cnn.cc and bench/track_bench.cc. Thread safety: a libtorch
// module (see libtorch).
#pragma once

#include <torch/torch.h>

namespace tensorscope_examples {

inline constexpr int64_t kImageSize = 28;
inline constexpr int64_t kClasses = 10;

// conv → batch norm → ReLU → max pool, twice, then two fully connected layers. The layers
// with parameters (conv1, bn1, conv2, bn2, fc1, fc2) become the tracked streams
// "cnn.features.conv1", ..., "cnn.fc2"; ReLU and pooling have no parameters and no stream.
struct CnnImpl : torch::nn::Module {
  CnnImpl()
      : features(register_module(
            "features",
            torch::nn::Sequential({{"conv1", torch::nn::Conv2d(torch::nn::Conv2dOptions(1, 8, 3).padding(1))},
                                   {"bn1", torch::nn::BatchNorm2d(8)},
                                   {"relu1", torch::nn::ReLU()},
                                   {"pool1", torch::nn::MaxPool2d(2)},  // 28x28 -> 14x14
                                   {"conv2", torch::nn::Conv2d(torch::nn::Conv2dOptions(8, 16, 3).padding(1))},
                                   {"bn2", torch::nn::BatchNorm2d(16)},
                                   {"relu2", torch::nn::ReLU()},
                                   {"pool2", torch::nn::MaxPool2d(2)}}))),  // 14x14 -> 7x7
        fc1(register_module("fc1", torch::nn::Linear(16 * 7 * 7, 64))),
        fc2(register_module("fc2", torch::nn::Linear(64, kClasses))) {}

  // images: [batch, 1, 28, 28] -> class scores (logits): [batch, 10]
  torch::Tensor forward(const torch::Tensor& images) {
    torch::Tensor x = features->forward(images).flatten(1);
    x = torch::relu(fc1->forward(x));
    return fc2->forward(x);
  }

  torch::nn::Sequential features;
  torch::nn::Linear fc1, fc2;
};
TORCH_MODULE(Cnn);  // Cnn: a shared handle to a CnnImpl, like torch::nn::Linear

}  // namespace tensorscope_examples
