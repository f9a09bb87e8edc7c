// train_cnn — a small image classifier trained with tensorscope watching it.
//
// Trains a convolutional network on synthetic 28x28 images of ten classes (bars and blobs
// at class-dependent places, with noise) and lets tensorscope send, every K-th step:
//   cnn.<layer>        the forward output of every layer with parameters  (track_model)
//   cnn.<layer>.grad   the gradient at that output in backward            (track_layer)
//   probe.fc1          a fixed probe's penultimate features, a t-SNE map coloured by class (push)
//   loss, accuracy     two scalars pushed by hand                         (push)
// The model is an ordinary libtorch module: tracking needs no change to it.
//
// Start a daemon for the same session first, then this program:
//   tensorscoped --config configs/default.yaml --session demo &
//   train_cnn --session demo --steps 1000 --every-n 10 --batch 64
// Without a daemon the program trains all the same; pushes are counted as not connected.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include <torch/torch.h>

#include <tensorscope/tensorscope.h>

#include "cnn_model.h"

namespace {

constexpr int64_t kTrainImages = 8192;  // one epoch
constexpr int64_t kTestImages = 1024;
constexpr int64_t kProbeImages = 500;  // held-out images whose features are drawn as a t-SNE map

using tensorscope_examples::Cnn;
using tensorscope_examples::kClasses;
using tensorscope_examples::kImageSize;

// ---- synthetic data -----------------------------------------------------------------------

struct Dataset {
  torch::Tensor images;  // [count, 1, 28, 28] float
  torch::Tensor labels;  // [count] int64 in [0, 10)
};

// `count` images: classes 0-4 are a horizontal bar at row 4, 9, 14, 19 or 24; classes
// 5-9 a blob centred on one of the four quadrants or the middle. Each image is shifted by
// up to ±2 pixels, scaled by a random brightness and covered with Gaussian noise, so the
// task takes the network a few hundred steps to learn.
Dataset make_dataset(int64_t count) {
  const auto opts = torch::TensorOptions().dtype(torch::kFloat);
  const torch::Tensor labels = torch::randint(0, kClasses, {count}, torch::kLong);
  const torch::Tensor place = labels.remainder(5);  // which of the 5 places
  const torch::Tensor rows = torch::arange(kImageSize, opts).view({1, kImageSize, 1});
  const torch::Tensor cols = torch::arange(kImageSize, opts).view({1, 1, kImageSize});
  const torch::Tensor shift_row = torch::randint(-2, 3, {count, 1, 1}, opts);
  const torch::Tensor shift_col = torch::randint(-2, 3, {count, 1, 1}, opts);

  // A bar three pixels thick across the whole width.
  const torch::Tensor bar_row = (4 + 5 * place.to(torch::kFloat)).view({count, 1, 1}) + shift_row;
  const torch::Tensor bar = (rows - bar_row).abs().le(1).to(torch::kFloat).expand({count, kImageSize, kImageSize});

  // A Gaussian blob of radius ~3 pixels.
  const torch::Tensor blob_rows = torch::tensor({7.f, 7.f, 20.f, 20.f, 14.f});
  const torch::Tensor blob_cols = torch::tensor({7.f, 20.f, 7.f, 20.f, 14.f});
  const torch::Tensor centre_row = blob_rows.index_select(0, place).view({count, 1, 1}) + shift_row;
  const torch::Tensor centre_col = blob_cols.index_select(0, place).view({count, 1, 1}) + shift_col;
  const torch::Tensor blob =
      torch::exp(-((rows - centre_row).square() + (cols - centre_col).square()) / (2 * 3.0 * 3.0));

  const torch::Tensor is_bar = labels.lt(5).view({count, 1, 1});
  const torch::Tensor brightness = torch::empty({count, 1, 1}, opts).uniform_(0.4, 1.2);
  const torch::Tensor noise = 0.9 * torch::randn({count, kImageSize, kImageSize}, opts);
  const torch::Tensor images = torch::where(is_bar, bar, blob) * brightness + noise;
  return {images.unsqueeze(1), labels};
}

// ---- command line ---------------------------------------------------------------------------

struct Flags {
  std::string session = "demo";
  int64_t steps = 1000;
  int64_t every_n = 10;
  int64_t batch = 64;
  double lr = 0.01;
  bool autostart = false;
};

void usage(const char* program) {
  std::fprintf(stderr,
               "usage: %s [--session NAME] [--steps N] [--every-n K] [--batch B] [--lr LR] [--autostart]\n"
               "  --session  tensorscope session (the daemon's --session), default demo\n"
               "  --steps    training steps, default 1000\n"
               "  --every-n  send tensors every K-th step, default 10\n"
               "  --batch    images per step (at most 8192), default 64\n"
               "  --lr       initial learning rate of SGD, default 0.01 (x0.7 every epoch)\n"
               "  --autostart  start tensorscoped when none serves the session (videos under\n"
               "             ./tensorscope_runs/<session>/; it exits 30 s after training ends)\n",
               program);
}

bool parse_flags(int argc, char** argv, Flags* flags) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--autostart") {
      flags->autostart = true;
      continue;
    }
    if (arg == "--help" || arg == "-h" || i + 1 >= argc) return false;
    const char* value = argv[++i];
    if (arg == "--session")
      flags->session = value;
    else if (arg == "--steps")
      flags->steps = std::atoll(value);
    else if (arg == "--every-n")
      flags->every_n = std::atoll(value);
    else if (arg == "--batch")
      flags->batch = std::atoll(value);
    else if (arg == "--lr")
      flags->lr = std::atof(value);
    else
      return false;
  }
  return flags->steps > 0 && flags->every_n > 0 && flags->batch > 0 && flags->batch <= kTrainImages && flags->lr > 0;
}

// The probe's fc1 features (what the classifier's last layer sees, before its ReLU) with
// the images' labels. Computed without gradients, so the tracks leave it out (it is no
// training call), with the model in eval mode (batch norm's running statistics are not
// updated).
void push_probe(tensorscope::Client& scope, Cnn& model, const torch::Tensor& images, const torch::Tensor& labels) {
  model->eval();
  torch::Tensor features;
  {
    torch::NoGradGuard no_grad;
    features = model->fc1->forward(model->features->forward(images).flatten(1));
  }
  model->train();
  scope.push("probe.fc1", features, labels);
}

// Fraction of rows of `logits` whose largest score is at `labels`.
torch::Tensor accuracy_of(const torch::Tensor& logits, const torch::Tensor& labels) {
  return logits.argmax(1).eq(labels).to(torch::kFloat).mean();
}

}  // namespace

int main(int argc, char** argv) {
  Flags flags;
  if (!parse_flags(argc, argv, &flags)) {
    usage(argv[0]);
    return 2;
  }
  torch::manual_seed(0);  // same data, same initial weights, same batches on every run

  // -- tensorscope: one client per process. The tracks send every K-th step; the pushes
  //    below are made every K-th step (the client's every_n, default 1, would thin them
  //    out further). Nothing here ever throws into or blocks the training loop, daemon
  //    or not.
  tensorscope::Client scope(tensorscope::ClientOptions().session(flags.session).autostart(flags.autostart));

  Cnn model;
  const Dataset train = make_dataset(kTrainImages);
  const Dataset test = make_dataset(kTestImages);
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(flags.lr).momentum(0.9).weight_decay(1e-4));

  // -- tensorscope: forward outputs of every layer with parameters, and the gradients at
  //    those outputs, every K-th step (a track's every_n; 0 would take the client's).
  //    TrackOptions can also select layers (include/exclude regexes on the module path),
  //    reduce tensors before copying (transform) or pick a render mode. Destroying a
  //    handle stops its tracking.
  const auto track = tensorscope::TrackOptions().every_n(flags.every_n);
  tensorscope::TrackHandle outputs = scope.track_model("cnn", model, track);
  tensorscope::TrackHandle gradients = scope.track_layer("cnn", model, track);
  // A fixed probe of held-out images: every K-th step their penultimate-layer features
  // are pushed with their labels and drawn as a t-SNE map, a point per image coloured by
  // its class. The same images each time, so the map is warm-started and moves only as
  // the representation does: the classes pull apart as training goes on, and the frames
  // say how far (their silhouette). (TrackOptions().labels(...) would send the training
  // batches' labels with every tracked output instead.)
  const torch::Tensor probe_images = test.images.narrow(0, 0, kProbeImages);
  const torch::Tensor probe_labels = test.labels.narrow(0, 0, kProbeImages);
  scope.set_render_mode("probe.fc1", tensorscope::RenderMode::kTsne);
  for (const tensorscope::TrackHandle* handle : {&outputs, &gradients}) {
    if (!handle->ok()) std::fprintf(stderr, "tensorscope: tracking not set up: %s\n", handle->error().c_str());
  }

  // Give a daemon that is already running a moment to accept us, so that the first steps
  // are seen too (without one this waits 1 s and training goes on regardless).
  for (int i = 0; i < 100 && !scope.connected(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  std::printf("train_cnn: session %s, %lld steps, batch %lld, tensors sent every %lld steps, daemon %s\n",
              flags.session.c_str(), static_cast<long long>(flags.steps), static_cast<long long>(flags.batch),
              static_cast<long long>(flags.every_n), scope.connected() ? "connected" : "not connected");

  const int64_t batches_per_epoch = kTrainImages / flags.batch;
  torch::Tensor order;  // the current epoch's shuffled sample order
  double lr = flags.lr;
  double loss_sum = 0, accuracy_sum = 0;
  int64_t reported = 0;
  const auto start = std::chrono::steady_clock::now();
  model->train();
  for (int64_t step = 0; step < flags.steps; ++step) {
    const int64_t epoch = step / batches_per_epoch + 1;
    const int64_t batch_index = step % batches_per_epoch;
    if (batch_index == 0) {
      // A new epoch: reshuffle, lower the learning rate after the first, and show both on
      // every frame from now on.
      order = torch::randperm(kTrainImages, torch::kLong);
      if (epoch > 1) lr *= 0.7;
      for (auto& group : optimizer.param_groups()) {
        static_cast<torch::optim::SGDOptions&>(group.options()).lr(lr);
      }
      char label[64];
      std::snprintf(label, sizeof label, "epoch %lld lr %.2g", static_cast<long long>(epoch), lr);
      scope.set_label(label);
    }
    const torch::Tensor index = order.narrow(0, batch_index * flags.batch, flags.batch);
    const torch::Tensor images = train.images.index_select(0, index);
    const torch::Tensor labels = train.labels.index_select(0, index);

    // An ordinary training step; the tracks see the forward and backward passes.
    optimizer.zero_grad();
    const torch::Tensor logits = model->forward(images);
    const torch::Tensor loss = torch::nn::functional::cross_entropy(logits, labels);
    loss.backward();
    optimizer.step();

    // -- tensorscope: scalars by hand (detached: the client copies values, not graphs),
    //    then the next step, which is stamped on everything sent from now on.
    const torch::Tensor accuracy = accuracy_of(logits.detach(), labels);
    if (step % flags.every_n == 0) {  // the steps the tracks send
      scope.push("loss", loss.detach());
      scope.push("accuracy", accuracy);
      push_probe(scope, model, probe_images, probe_labels);
    }
    scope.next_step();

    loss_sum += loss.item<double>();
    accuracy_sum += accuracy.item<double>();
    ++reported;
    if ((step + 1) % 20 == 0 || step + 1 == flags.steps) {
      std::printf("step %5lld  epoch %lld  lr %-7.2g  loss %.4f  accuracy %.3f  (mean of the last %lld steps)\n",
                  static_cast<long long>(step + 1), static_cast<long long>(epoch), lr, loss_sum / reported,
                  accuracy_sum / reported, static_cast<long long>(reported));
      loss_sum = accuracy_sum = 0;
      reported = 0;
    }
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  // Evaluation on held-out images. Its forwards run without gradients, so the tracks
  // leave them out (TrackOptions::evaluation): they take no training step's calls.
  {
    torch::NoGradGuard no_grad;
    model->eval();
    const double test_accuracy = accuracy_of(model->forward(test.images), test.labels).item<double>();
    std::printf("train_cnn: %.1f s, %.1f ms/step; test accuracy %.3f on %lld held-out images\n", seconds,
                1e3 * seconds / flags.steps, test_accuracy, static_cast<long long>(kTestImages));
  }

  // -- tensorscope: what was sent, and every stream the tracks may send.
  const tensorscope::ClientStats s = scope.stats();
  std::printf("tensorscope: pushed %llu, gated %llu, dropped_full %llu, not_connected %llu, refused %llu, %.1f MB\n",
              static_cast<unsigned long long>(s.pushed), static_cast<unsigned long long>(s.gated),
              static_cast<unsigned long long>(s.dropped_full), static_cast<unsigned long long>(s.not_connected),
              static_cast<unsigned long long>(s.refused), s.bytes / 1e6);
  for (const std::string* note : {&s.connection_note, &s.shm_note, &s.autostart}) {
    if (!note->empty()) std::printf("tensorscope: %s\n", note->c_str());
  }
  std::printf("tensorscope: tracked streams:\n");
  for (const tensorscope::TrackedStream& stream : scope.tracked()) {
    std::printf("  %-28s %-10s module \"%s\"\n", stream.name.c_str(), stream.kind.c_str(), stream.module.c_str());
  }
  return 0;
}
