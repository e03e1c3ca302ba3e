# magpy-test: breaks
# Containers access paths cannot name: a dict keyed by objects and a global
# set. Looking into either is a graph break, so an entry that changes
# between calls is never served stale.
import torch
from harness import compare


class Marker:
    pass


KEY = Marker()
TABLE = {KEY: 2.0}
ENABLED = {"relu"}


def by_object(t):
    return t * TABLE[KEY]


def change_entry(i, subject, reference):
    TABLE[KEY] = 2.0 + i


def by_membership(t):
    return torch.relu(t) if "relu" in ENABLED else t


def toggle(i, subject, reference):
    if i == 1:
        ENABLED.discard("relu")


x = torch.randn(4)
compare(lambda: by_object, [(x,)] * 3, between=change_entry, graphs=0, breaks=1)
compare(lambda: by_membership, [(x,)] * 3, between=toggle, graphs=0, breaks=1)
