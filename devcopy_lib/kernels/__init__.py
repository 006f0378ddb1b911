"""The kernels: device-copy (portable and ATen mode) and portable CPU kernels; importing the package registers the
et_copy kernels with torch.library (`registration`)."""

from . import registration  # noqa: F401 - registers the et_copy .out kernels for eager calls
