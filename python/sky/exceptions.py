"""Exceptions of the SkyGo Python SDK, with SkyPilot's class names.

A request that fails on the server carries an error record
``{"type": NAME, "message": TEXT}``; :func:`from_error_record` turns it into
the class named NAME here (the server's message unchanged), or into
:class:`SkyPilotError` for a type this client does not know.
"""
from __future__ import annotations

import enum
TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: typing costs ms at import
    from typing import Any, Dict, Optional, Type


class SkyPilotError(Exception):
    """Base of the errors a SkyGo API server reports.

    ``error_type`` is the server's type name, ``request_id`` the request
    that failed (both None when the error was raised on the client).
    """

    error_type: Optional[str] = None
    request_id: Optional[str] = None


class ApiServerError(SkyPilotError):
    """The API server answered an HTTP call with an error status."""

    def __init__(self, message: str, status_code: int = 0) -> None:
        super().__init__(message)
        self.status_code = status_code


class ApiServerConnectionError(SkyPilotError, RuntimeError):
    """The API server could not be reached."""

    def __init__(self, server_url: str, reason: str = '') -> None:
        self.server_url = server_url
        msg = (f'Could not connect to SkyPilot API server at {server_url}'
               f'{" (" + reason + ")" if reason else ""}. Please ensure that '
               f'the server is running. Try: curl {server_url}/api/health')
        super().__init__(msg)


class APIVersionMismatchError(SkyPilotError, RuntimeError):
    """The client and the server speak incompatible API versions."""


class APINotSupportedError(SkyPilotError, RuntimeError):
    """The server lacks an endpoint this call needs."""


class ForeignApiServerError(SkyPilotError, RuntimeError):
    """SkyGo's local port is answered by a server that is not SkyGo's."""


class RequestCancelled(SkyPilotError):
    """The request was cancelled."""


class RequestInterruptedError(SkyPilotError):
    """The server stopped while running the request."""


class ServerShutdown(RequestInterruptedError):
    """The server shut down while the request ran."""


class ServerRestarted(RequestInterruptedError):
    """The server restarted; the request it ran was lost."""


class NotSupportedError(SkyPilotError):
    """The feature is not supported (by this server, cloud or cluster)."""


class ResourcesUnavailableError(SkyPilotError):
    """The requested resources cannot be satisfied."""

    def __init__(self, message: str = '', no_failover: bool = False,
                 failover_history: Optional[list] = None) -> None:
        super().__init__(message)
        self.no_failover = no_failover
        self.failover_history = failover_history or []


class ResourcesMismatchError(SkyPilotError):
    """The requested resources do not match the existing cluster."""


class InvalidClusterNameError(SkyPilotError, ValueError):
    """The cluster name is invalid."""


class ClusterNotUpError(SkyPilotError):
    """The cluster is not UP."""

    def __init__(self, message: str = '', cluster_status: Any = None,
                 handle: Any = None) -> None:
        super().__init__(message)
        self.cluster_status = cluster_status
        self.handle = handle


class ClusterSetUpError(SkyPilotError):
    """Setting up the cluster failed."""


class ClusterDoesNotExist(SkyPilotError, ValueError):
    """The cluster does not exist."""


class ClusterExistsError(SkyPilotError, ValueError):
    """A cluster of that name exists already."""


class ClusterOwnerIdentityMismatchError(SkyPilotError):
    """The cluster belongs to another user."""


# SkyPilot spells it both ways in its documentation.
ClusterOwnerIdentitiesMismatchError = ClusterOwnerIdentityMismatchError


class CloudUserIdentityError(SkyPilotError):
    """The current cloud user identity could not be found."""


class NoCloudAccessError(SkyPilotError):
    """No cloud (or infra) is enabled."""


class CommandError(SkyPilotError):
    """A command run on a cluster failed."""

    def __init__(self, returncode: int = 1, command: str = '',
                 error_msg: str = '', detailed_reason: Optional[str] = None):
        self.returncode = returncode
        self.command = command
        self.error_msg = error_msg
        self.detailed_reason = detailed_reason
        super().__init__(error_msg or command)


class JobNotFoundError(SkyPilotError, ValueError):
    """The job does not exist."""


class InvalidSkyPilotConfigError(SkyPilotError, ValueError):
    """A task YAML or config is invalid."""


class SSHHostError(SkyPilotError):
    """An SSH node pool host could not be used."""


class StorageError(SkyPilotError):
    """A storage operation failed."""


class InternalError(SkyPilotError, RuntimeError):
    """The server failed unexpectedly."""


class ServerValueError(SkyPilotError, ValueError):
    """The server refused an argument (SkyPilot raises ValueError)."""


class ServerRuntimeError(SkyPilotError, RuntimeError):
    """The server failed to carry out the request (RuntimeError)."""


class JobExitCode(enum.IntEnum):
    """Exit codes of ``sky.tail_logs`` / ``sky logs`` (SkyPilot's)."""
    SUCCEEDED = 0
    FAILED = 100
    NOT_FINISHED = 101
    NOT_FOUND = 102
    CANCELLED = 103

    @classmethod
    def from_job_status(cls, status: Optional[str]) -> 'JobExitCode':
        if status is None or status == '':
            return cls.NOT_FOUND
        s = str(getattr(status, 'value', status))
        if s == 'SUCCEEDED':
            return cls.SUCCEEDED
        if s in ('FAILED', 'FAILED_SETUP', 'FAILED_DRIVER'):
            return cls.FAILED
        if s == 'CANCELLED':
            return cls.CANCELLED
        return cls.NOT_FINISHED


# The server's error type names (internal/server encodeError, op.Error and
# backend.ClusterError types) and the class each becomes.
_BY_TYPE: Dict[str, Type[SkyPilotError]] = {
    'ValueError': ServerValueError,
    'RuntimeError': ServerRuntimeError,
    'SkyGoError': SkyPilotError,
    'InternalError': InternalError,
    'RequestCancelled': RequestCancelled,
    'ServerShutdown': ServerShutdown,
    'ServerRestarted': ServerRestarted,
    'JobNotFound': JobNotFoundError,
    'JobNotFoundError': JobNotFoundError,
}
for _cls in (NotSupportedError, ResourcesUnavailableError,
             ResourcesMismatchError, InvalidClusterNameError,
             ClusterNotUpError, ClusterSetUpError, ClusterDoesNotExist,
             ClusterExistsError, ClusterOwnerIdentityMismatchError,
             CloudUserIdentityError, NoCloudAccessError, CommandError,
             InvalidSkyPilotConfigError, SSHHostError, StorageError,
             ApiServerConnectionError, APIVersionMismatchError):
    _BY_TYPE[_cls.__name__] = _cls


def from_error_record(error_type: Optional[str], message: str,
                      request_id: Optional[str] = None) -> SkyPilotError:
    """The exception for a failed request's error record."""
    cls = _BY_TYPE.get(error_type or '', SkyPilotError)
    if cls is CommandError:
        exc: SkyPilotError = CommandError(1, '', message)
    elif cls is ApiServerConnectionError:
        exc = SkyPilotError(message)
    else:
        exc = cls(message)
    if cls is SkyPilotError and error_type and error_type != 'SkyGoError':
        # Unknown to this client: keep the server's name in the text.
        exc = SkyPilotError(f'{error_type}: {message}')
    exc.error_type = error_type
    exc.request_id = request_id
    return exc
