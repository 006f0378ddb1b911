"""ExecuTorch's side: reading a `.pte` (`reader.py`, reading only), resolving its operators through devcopy's runtime
(`registration.py`), turning it into a devcopy `Program` (`convert.py`), ExecuTorch's lowering pipeline with its
options in one place (`pipeline.py`), devcopy as an ExecuTorch backend (`backend.py`), ExecuTorch 1.5.1 as the
reference (`executorch_reference.py`), running inside ExecuTorch's runtime (`executorch_runtime.py`) and the
artifact comparison (`artifact.py`, `artifact_form.py`). ExecuTorch itself is imported only when called (the
`reference` extra). Importing it silences the known third-party deprecation noise (see `lowering.noise`)."""

from ..lowering.noise import quiet_known_noise

quiet_known_noise()
