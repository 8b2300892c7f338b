"""`pip install ./python` works offline: the package builds with its own
standard-library backend (python/_build), and the wheel installs and
imports with nothing fetched."""
import os
import subprocess
import sys
import zipfile

import pytest

PYTHON_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_wheel_installs_offline_and_imports(tmp_path):
    r = subprocess.run([sys.executable, '-m', 'pip', '--version'],
                       capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip('this interpreter has no pip: %s' % r.stderr.strip())
    target = tmp_path / 'site'
    env = dict(os.environ, PIP_NO_INDEX='1', PIP_DISABLE_PIP_VERSION_CHECK='1')
    r = subprocess.run([sys.executable, '-m', 'pip', 'install', '--no-index', '--quiet',
                        '--target', str(target), PYTHON_DIR],
                       capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    info = [d for d in os.listdir(target) if d.endswith('.dist-info')]
    assert info == ['skygo-0.1.0.dev0.dist-info'], os.listdir(target)
    with open(target / info[0] / 'RECORD') as f:
        recorded = {line.split(',')[0] for line in f if line.strip()}
    assert 'sky/__init__.py' in recorded and 'sky/client/sdk.py' in recorded
    r = subprocess.run([sys.executable, '-c', 'import sky, sky.jobs, sky.serve; '
                        'print(sky.__version__, sky.__file__)'],
                       capture_output=True, text=True, cwd=str(tmp_path),
                       env=dict(os.environ, PYTHONPATH=str(target)))
    assert r.returncode == 0, r.stderr
    version, path = r.stdout.split()
    assert version == '0.1.0-dev' and path.startswith(str(target)), r.stdout


def test_backend_wheel_record_matches_contents(tmp_path):
    sys.path.insert(0, os.path.join(PYTHON_DIR, '_build'))
    try:
        import skygo_build  # pylint: disable=import-outside-toplevel
    finally:
        sys.path.pop(0)
    name = skygo_build.build_wheel(str(tmp_path))
    import base64
    import hashlib
    with zipfile.ZipFile(tmp_path / name) as z:
        names = set(z.namelist())
        record = z.read('skygo-0.1.0.dev0.dist-info/RECORD').decode().splitlines()
        for line in record:
            arc, digest, size = line.rsplit(',', 2)
            if arc.endswith('RECORD'):
                continue
            data = z.read(arc)
            want = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b'=').decode()
            assert digest == 'sha256=' + want and int(size) == len(data), arc
    assert not any('__pycache__' in n or n.endswith('.pyc') for n in names)
