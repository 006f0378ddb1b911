"""The native lib lists torchgen's `autogen:` variants; one this PyTorch has no schema for is refused by name."""

import pytest

from devcopy_lib.ops.schema import native_functions, native_schema
from devcopy_lib.runtime.libs import native_lib


def test_an_autogen_op_without_a_schema_in_this_pytorch_is_a_lookup_error_naming_it():
    missing = [name for name, schema in native_functions().items() if schema is None and native_schema(name) is None]
    if not missing:
        pytest.skip("this PyTorch registers a schema for every autogen variant")
    with pytest.raises(LookupError, match=missing[0].replace(".", r"\.")):
        native_lib().kernel(missing[0])
