"""What the documentation's Python examples take as given (their `model`, `loader`, `x`,
`opt`, ...): a small model with the submodules the examples name, a few batches, an
optimizer. Run before each page's examples (test_doc_examples.py)."""

import torch
import torch.nn.functional as F
from torch import nn

import tensorscope

torch.manual_seed(0)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(8, 16), nn.BatchNorm1d(16))
        self.layers = nn.Sequential(nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 16))
        # Shaped like AlexNet's classifier: [0] a Dropout, [6] a Linear.
        self.classifier = nn.Sequential(nn.Dropout(), nn.Linear(16, 16), nn.ReLU(), nn.Dropout(),
                                        nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 4))

    def forward(self, x):
        return self.classifier(self.layers(self.encoder(x)))


model = Net()
x = torch.randn(8, 8)
y = torch.randint(0, 4, (8,))
loader = [(torch.randn(8, 8), torch.randint(0, 4, (8,))) for _ in range(3)]
batches = loader
opt = torch.optim.SGD(model.parameters(), lr=0.01)
logits = output = model(x)
loss = F.cross_entropy(logits, y)
