"""SkyGo's Python SDK: ``import sky`` as a thin client of a SkyGo API
server (the `sky` binary's `sky api start`).

Asynchronous functions return a request id; ``sky.get(request_id)`` waits
for the result, ``sky.stream_and_get`` streams the request's log too.
Heavy modules (the network stack, the task model) load on first use, so
``import sky`` stays fast.
"""
# The SkyGo release this package ships with, and the API version it needs
# the server to speak (/api/health api_version).
__version__ = '0.1.0-dev'
API_VERSION = 2

from sky import exceptions  # noqa: E402
from sky._enums import AutostopWaitFor  # noqa: E402
from sky._enums import ClusterStatus  # noqa: E402
from sky._enums import JobStatus  # noqa: E402
from sky._enums import OptimizeTarget  # noqa: E402
from sky._enums import StatusRefreshMode  # noqa: E402
from sky.client.sdk import *  # noqa: E402,F401,F403
from sky.client.sdk import RequestId  # noqa: E402
from sky.client.sdk import ResourceHandle  # noqa: E402
from sky.client.sdk import exec  # noqa: E402,F401  pylint: disable=redefined-builtin

# Loaded on first access (PEP 562): the model classes and the jobs/serve
# namespaces.
_LAZY = {
    'Task': ('sky.task', 'Task'),
    'Resources': ('sky.resources', 'Resources'),
    'Dag': ('sky.dag', 'Dag'),
    'jobs': ('sky.jobs', None),
    'dag': ('sky.dag', None),
    'task': ('sky.task', None),
    'resources': ('sky.resources', None),
    'serve': ('sky.serve', None),
    'volumes': ('sky.volumes', None),
}


def __getattr__(name):
    spec = _LAZY.get(name)
    if spec is None:
        raise AttributeError(f'module {__name__!r} has no attribute {name!r}')
    import importlib  # pylint: disable=import-outside-toplevel
    mod = importlib.import_module(spec[0])
    value = mod if spec[1] is None else getattr(mod, spec[1])
    globals()[name] = value
    return value


def __dir__():
    return sorted(list(globals()) + list(_LAZY))
