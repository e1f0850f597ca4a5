"""The dtype table, the exception tree and the public API."""

from __future__ import annotations

import ast
import importlib.metadata
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import envwire
from envwire import errors, tensor
from envwire.protocols import dmenvrpc, openenv
from envwire.protocols.http.status import status_of


@given(
    st.sampled_from([d.numpy for d in tensor.DTYPES]).flatmap(
        lambda dtype: hnp.arrays(dtype, hnp.array_shapes(min_dims=0, max_dims=4, max_side=5))
    )
)
def test_tensors_roundtrip_exactly(array: np.ndarray) -> None:
    back = tensor.decode(tensor.encode(array))
    assert back.dtype == array.dtype and back.shape == array.shape
    assert back.tobytes() == np.ascontiguousarray(array).tobytes()


def test_big_endian_arrays_travel_little_endian() -> None:
    array = np.arange(3, dtype=">i4")
    t = tensor.encode(array)
    assert t.data == np.arange(3, dtype="<i4").tobytes()
    np.testing.assert_array_equal(tensor.decode(t), array)


def test_tensor_errors_are_protocol_errors() -> None:
    with pytest.raises(errors.ProtocolError, match="needs 8 bytes"):
        tensor.decode(tensor.Tensor(tensor.dtype_by_name("int32"), (2,), b"\x00"))
    with pytest.raises(errors.ProtocolError, match="unknown dtype code 99"):
        tensor.dtype_by_code(99)
    with pytest.raises(errors.ProtocolError, match="unsupported dtype"):
        tensor.dtype_by_name("complex64")


def test_dtype_table_codes_and_names_are_unique() -> None:
    assert (
        len({d.code for d in tensor.DTYPES})
        == len({d.name for d in tensor.DTYPES})
        == len(tensor.DTYPES)
    )


def test_every_error_knows_its_channels() -> None:
    classes = [errors.EnvwireError, *errors.EnvwireError.__subclasses__()]
    seen = set()
    stack = list(classes)
    while stack:
        cls = stack.pop()
        seen.add(cls)
        stack.extend(cls.__subclasses__())
    codes = [cls.code for cls in seen if "code" in vars(cls)]  # subclasses may share a code
    assert len(codes) == len(set(codes)), "error codes must be unique"
    for cls in seen:
        assert 100 <= status_of(cls) < 600 and 0 < dmenvrpc.code_of(cls) < 17
        assert openenv.code_of(cls).isupper()
        if "code" in vars(cls) and cls.__init__ is errors.EnvwireError.__init__:
            assert errors.error_class_for_code(cls.code) is cls
    assert errors.error_class_for_code("nope") is errors.RemoteError


def test_errors_survive_pickling() -> None:
    import pickle

    error = pickle.loads(pickle.dumps(errors.EnvCrashedError("died")))
    assert type(error) is errors.EnvCrashedError and str(error) == "died"


def test_public_api() -> None:
    assert envwire.__all__ == ["EnvwireError", "make", "make_vec"]
    assert envwire.make is envwire.adapters.connect.make
    assert envwire.__version__ == importlib.metadata.version("envwire")
    with pytest.raises(errors.InvalidArgumentError, match="unknown URL scheme"):
        envwire.make("ftp://x/y")
    with pytest.raises(errors.InvalidArgumentError, match="no env id"):
        envwire.make("gym-socket://127.0.0.1:5001/")
    with pytest.raises(errors.TransportError, match="cannot connect"):
        envwire.make("gym-socket://127.0.0.1:1/CartPole-v1", timeout=2)


def test_every_module_declares_its_exports() -> None:
    # Read, not imported: the adapters of optional extras (sb3, torchrl, rllib) import libraries
    # a plain test install does not have.
    root = Path(envwire.__file__).parent
    missing = []
    for path in sorted(root.rglob("*.py")):
        if path.name in ("__init__.py", "__main__.py"):
            continue
        tree = ast.parse(path.read_text())
        names = {
            target.id
            for node in tree.body
            if isinstance(node, ast.Assign | ast.AnnAssign)
            for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
            if isinstance(target, ast.Name)
        }
        if "__all__" not in names:
            missing.append(str(path.relative_to(root)))
    assert not missing, f"modules without __all__: {missing}"
