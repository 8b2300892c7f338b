"""Enums shared by the model classes and the client functions.

They are `str` enums where SkyPilot's are strings on the wire, so that
`x == 'jobs'` works and the value is what the API server expects.
"""
import enum


class OptimizeTarget(enum.Enum):
    """What the optimizer minimises (sky.launch(optimize_target=...))."""
    COST = 0
    TIME = 1

    @property
    def api_name(self) -> str:
        """The spelling the API server takes: 'cost' or 'time'."""
        return self.name.lower()


class StatusRefreshMode(enum.Enum):
    """How sky.status refreshes cluster records from the cloud."""
    NONE = 'NONE'
    AUTO = 'AUTO'
    FORCE = 'FORCE'


class AutostopWaitFor(str, enum.Enum):
    """What an idle cluster waits for before autostop (`wait_for`)."""
    JOBS_AND_SSH = 'jobs_and_ssh'
    JOBS = 'jobs'
    NONE = 'none'

    def __str__(self) -> str:
        return self.value

    @classmethod
    def from_str(cls, value: str) -> 'AutostopWaitFor':
        try:
            return cls(value.lower())
        except ValueError:
            raise ValueError(
                f'wait_for must be one of jobs_and_ssh, jobs, none; '
                f'got {value!r}') from None
