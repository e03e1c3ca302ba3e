# magpy-test: refused natively
# A compiled function that sets the profile and trace functions itself:
# eagerly they stay set after it returns. The monitored call installs its
# own hooks around the call, and must not put back the ones from before
# over the program's (the call breaks at sys.setprofile, so it needs
# Python natively).
import sys

import torch

import magpy


def profiler(frame, event, arg):
    pass


def tracer(frame, event, arg):
    return None


def hooking(x):
    sys.setprofile(profiler)
    sys.settrace(tracer)
    return torch.relu(x)


got = magpy.compile(hooking)(torch.ones(3))  # monitored
kept = (sys.getprofile(), sys.gettrace())
sys.setprofile(None)
sys.settrace(None)
assert kept == (profiler, tracer), f"after a call that set them: {kept}"
assert torch.equal(got, torch.ones(3))
print("ok")
