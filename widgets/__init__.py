"""devcopy_widgets: interactive views over devcopy_lib (placement, copy timings, registration)."""
