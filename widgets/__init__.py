"""devcopy_widgets: interactive views over devcopy_lib (placement, copy timings, registration)."""

from .placement import PlacementExplorer
from .placement_state import PlacementState
from .registration import RegistrationPanel
from .registration_state import RegistrationState, RunResult
from .timing import CopyTimingPanel
from .timing_state import TimingState

__all__ = [
    "CopyTimingPanel",
    "PlacementExplorer",
    "PlacementState",
    "RegistrationPanel",
    "RegistrationState",
    "RunResult",
    "TimingState",
]
