# magpy-test: breaks
# Annotated library functions that read objects natively (copy.deepcopy
# copies __dict__; hash of an object without __hash__ and id are its
# identity): a graph break, so changed attributes are never stale.
import copy

import torch
from harness import compare


class Config:
    def __init__(self):
        self.scale = [1.0]


CONFIG = Config()


def copied(x):
    return x * copy.deepcopy(CONFIG).scale[0]


def by_identity(x):
    return x * (hash(CONFIG) % 7 + id(CONFIG) % 3)


def plain_data(x):
    return x * len(copy.deepcopy([1.0, 2.0])) + hash((1, 2)) % 5


def change(i, subject, reference):
    if i == 1:
        CONFIG.scale[0] = 5.0


compare(lambda: copied, [(torch.ones(2),)] * 3, between=change, graphs=0)
compare(lambda: by_identity, [(torch.ones(2),)] * 2, graphs=0)
compare(lambda: plain_data, [(torch.ones(2),)] * 2, records=1, graphs=1, breaks=0)
