# magpy-test: breaks
# Lengths that come from tensor contents: iterating or unpacking a tensor
# whose size a mask decided is checked (a record per count, so a fixed
# count is never used on a call with another), and requires_grad_() on an
# argument (an autograd flag a record cannot replay) is a graph break.
# Results and flags stay eager's.
import torch
from harness import compare


def kept_boxes(boxes, scores):
    total = torch.zeros(4)
    for box in boxes[scores > 0.5]:
        total = total + box
    return total


def first_two(x):
    a, b, *rest = x[x > 0]
    return a + b


def track(x):
    x.requires_grad_()
    return x * 2


boxes = torch.arange(24.0).reshape(6, 4)
calls = [(boxes, torch.tensor([0.9, 0.1, 0.7, 0.2, 0.8, 0.3])), (boxes, torch.tensor([0.9, 0.9, 0.9, 0.9, 0.1, 0.1])),
         (boxes, torch.zeros(6))]
compare(lambda: kept_boxes, calls, records=3, graphs=3, breaks=0)
compare(lambda: first_two, [(torch.tensor([1.0, -1.0, 2.0, 3.0]),), (torch.tensor([-1.0, 5.0, 6.0, 7.0]),)], records=1, graphs=1, hits=1)
compare(lambda: track, [(torch.ones(2),), (torch.ones(2),)], breaks=1)
