"""The small CNN of the Python examples and benchmark: the twin of examples/cnn_model.h,
an ordinary torch module (tracking needs no change to it), and the synthetic images
train_cnn trains it on."""

from collections import OrderedDict

import torch
from torch import nn

IMAGE_SIZE = 28
CLASSES = 10


class Cnn(nn.Module):
    """conv → batch norm → ReLU → max pool, twice, then two fully connected layers. The
    layers with parameters become the streams "cnn.features.conv1", ..., "cnn.fc2" — the
    same names as the C++ example's."""

    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(OrderedDict([
            ("conv1", nn.Conv2d(1, 8, 3, padding=1)),
            ("bn1", nn.BatchNorm2d(8)),
            ("relu1", nn.ReLU()),
            ("pool1", nn.MaxPool2d(2)),  # 28x28 -> 14x14
            ("conv2", nn.Conv2d(8, 16, 3, padding=1)),
            ("bn2", nn.BatchNorm2d(16)),
            ("relu2", nn.ReLU()),
            ("pool2", nn.MaxPool2d(2)),  # 14x14 -> 7x7
        ]))
        self.fc1 = nn.Linear(16 * 7 * 7, 64)
        self.fc2 = nn.Linear(64, CLASSES)

    def forward(self, images):
        x = self.features(images).flatten(1)
        return self.fc2(torch.relu(self.fc1(x)))


def make_dataset(count, generator=None):
    """`count` images [count, 1, 28, 28] and labels: classes 0-4 a horizontal bar at one of
    five rows, 5-9 a blob at one of five places; shifted, scaled and noisy."""
    labels = torch.randint(0, CLASSES, (count,), generator=generator)
    place = labels.remainder(5)
    rows = torch.arange(IMAGE_SIZE, dtype=torch.float32).view(1, IMAGE_SIZE, 1)
    cols = torch.arange(IMAGE_SIZE, dtype=torch.float32).view(1, 1, IMAGE_SIZE)
    shift_row = torch.randint(-2, 3, (count, 1, 1), generator=generator).float()
    shift_col = torch.randint(-2, 3, (count, 1, 1), generator=generator).float()
    bar_row = (4 + 5 * place.float()).view(count, 1, 1) + shift_row
    bar = (rows - bar_row).abs().le(1).float().expand(count, IMAGE_SIZE, IMAGE_SIZE)
    centre_row = torch.tensor([7.0, 7.0, 20.0, 20.0, 14.0])[place].view(count, 1, 1) + shift_row
    centre_col = torch.tensor([7.0, 20.0, 7.0, 20.0, 14.0])[place].view(count, 1, 1) + shift_col
    blob = torch.exp(-((rows - centre_row).square() + (cols - centre_col).square()) / (2 * 3.0 * 3.0))
    brightness = torch.empty(count, 1, 1).uniform_(0.4, 1.2, generator=generator)
    noise = 0.9 * torch.randn(count, IMAGE_SIZE, IMAGE_SIZE, generator=generator)
    images = torch.where(labels.lt(5).view(count, 1, 1), bar, blob) * brightness + noise
    return images.unsqueeze(1), labels
