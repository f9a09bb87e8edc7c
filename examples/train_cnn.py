#!/usr/bin/env python3
"""train_cnn.py — a small image classifier trained with tensorscope watching it (the
twin of examples/train_cnn.cc).

Every K-th step tensorscope sends:
  cnn.<layer>        the forward output of every layer with parameters  (track_model)
  cnn.<layer>.grad   the gradient at that output in backward            (track_layer)
  probe.fc1          a fixed probe's penultimate features, a t-SNE map coloured by class (push)
  loss, accuracy     two scalars pushed by hand                         (push)

Start a daemon for the same session first, then this script:
  build/bin/tensorscoped --config configs/default.yaml --session demo &
  PYTHONPATH=build/python /usr/bin/python3 examples/train_cnn.py --session demo
or let the client start one (--autostart). Without a daemon it trains all the same.
"""

import argparse
import os
import sys
import time

import torch
from torch import nn

import tensorscope

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cnn_model import Cnn, make_dataset  # noqa: E402

TRAIN_IMAGES = 8192
TEST_IMAGES = 1024
PROBE_IMAGES = 500  # held-out images whose features are drawn as a t-SNE map


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--session", default="demo", help="tensorscope session (the daemon's --session)")
    parser.add_argument("--steps", type=int, default=1000, help="training steps")
    parser.add_argument("--every-n", type=int, default=10, help="send tensors every K-th step")
    parser.add_argument("--batch", type=int, default=64, help="images per step")
    parser.add_argument("--lr", type=float, default=0.01, help="initial SGD learning rate (x0.7 every epoch)")
    parser.add_argument("--autostart", action="store_true", help="start tensorscoped when none serves the session")
    args = parser.parse_args()
    if args.steps <= 0 or args.every_n <= 0 or not 0 < args.batch <= TRAIN_IMAGES or args.lr <= 0:
        parser.error("steps, every-n, batch (at most 8192) and lr must be positive")

    torch.manual_seed(0)  # same data, weights and batches on every run
    # One client per process; nothing it does raises into or blocks the training loop.
    # (The tracks send every K-th step; the pushes below are made every K-th step.)
    scope = tensorscope.Client(args.session, autostart=args.autostart)
    model = Cnn()
    train_images, train_labels = make_dataset(TRAIN_IMAGES)
    test_images, test_labels = make_dataset(TEST_IMAGES)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9, weight_decay=1e-4)

    # Forward outputs of every layer with parameters and the gradients at those outputs,
    # every K-th step. include=/exclude= select layers, transform= reduces tensors
    # before they are copied, render_mode= picks how the daemon draws them.
    outputs = scope.track_model("cnn", model, every_n=args.every_n)
    gradients = scope.track_layer("cnn", model, every_n=args.every_n)
    # A fixed probe of held-out images: every K-th step their penultimate-layer features
    # are pushed with their labels and drawn as a t-SNE map, a point per image coloured by
    # its class. The same images each time, so the map is warm-started and moves only as
    # the representation does: the classes pull apart as training goes on, and the frames
    # say how far (their silhouette). (track_model(..., labels=lambda: labels) would send
    # the training batches' labels with every tracked output instead.)
    probe_images, probe_labels = test_images[:PROBE_IMAGES], test_labels[:PROBE_IMAGES]
    scope.set_render_mode("probe.fc1", "tsne")
    print(f"train_cnn.py: session {args.session}, {args.steps} steps, batch {args.batch}, "
          f"{len(outputs.streams) + len(gradients.streams)} tracked streams every {args.every_n} steps, "
          f"daemon {'connected' if scope.connected else 'not connected'}")

    batches_per_epoch = TRAIN_IMAGES // args.batch
    lr, loss_sum, accuracy_sum, reported = args.lr, 0.0, 0.0, 0
    start = time.monotonic()
    model.train()
    for step in range(args.steps):
        epoch, batch_index = step // batches_per_epoch + 1, step % batches_per_epoch
        if batch_index == 0:  # a new epoch: reshuffle, decay the rate, show both on every frame
            order = torch.randperm(TRAIN_IMAGES)
            if epoch > 1:
                lr *= 0.7
                for group in optimizer.param_groups:
                    group["lr"] = lr
            scope.set_label(f"epoch {epoch} lr {lr:.2g}")
        index = order[batch_index * args.batch:(batch_index + 1) * args.batch]
        images, labels = train_images[index], train_labels[index]

        optimizer.zero_grad()
        logits = model(images)
        loss = nn.functional.cross_entropy(logits, labels)
        loss.backward()
        optimizer.step()

        accuracy = logits.detach().argmax(1).eq(labels).float().mean()
        if step % args.every_n == 0:  # the steps the tracks send
            scope.push("loss", loss)  # sent detached: values, not graphs
            scope.push("accuracy", accuracy)
            push_probe(scope, model, probe_images, probe_labels)
        scope.next_step()  # stamped on everything sent from now on

        loss_sum += loss.item()
        accuracy_sum += accuracy.item()
        reported += 1
        if (step + 1) % 20 == 0 or step + 1 == args.steps:
            print(f"step {step + 1:5d}  epoch {epoch}  lr {lr:<7.2g}  loss {loss_sum / reported:.4f}  "
                  f"accuracy {accuracy_sum / reported:.3f}  (mean of the last {reported} steps)")
            loss_sum = accuracy_sum = 0.0
            reported = 0
    seconds = time.monotonic() - start

    # Evaluation: under no_grad() and eval(), the tracks leave its forwards out (they take
    # no training step's calls).
    model.eval()
    with torch.no_grad():
        test_accuracy = model(test_images).argmax(1).eq(test_labels).float().mean().item()
    print(f"trained {args.steps} steps in {seconds:.1f} s; test accuracy {test_accuracy:.3f}")
    print(scope.stats())
    scope.close()


def push_probe(scope, model, images, labels):
    """The probe's fc1 features (what the classifier's last layer sees, before its ReLU)
    with the images' labels, computed in eval mode (batch norm's running statistics are
    not updated) without gradients: the tracks leave it out (it is no training call)."""
    model.eval()
    with torch.no_grad():
        features = model.fc1(model.features(images).flatten(1))
    model.train()
    scope.push("probe.fc1", features, labels=labels)


if __name__ == "__main__":
    main()
