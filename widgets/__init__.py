"""devcopy_widgets: interactive views over devcopy_lib (placement, memory plans, copy timings, registration), and
the two helpers notebooks share with the panels (`totals_line`: a placement report in one line; `html_table`: rows
as an HTML table) so a notebook shows what a panel shows without retyping it."""

from .html import table as html_table
from .memory_plan_view import MemoryPlanView
from .placement import PlacementExplorer
from .placement_state import PlacementState
from .placement_summary import totals_line
from .registration import RegistrationPanel
from .registration_state import RegistrationState, RunResult
from .timing import CopyTimingPanel
from .timing_state import TimingState

__all__ = [
    "CopyTimingPanel",
    "MemoryPlanView",
    "PlacementExplorer",
    "PlacementState",
    "RegistrationPanel",
    "RegistrationState",
    "RunResult",
    "TimingState",
    "html_table",
    "totals_line",
]
