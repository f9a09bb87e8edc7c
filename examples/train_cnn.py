#!/usr/bin/env python3
"""train_cnn.py — a small image classifier trained with tensorscope watching it (the
twin of examples/train_cnn.cc).

Every K-th step tensorscope sends:
  cnn.<layer>        the forward output of every layer with parameters  (track_model)
  cnn.<layer>.grad   the gradient at that output in backward            (track_layer)
  classes.fc1        the penultimate layer's output as a PCA, coloured by class (labels=)
  loss, accuracy     two scalars pushed by hand                         (push)

Start a daemon for the same session first, then this script:
  build/bin/tensorscoped --config configs/default.yaml --output runs --session demo &
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
    scope = tensorscope.Client(args.session, every_n=args.every_n, autostart=args.autostart)
    model = Cnn()
    train_images, train_labels = make_dataset(TRAIN_IMAGES)
    test_images, test_labels = make_dataset(TEST_IMAGES)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9, weight_decay=1e-4)

    # Forward outputs of every layer with parameters and the gradients at those outputs,
    # every K-th step. include=/exclude= select layers, transform= reduces tensors
    # before they are copied, render_mode= picks how the daemon draws them.
    outputs = scope.track_model("cnn", model, every_n=args.every_n)
    gradients = scope.track_layer("cnn", model, every_n=args.every_n)
    # The penultimate layer projected on its top two principal components, each image a
    # point coloured by its class (labels= gives the batch's labels): the classes pull
    # apart as training goes on, and the frames say how far (their silhouette).
    classes = scope.track_model("classes", model, include="^fc1$", every_n=args.every_n, render_mode="pca",
                                tree_log=False, labels=lambda: labels)
    print(f"train_cnn.py: session {args.session}, {args.steps} steps, batch {args.batch}, "
          f"{len(outputs.streams) + len(gradients.streams) + len(classes.streams)} tracked streams every "
          f"{args.every_n} steps, "
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
        scope.push("loss", loss)  # sent detached: values, not graphs
        scope.push("accuracy", accuracy)
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

    # Evaluation: tracking off, or the tracked layers would send its outputs as training's.
    scope.enabled = False
    model.eval()
    with torch.no_grad():
        test_accuracy = model(test_images).argmax(1).eq(test_labels).float().mean().item()
    print(f"trained {args.steps} steps in {seconds:.1f} s; test accuracy {test_accuracy:.3f}")
    print(scope.stats())
    scope.close()


if __name__ == "__main__":
    main()
