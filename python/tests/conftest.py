"""Fixtures: a real SkyGo API server for the integration tests.

The server is the `sky` binary from SKYGO_TEST_BINARY, else <repo>/bin/sky
(`make build`); without one the integration tests are skipped, saying so.
It runs with a private HOME (short, under the temp dir: node agents keep
unix sockets there), a free port, the repository's test catalog, and an
environment built from scratch so the machine's credentials never leak in.
At the end every cluster is torn down, the server stopped, and its
process killed by PID if it survived.
"""
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, 'python'))

# The environment variables the SDK reads; each test session sets its own.
_SDK_ENV = ('HOME', 'SKYPILOT_API_SERVER_ENDPOINT',
            'SKYPILOT_SERVICE_ACCOUNT_TOKEN',
            'SKYPILOT_API_SERVER_LOCAL_PORT', 'SKYPILOT_CATALOG_DIR',
            'SKYGO_SKY_BINARY')


def free_port() -> int:
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def sky_binary():
    p = os.environ.get('SKYGO_TEST_BINARY') or os.path.join(REPO, 'bin',
                                                            'sky')
    return p if os.path.isfile(p) and os.access(p, os.X_OK) else None


def no_binary_reason() -> str:
    env = os.environ.get('SKYGO_TEST_BINARY')
    if env:
        return f'SKYGO_TEST_BINARY={env} is not an executable file'
    return ('no SkyGo binary: run `make build` (bin/sky) or set '
            'SKYGO_TEST_BINARY=/path/to/sky')


class SkyServer:
    """A running server: its HOME, port, endpoint, binary and env."""

    def __init__(self, binary: str) -> None:
        self.binary = binary
        self.home = tempfile.mkdtemp(prefix='skypy-', dir='/tmp')
        self.port = free_port()
        self.endpoint = f'http://127.0.0.1:{self.port}'
        self.env = {
            'PATH': os.environ.get('PATH', '/usr/bin:/bin'),
            'HOME': self.home,
            'USER': os.environ.get('USER') or 'pytest',
            'LANG': 'C.UTF-8',
            'SKYPILOT_API_SERVER_LOCAL_PORT': str(self.port),
            'SKYPILOT_CATALOG_DIR': os.path.join(REPO, 'testdata', 'catalog',
                                                 'v8'),
        }
        self.pid = None

    def sky(self, *args: str, timeout: float = 120,
            check: bool = True) -> subprocess.CompletedProcess:
        p = subprocess.run([self.binary, *args], env=self.env,
                           capture_output=True, text=True, timeout=timeout,
                           stdin=subprocess.DEVNULL, check=False)
        if check and p.returncode != 0:
            raise AssertionError(f'sky {" ".join(args)} exited '
                                 f'{p.returncode}:\n{p.stdout}\n{p.stderr}')
        return p

    def start(self) -> None:
        self.sky('api', 'start', timeout=60)
        pid_file = os.path.join(self.home, '.sky', 'skygo', 'api_server',
                                'server.pid')
        deadline = time.time() + 10
        while time.time() < deadline and self.pid is None:
            try:
                with open(pid_file, encoding='utf-8') as f:
                    self.pid = int(f.read().strip())
            except (OSError, ValueError):
                time.sleep(0.05)

    def stop(self) -> None:
        for args in (('jobs', 'cancel', '-a', '-y'), ('down', '-a', '-y'),
                     ('api', 'stop')):
            try:
                self.sky(*args, timeout=180, check=False)
            except subprocess.TimeoutExpired:
                pass
        if self.pid:
            _kill_pid(self.pid)
        shutil.rmtree(self.home, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie of ours counts as gone.
    try:
        with open(f'/proc/{pid}/stat', encoding='utf-8') as f:
            return f.read().split(') ', 1)[1][:1] != 'Z'
    except OSError:
        return False


def _kill_pid(pid: int) -> None:
    """Stops the one server process we started, by its PID."""
    if not _alive(pid):
        return
    os.kill(pid, signal.SIGTERM)
    deadline = time.time() + 10
    while time.time() < deadline and _alive(pid):
        time.sleep(0.1)
    if _alive(pid):
        os.kill(pid, signal.SIGKILL)


@pytest.fixture(scope='session')
def sky_server():
    binary = sky_binary()
    if binary is None:
        pytest.skip(no_binary_reason())
    srv = SkyServer(binary)
    saved = {k: os.environ.get(k) for k in _SDK_ENV}
    try:
        srv.start()
        for k in _SDK_ENV:
            os.environ.pop(k, None)
        os.environ.update({k: v for k, v in srv.env.items()
                           if k in _SDK_ENV})
        os.environ['SKYGO_SKY_BINARY'] = binary
        from sky.client import transport
        transport.reset_client()
        yield srv
    finally:
        try:
            srv.stop()
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
            from sky.client import transport
            transport.reset_client()


@pytest.fixture
def sky_home(sky_server):
    return sky_server.home
