// train_push — a small training program that shows tensorscope's push API.
//
// Trains a two-layer MLP on a synthetic regression task and pushes, every step, the
// hidden activations, the output layer's weight and its gradient, and the loss. Start a
// daemon for the same session first (`tensorscoped --session demo ...`), or run it
// alone: pushes are then counted as not connected and training is unaffected.
//   train_push [--session NAME] [--steps N] [--every-n K]
#include <cstdio>
#include <cstdlib>
#include <chrono>
#include <string>
#include <thread>

#include <torch/torch.h>

#include <tensorscope/tensorscope.h>

int main(int argc, char** argv) {
  std::string session = "demo";
  int steps = 200;
  int every_n = 1;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string arg = argv[i];
    if (arg == "--session")
      session = argv[i + 1];
    else if (arg == "--steps")
      steps = std::atoi(argv[i + 1]);
    else if (arg == "--every-n")
      every_n = std::atoi(argv[i + 1]);
  }

  tensorscope::Client scope(tensorscope::ClientOptions().session(session).every_n(every_n));

  torch::manual_seed(0);
  torch::nn::Linear fc1(32, 64), fc2(64, 1);
  torch::optim::SGD optimizer({fc1->parameters()[0], fc1->parameters()[1], fc2->parameters()[0], fc2->parameters()[1]},
                              torch::optim::SGDOptions(0.05).momentum(0.9));
  const torch::Tensor true_w = torch::randn({32, 1});

  // Give the daemon a moment to accept us so that the first steps are seen too.
  for (int i = 0; i < 100 && !scope.connected(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  for (int step = 0; step < steps; ++step) {
    scope.set_step(step);
    scope.set_label(step < steps / 2 ? "warm-up" : "converging");
    const torch::Tensor x = torch::randn({128, 32});
    const torch::Tensor y = torch::matmul(x, true_w).tanh() + 0.05 * torch::randn({128, 1});

    optimizer.zero_grad();
    const torch::Tensor hidden = torch::relu(fc1->forward(x));
    const torch::Tensor prediction = fc2->forward(hidden);
    const torch::Tensor loss = torch::mse_loss(prediction, y);
    loss.backward();

    scope.push("fc1.out", hidden.detach());
    scope.push("fc2.weight", fc2->weight.detach());
    scope.push("fc2.weight.grad", fc2->weight.grad());
    scope.push("loss", loss.detach());
    optimizer.step();
    if (step % 50 == 0) std::printf("step %4d  loss %.4f\n", step, loss.item<float>());
  }
  const auto s = scope.stats();
  std::printf("tensorscope: pushed %llu, gated %llu, dropped_full %llu, not_connected %llu, refused %llu, %.1f MB\n",
              static_cast<unsigned long long>(s.pushed), static_cast<unsigned long long>(s.gated),
              static_cast<unsigned long long>(s.dropped_full), static_cast<unsigned long long>(s.not_connected),
              static_cast<unsigned long long>(s.refused), s.bytes / 1e6);
  return 0;
}
