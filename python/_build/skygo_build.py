"""The SDK's build backend (PEP 517 and PEP 660), standard library only.

`pip install ./python` must work offline: pip's default build isolation
would fetch setuptools from PyPI first, which a machine without network
cannot. A wheel of pure Python is a zip of the package plus three small
metadata files, so this backend writes it itself and needs nothing to be
installed first.
"""
import base64
import hashlib
import os
import re
import tarfile
import zipfile

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = 'sky'


def _project():
    """Name, version, summary and requires-python from pyproject.toml
    (read with a regex: tomllib is 3.11+, the SDK supports 3.9)."""
    with open(os.path.join(HERE, 'pyproject.toml'), encoding='utf-8') as f:
        text = f.read()
    project = text.split('[project]', 1)[1].split('\n[', 1)[0]

    def field(key):
        m = re.search(r'^%s\s*=\s*"([^"]*)"' % key, project, re.M)
        if not m:
            raise RuntimeError('pyproject.toml [project] has no %s' % key)
        return m.group(1)

    extras = {}
    opt = text.split('[project.optional-dependencies]', 1)
    if len(opt) == 2:
        for m in re.finditer(r'^(\w+)\s*=\s*\[([^\]]*)\]', opt[1].split('\n[', 1)[0], re.M):
            extras[m.group(1)] = re.findall(r'"([^"]+)"', m.group(2))
    return field('name'), field('version'), field('description'), field('requires-python'), extras


def _metadata():
    name, version, summary, python, extras = _project()
    lines = ['Metadata-Version: 2.1', 'Name: ' + name, 'Version: ' + version,
             'Summary: ' + summary, 'Requires-Python: ' + python]
    for extra, reqs in sorted(extras.items()):
        lines.append('Provides-Extra: ' + extra)
        lines += ['Requires-Dist: %s; extra == "%s"' % (r, extra) for r in reqs]
    readme = os.path.join(HERE, 'README.md')
    body = ''
    if os.path.exists(readme):
        lines.append('Description-Content-Type: text/markdown')
        with open(readme, encoding='utf-8') as f:
            body = '\n' + f.read()
    return name, version, '\n'.join(lines) + '\n' + body


def _dist_info(name, version):
    return '%s-%s.dist-info' % (name.replace('-', '_'), version)


def _wheel_name(name, version):
    return '%s-%s-py3-none-any.whl' % (name.replace('-', '_'), version)


def _package_files():
    root = os.path.join(HERE, PACKAGE)
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d != '__pycache__')
        for fn in sorted(filenames):
            if fn.endswith(('.pyc', '.pyo')):
                continue
            full = os.path.join(dirpath, fn)
            yield full, os.path.relpath(full, HERE).replace(os.sep, '/')


def _write_wheel(wheel_directory, files):
    """files: (archive name, bytes). Adds WHEEL, METADATA and RECORD."""
    name, version, metadata = _metadata()
    info = _dist_info(name, version)
    files = list(files) + [
        (info + '/METADATA', metadata.encode('utf-8')),
        (info + '/WHEEL', b'Wheel-Version: 1.0\nGenerator: skygo_build\nRoot-Is-Purelib: true\nTag: py3-none-any\n'),
        (info + '/top_level.txt', (PACKAGE + '\n').encode()),
    ]
    record = []
    for arc, data in files:
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b'=').decode()
        record.append('%s,sha256=%s,%d' % (arc, digest, len(data)))
    record.append(info + '/RECORD,,')
    whl = _wheel_name(name, version)
    with zipfile.ZipFile(os.path.join(wheel_directory, whl), 'w', zipfile.ZIP_DEFLATED) as z:
        for arc, data in files:
            z.writestr(arc, data)
        z.writestr(info + '/RECORD', '\n'.join(record) + '\n')
    return whl


def _read(path):
    with open(path, 'rb') as f:
        return f.read()


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def get_requires_for_build_editable(config_settings=None):
    return []


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    return _write_wheel(wheel_directory, [(arc, _read(full)) for full, arc in _package_files()])


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    # A .pth line puts this source tree on sys.path: edits take effect
    # without reinstalling.
    return _write_wheel(wheel_directory, [('skygo_editable.pth', (HERE + '\n').encode())])


def build_sdist(sdist_directory, config_settings=None):
    name, version, metadata = _metadata()
    base = '%s-%s' % (name.replace('-', '_'), version)
    out = base + '.tar.gz'
    with tarfile.open(os.path.join(sdist_directory, out), 'w:gz') as t:
        for rel in ['pyproject.toml', 'README.md', '_build/skygo_build.py']:
            if os.path.exists(os.path.join(HERE, rel)):
                t.add(os.path.join(HERE, rel), base + '/' + rel)
        for full, arc in _package_files():
            t.add(full, base + '/' + arc)
        info = tarfile.TarInfo(base + '/PKG-INFO')
        data = metadata.encode('utf-8')
        info.size = len(data)
        import io
        t.addfile(info, io.BytesIO(data))
    return out
