"""Commands beyond validate/schema/new register themselves with the CLI when imported here."""

from . import render  # noqa: F401
from . import diff_command  # noqa: F401
from . import capacity_report  # noqa: F401
