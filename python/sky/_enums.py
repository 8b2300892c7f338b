"""Status and option enums. Each is a ``str`` Enum, so a value compares
equal to its name as the server sends it (``status == 'UP'``) and prints
as that name."""
import enum


class _StrEnum(str, enum.Enum):

    def __str__(self) -> str:
        return str(self.value)

    @classmethod
    def parse(cls, value):
        """The member for value, or None for None/''."""
        if value is None or value == '':
            return None
        if isinstance(value, cls):
            return value
        text = str(value)
        for v in (text, text.upper(), text.lower()):
            try:
                return cls(v)
            except ValueError:
                pass
        raise ValueError(f'{value!r} is not a {cls.__name__}: choose one '
                         f'of {", ".join(m.value for m in cls)}')


class ClusterStatus(_StrEnum):
    """A cluster's status (sky.ClusterStatus)."""
    INIT = 'INIT'
    UP = 'UP'
    STOPPED = 'STOPPED'


class JobStatus(_StrEnum):
    """A job's status on a cluster (job_lib.JobStatus)."""
    INIT = 'INIT'
    PENDING = 'PENDING'
    SETTING_UP = 'SETTING_UP'
    RUNNING = 'RUNNING'
    FAILED_DRIVER = 'FAILED_DRIVER'
    SUCCEEDED = 'SUCCEEDED'
    FAILED = 'FAILED'
    FAILED_SETUP = 'FAILED_SETUP'
    CANCELLED = 'CANCELLED'

    def is_terminal(self) -> bool:
        return self in (JobStatus.SUCCEEDED, JobStatus.FAILED,
                        JobStatus.FAILED_SETUP, JobStatus.FAILED_DRIVER,
                        JobStatus.CANCELLED)


class ManagedJobStatus(_StrEnum):
    """A managed job task's status (sky.jobs.ManagedJobStatus)."""
    PENDING = 'PENDING'
    SUBMITTED = 'SUBMITTED'
    STARTING = 'STARTING'
    RUNNING = 'RUNNING'
    WINDING_DOWN = 'WINDING_DOWN'
    RECOVERING = 'RECOVERING'
    CANCELLING = 'CANCELLING'
    SUCCEEDED = 'SUCCEEDED'
    CANCELLED = 'CANCELLED'
    FAILED = 'FAILED'
    FAILED_SETUP = 'FAILED_SETUP'
    FAILED_PRECHECKS = 'FAILED_PRECHECKS'
    FAILED_NO_RESOURCE = 'FAILED_NO_RESOURCE'
    FAILED_CONTROLLER = 'FAILED_CONTROLLER'

    def is_terminal(self) -> bool:
        return self in _MANAGED_TERMINAL

    def is_failed(self) -> bool:
        return self.is_terminal() and self not in (
            ManagedJobStatus.SUCCEEDED, ManagedJobStatus.CANCELLED)

    @classmethod
    def terminal_statuses(cls):
        return list(_MANAGED_TERMINAL)


_MANAGED_TERMINAL = (ManagedJobStatus.SUCCEEDED, ManagedJobStatus.CANCELLED,
                     ManagedJobStatus.FAILED, ManagedJobStatus.FAILED_SETUP,
                     ManagedJobStatus.FAILED_PRECHECKS,
                     ManagedJobStatus.FAILED_NO_RESOURCE,
                     ManagedJobStatus.FAILED_CONTROLLER)


# The option enums live with the model (sky.utils.common); the client's
# helpers below read them, or their names as strings.
from sky.utils.common import AutostopWaitFor  # noqa: E402
from sky.utils.common import OptimizeTarget  # noqa: E402
from sky.utils.common import StatusRefreshMode  # noqa: E402


def optimize_time(target) -> bool:
    """Whether target (an OptimizeTarget or its name) is TIME."""
    if target is None:
        return False
    if isinstance(target, OptimizeTarget):
        return target == OptimizeTarget.TIME
    name = str(getattr(target, 'name', target)).upper()
    if name not in ('COST', 'TIME'):
        raise ValueError(f'optimize target {target!r}: choose COST or TIME')
    return name == 'TIME'


def refresh_wanted(mode) -> bool:
    """Whether a StatusRefreshMode (or bool, or name) asks to refresh."""
    if isinstance(mode, bool):
        return mode
    if mode is None:
        return False
    name = str(getattr(mode, 'value', mode)).upper()
    if name not in ('NONE', 'AUTO', 'FORCE'):
        raise ValueError(f'refresh {mode!r}: choose NONE, AUTO or FORCE')
    return name != 'NONE'


def wait_for_value(wait_for):
    """The API value of an AutostopWaitFor (or its name), or None."""
    if wait_for is None:
        return None
    if isinstance(wait_for, AutostopWaitFor):
        return wait_for.value
    return AutostopWaitFor.from_str(str(wait_for)).value
