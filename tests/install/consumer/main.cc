// Links against an installed tensorscope and pushes with no daemon running.
#include <cstdio>

#include <torch/torch.h>

#include <tensorscope/tensorscope.h>

int main() {
  tensorscope::Client client(tensorscope::ClientOptions().session("consumer").every_n(2));
  const auto first = client.push("x", torch::ones({3}));
  const auto second = client.push("x", torch::ones({3}));
  std::printf("%s %s\n", tensorscope::to_string(first), tensorscope::to_string(second));
  return first == tensorscope::PushResult::kNotConnected && second == tensorscope::PushResult::kGated ? 0 : 1;
}
