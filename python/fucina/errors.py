# SPDX-License-Identifier: MIT
"""fucina.Error and one subclass per family of fc_status codes."""
from ._lib import lib


class Error(Exception):
    """A failed fucina call: status (the fc_status value), status_name
    ("FC_ERR_SHAPE_MISMATCH") and message (the context's fc_ctx_error)."""

    def __init__(self, status, message):
        self.status = int(status)
        self.status_name = lib.fc_status_name(self.status).decode()
        self.message = message
        super().__init__("%s: %s" % (self.status_name, message))


class OutOfMemoryError(Error):
    """FC_ERR_OOM."""


class InvalidArgumentError(Error):
    """FC_ERR_INVALID_ARG, FC_ERR_NULL_ARG, FC_ERR_DATA_LENGTH, FC_ERR_EMPTY_SELECTION."""


class ShapeError(Error):
    """FC_ERR_SHAPE_MISMATCH, FC_ERR_INVALID_SHAPE, FC_ERR_RANK, FC_ERR_AXIS."""


class DTypeError(Error):
    """FC_ERR_DTYPE."""


class IndexRangeError(Error):
    """FC_ERR_INDEX."""


class NumericError(Error):
    """FC_ERR_OVERFLOW, FC_ERR_DIV_ZERO, FC_ERR_NON_FINITE."""


class StateError(Error):
    """FC_ERR_STATE, FC_ERR_SAVED_MODIFIED, FC_ERR_NO_GRAD, FC_ERR_READ_ONLY,
    FC_ERR_UNSUPPORTED_VIEW, FC_ERR_CONTEXT, FC_ERR_UNSUPPORTED; also a
    Python Tensor used after its release."""


class FileFormatError(Error):
    """FC_ERR_IO, FC_ERR_FORMAT."""


class BackendError(Error):
    """FC_ERR_BACKEND, FC_ERR_COMM."""


_FAMILY = {
    "FC_ERR_OOM": OutOfMemoryError,
    "FC_ERR_INVALID_ARG": InvalidArgumentError, "FC_ERR_NULL_ARG": InvalidArgumentError,
    "FC_ERR_DATA_LENGTH": InvalidArgumentError, "FC_ERR_EMPTY_SELECTION": InvalidArgumentError,
    "FC_ERR_SHAPE_MISMATCH": ShapeError, "FC_ERR_INVALID_SHAPE": ShapeError,
    "FC_ERR_RANK": ShapeError, "FC_ERR_AXIS": ShapeError,
    "FC_ERR_DTYPE": DTypeError,
    "FC_ERR_INDEX": IndexRangeError,
    "FC_ERR_OVERFLOW": NumericError, "FC_ERR_DIV_ZERO": NumericError,
    "FC_ERR_NON_FINITE": NumericError,
    "FC_ERR_STATE": StateError, "FC_ERR_SAVED_MODIFIED": StateError,
    "FC_ERR_NO_GRAD": StateError, "FC_ERR_READ_ONLY": StateError,
    "FC_ERR_UNSUPPORTED_VIEW": StateError, "FC_ERR_CONTEXT": StateError,
    "FC_ERR_UNSUPPORTED": StateError,
    "FC_ERR_IO": FileFormatError, "FC_ERR_FORMAT": FileFormatError,
    "FC_ERR_BACKEND": BackendError, "FC_ERR_COMM": BackendError,
}


def error_for(status, message):
    """The Error subclass instance for a status code."""
    cls = _FAMILY.get(lib.fc_status_name(int(status)).decode(), Error)
    return cls(status, message)
