# A program running under a trace function (a debugger, coverage) and a
# profile function (cProfile): the monitored call installs its own hooks,
# and the program's must be back when it returns (the monitor once
# removed the trace function, so coverage stopped at the first compiled
# call). The profile function keeps receiving every event during the
# monitored call; the trace function sees none of it.
import sys

import torch

import magpy


def step(x):
    return torch.relu(x) * 2 + 1


def shifted(x):
    return torch.relu(x) - 1


def after():
    return 1


called = []


def tracer(frame, event, arg):
    if event == "call":
        called.append(frame.f_code.co_name)
    return None


profiled = []


def profiler(frame, event, arg):
    profiled.append((event, getattr(arg, "__name__", None)))


x = torch.ones(3)
traced = magpy.compile(step)
for i in range(3):  # the first call is monitored, the others replay
    called.clear()
    sys.settrace(tracer)
    got = traced(x)
    after()
    kept = sys.gettrace()
    sys.settrace(None)
    assert kept is tracer, f"call {i}: the trace function is {kept}"
    assert "after" in called, f"call {i}: traced calls {called}"
    assert torch.equal(got, step(x))

profiled_step = magpy.compile(shifted)
sys.setprofile(profiler)
got = profiled_step(x)  # monitored
kept = sys.getprofile()
sys.setprofile(None)
assert kept is profiler, f"the profile function is {kept}"
assert ("c_call", "relu") in profiled, f"profiled {profiled}"
assert torch.equal(got, shifted(x))
print("ok")
