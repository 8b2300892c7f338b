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


class OptimizeTarget(_StrEnum):
    """What the optimizer minimizes."""
    COST = 'COST'
    TIME = 'TIME'


class StatusRefreshMode(_StrEnum):
    """Whether sky.status refreshes from the infra first."""
    NONE = 'NONE'
    AUTO = 'AUTO'
    FORCE = 'FORCE'


class AutostopWaitFor(_StrEnum):
    """What resets a cluster's idleness timer."""
    JOBS_AND_SSH = 'jobs_and_ssh'
    JOBS = 'jobs'
    NONE = 'none'

