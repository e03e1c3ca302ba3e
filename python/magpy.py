"""Plain-Python stand-in for magpy's builtin module.

Under magpy-capture, `import magpy` finds the real module built into the
capture tool. Under plain python3 (to run an example eagerly, or to time it
for comparison), put this directory on sys.path: magpy.compile then returns
its argument unchanged.
"""


def compile(fn_or_module, *, dynamic=None):
    if dynamic not in (None, True, False):
        raise TypeError(f"magpy.compile: dynamic must be True, False or None, not {type(dynamic).__name__}")
    return fn_or_module
