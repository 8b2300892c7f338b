"""A private SkyGo API server for the seed-examples acceptance test: the
`sky` binary from SKYGO_TEST_BINARY (or bin/sky of the checkout), a temp
HOME, a free port and the project's test catalog — what the Go e2e tests
use (internal/e2e newEnv). Cleanup cancels managed jobs, downs every
cluster, stops the server and kills its pid if it survived."""
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def sky_binary():
    """The sky binary under test, or None when there is none."""
    b = os.environ.get('SKYGO_TEST_BINARY') or os.path.join(REPO, 'bin', 'sky')
    if not os.path.isabs(b):
        b = os.path.join(REPO, b)
    return b if os.access(b, os.X_OK) else None


def free_port():
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


class LocalServer:
    """One SkyGo installation: HOME, port, and the environment every sky and
    python3 call of the test runs with. extra_path goes first on PATH, so
    the server's jobs (which keep the server's PATH) find it too."""

    def __init__(self, binary, extra_path=()):
        self.bin = binary
        # Short, under /tmp: agent sockets live under node homes and unix
        # socket paths are capped at 108 bytes.
        self.home = tempfile.mkdtemp(prefix='skypy-', dir='/tmp')
        self.port = free_port()
        path = list(extra_path) + [os.path.dirname(binary), os.environ.get('PATH', '/usr/bin:/bin')]
        # Built from scratch so the machine's credentials, KUBECONFIG or
        # SKYPILOT_* settings never leak in.
        self.env = {
            'PATH': os.pathsep.join(path),
            'HOME': self.home,
            'USER': os.environ.get('USER') or 'sdktest',
            'LANG': 'C.UTF-8',
            'SKYPILOT_API_SERVER_LOCAL_PORT': str(self.port),
            'SKYPILOT_CATALOG_DIR': os.path.join(REPO, 'testdata', 'catalog', 'v8'),
            'SKYGO_SKY_BINARY': binary,
            'PYTHONPATH': os.path.join(REPO, 'python'),
        }
        for k in ('SKYGO_LOCAL_NETNS', 'TMPDIR'):
            if k in os.environ:
                self.env[k] = os.environ[k]
        self.endpoint = 'http://127.0.0.1:%d' % self.port

    def sky(self, *args, timeout=180, check=True):
        """Runs the sky CLI; returns the CompletedProcess."""
        r = subprocess.run([self.bin] + list(args), env=self.env, capture_output=True,
                           text=True, timeout=timeout)
        if check and r.returncode != 0:
            raise AssertionError('sky %s exited %d\n--- stdout:\n%s--- stderr:\n%s'
                                 % (' '.join(args), r.returncode, r.stdout, r.stderr))
        return r

    def sky_json(self, *args):
        return json.loads(self.sky(*(list(args) + ['-o', 'json'])).stdout)

    def start(self):
        self.sky('api', 'start', timeout=60)
        return self

    def server_log_tail(self, n=40):
        d = os.path.join(self.home, '.sky', 'skygo', 'api_server')
        try:
            names = [x for x in os.listdir(d) if x.endswith('.log')]
        except OSError:
            return ''
        out = []
        for name in names:
            with open(os.path.join(d, name), errors='replace') as f:
                out.append('--- %s:\n%s' % (name, ''.join(f.readlines()[-n:])))
        return '\n'.join(out)

    def stop(self):
        """Tears everything down; returns the problems it met (a test fails
        on them, after its own assertions)."""
        problems = []
        server_dir = os.path.join(self.home, '.sky', 'skygo', 'api_server')
        if os.path.isdir(server_dir):
            for args in (('jobs', 'cancel', '-a', '-y'), ('down', '-a', '-y'), ('api', 'stop')):
                try:
                    r = self.sky(*args, check=False)
                    if r.returncode != 0:
                        problems.append('sky %s: exit %d: %s' % (' '.join(args), r.returncode, r.stderr.strip()))
                except subprocess.TimeoutExpired:
                    problems.append('sky %s timed out' % ' '.join(args))
                if args[0] == 'jobs':
                    self._wait_jobs_gone()
            pid = self._pid(os.path.join(server_dir, 'server.pid'))
            if pid and _alive(pid):
                problems.append('API server pid %d survived `sky api stop`; killed' % pid)
                os.kill(pid, signal.SIGKILL)
        shutil.rmtree(self.home, ignore_errors=True)
        return problems

    def _wait_jobs_gone(self, timeout=60):
        end = time.time() + timeout
        while time.time() < end:
            r = self.sky('jobs', 'queue', '--skip-finished', '-o', 'json', check=False)
            if r.returncode == 0 and r.stdout.strip() in ('[]', ''):
                return
            time.sleep(1)

    @staticmethod
    def _pid(path):
        try:
            with open(path) as f:
                return int(f.read().strip())
        except (OSError, ValueError):
            return None


def _alive(pid):
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    return True
