"""Former home of the judges, kept so that old imports keep working: import from `elical.judges` instead."""

from elical.judges import *  # noqa: F401,F403
from elical.judges import __all__  # noqa: F401
