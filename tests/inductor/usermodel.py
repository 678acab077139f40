"""The small model a user brings (issue 26's test model): convolution + batch
norm + ReLU, a residual, a transformer block with attention, a linear head;
exported with a dynamic batch dimension and saved as a .pt2 archive.  Needs
torch (run in the project venv's python)."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.fc1, self.fc2 = nn.Linear(dim, 2 * dim), nn.Linear(2 * dim, dim)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).reshape(b, t, 3, self.heads, d // self.heads) \
            .permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v)
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, d))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class UserNet(nn.Module):
    def __init__(self, ch=16, dim=32, classes=10):
        super().__init__()
        self.conv1, self.bn1 = nn.Conv2d(3, ch, 3, padding=1, bias=False), nn.BatchNorm2d(ch)
        self.conv2, self.bn2 = nn.Conv2d(ch, ch, 3, padding=1, bias=False), nn.BatchNorm2d(ch)
        self.embed = nn.Conv2d(ch, dim, 4, stride=4)
        self.block = Block(dim, 4)
        self.head = nn.Linear(dim, classes)

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        y = F.relu(y + self.bn2(self.conv2(y)))  # the residual
        t = self.embed(y).flatten(2).transpose(1, 2)
        return self.head(self.block(t).mean(1))


def build(seed=0):
    torch.manual_seed(seed)
    m = UserNet().eval()
    for bn in (m.bn1, m.bn2):  # running statistics that are not the identity
        bn.running_mean.uniform_(-0.2, 0.2)
        bn.running_var.uniform_(0.5, 1.5)
    return m, (torch.randn(2, 3, 16, 16),)


def export(path, seed=0, dynamic=True):
    """Saves the model's export to path; returns (model, example inputs)."""
    m, x = build(seed)
    shapes = ({0: torch.export.Dim("batch", min=1, max=64)},) if dynamic else None
    ep = torch.export.export(m, x, dynamic_shapes=shapes)
    torch.export.save(ep, path)
    return m, x


class Lacking(nn.Module):
    """A model with an operator the native engine lacks (cumsum): the
    inductor engine runs it, the native engine names the operator."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x):
        return torch.cumsum(F.relu(self.fc(x)), 1)


def export_lacking(path):
    torch.manual_seed(0)
    m = Lacking().eval()
    ep = torch.export.export(m, (torch.randn(2, 8),))
    torch.export.save(ep, path)
    return m
