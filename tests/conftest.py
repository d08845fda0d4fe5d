"""Suite-wide test settings.

Hypothesis: no per-example deadline (its default fails an example that takes over 200 ms of wall time, which a
loaded machine decides, not the code: issue 21 item 7). A test that sets its own ``deadline`` keeps it.
"""

from hypothesis import settings

settings.register_profile("dse", deadline=None)
settings.load_profile("dse")
