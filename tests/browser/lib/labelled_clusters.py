"""Pushes, for the classes' browser test, a tensor of three well separated clusters of
rows with their class names every 0.15 s, drawn as a pca frame.

    python3 labelled_clusters.py SESSION PUSHES
"""

import sys
import time

import torch

import tensorscope


def main():
    session, pushes = sys.argv[1], int(sys.argv[2])
    torch.manual_seed(0)
    names = ["ant", "bee", "cow"]
    centres = torch.randn(3, 16) * 6
    with tensorscope.Client(session=session, connect_timeout_ms=10000) as scope:
        scope.set_render_mode("emb", "pca")
        for step in range(pushes):
            labels = torch.arange(300) % 3
            rows = centres[labels] + torch.randn(300, 16)
            scope.push("emb", rows, labels=[names[int(c)] for c in labels])
            scope.next_step()
            time.sleep(0.15)


if __name__ == "__main__":
    main()
