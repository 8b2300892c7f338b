"""Client units that need no server: endpoint discovery and credentials,
error mapping, result shapes, enums, local path checks, ignore rules and
the upload manifest, and the refusal of a too-old server (a stub HTTP
server answers /api/health only)."""
import base64
import hashlib
import http.server
import io
import json
import os
import threading

import pytest

import sky
from sky import _upload
from sky import exceptions
from sky.client import sdk
from sky.client import transport


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv('HOME', str(tmp_path))
    for k in ('SKYPILOT_API_SERVER_ENDPOINT', 'SKYPILOT_SERVICE_ACCOUNT_TOKEN',
              'SKYPILOT_API_SERVER_LOCAL_PORT'):
        monkeypatch.delenv(k, raising=False)
    transport.reset_client()
    yield tmp_path
    transport.reset_client()


def _write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, 'w', encoding='utf-8') as f:
        f.write(text)


# ---- endpoint discovery and credentials ----


def test_default_endpoint_is_local(home, monkeypatch):
    c = transport.Client()
    assert c.local and c.endpoint == 'http://127.0.0.1:46580'
    monkeypatch.setenv('SKYPILOT_API_SERVER_LOCAL_PORT', '47001')
    assert transport.Client().endpoint == 'http://127.0.0.1:47001'
    monkeypatch.setenv('SKYPILOT_API_SERVER_LOCAL_PORT', 'x')
    with pytest.raises(ValueError, match='not a port number'):
        transport.Client()


def test_env_endpoint_wins_over_config(home, monkeypatch):
    _write(str(home / '.sky' / 'config.yaml'),
           'api_server:\n  endpoint: http://cfg.example:1\n')
    assert transport.Client().endpoint == 'http://cfg.example:1'
    monkeypatch.setenv('SKYPILOT_API_SERVER_ENDPOINT', 'https://env.example/')
    c = transport.Client()
    assert c.endpoint == 'https://env.example' and not c.local


def test_login_file_wins_over_config_even_empty(home):
    _write(str(home / '.sky' / 'config.yaml'),
           'api_server:\n  endpoint: http://cfg.example:1\n')
    transport.write_login(str(home), 'http://login.example:2', 'sky_tok')
    assert transport.Client().endpoint == 'http://login.example:2'
    mode = os.stat(transport.login_path(str(home))).st_mode & 0o777
    assert mode == 0o600
    # A logout is recorded: config.yaml is no longer the fallback.
    transport.write_login(str(home), '', '')
    assert transport.Client().local


def test_config_parser_forms(home):
    assert transport._parse_api_server(
        '# c\ndb: x\napi_server:\n    endpoint: "http://a:1"  # here\n'
        '    service_account_token: \'sky_x\'\nother: 1\n') == {
            'endpoint': 'http://a:1', 'service_account_token': 'sky_x'}
    # Flow style is left to PyYAML.
    assert transport._parse_api_server(
        'api_server: {endpoint: http://a:1}\n') is None
    yaml = pytest.importorskip('yaml')
    assert yaml
    _write(str(home / '.sky' / 'config.yaml'),
           'api_server: {endpoint: "http://flow:3"}\n')
    assert transport.Client().endpoint == 'http://flow:3'


def test_basic_auth_kept_out_of_endpoint(home):
    c = transport.Client(endpoint='http://alice:s3cr%40t@h.example:9')
    assert c.endpoint == 'http://h.example:9'
    assert 's3cr' not in repr(c.__dict__.get('endpoint'))
    h = c._headers(None)
    assert h['Authorization'] == 'Basic ' + base64.b64encode(
        b'alice:s3cr@t').decode()
    assert 'X-SkyPilot-User-Name' not in h


def test_token_sources(home, monkeypatch):
    transport.write_login(str(home), 'http://h.example:9', 'sky_stored')
    c = transport.Client()
    assert c._headers(None)['Authorization'] == 'Bearer sky_stored'
    monkeypatch.setenv('SKYPILOT_SERVICE_ACCOUNT_TOKEN', 'sky_env')
    assert transport.Client()._headers(None)['Authorization'] == \
        'Bearer sky_env'
    assert transport.Client(no_stored_token=True, token='sky_arg')._headers(
        None)['Authorization'] == 'Bearer sky_arg'


def test_headers_without_auth(home):
    h = transport.Client()._headers('application/json')
    assert h['X-SkyPilot-API-Version'] == str(sky.API_VERSION)
    assert h['X-SkyPilot-Version'] == sky.__version__
    assert h['X-SkyPilot-User-Name']
    assert 'Authorization' not in h


def test_bad_endpoint(home):
    with pytest.raises(ValueError, match='not an http'):
        transport.Client(endpoint='ftp://u:pw@x')
    try:
        transport.Client(endpoint='ftp://u:pw@x')
    except ValueError as e:
        assert 'pw' not in str(e)


# ---- version refusal (stub server: /api/health only) ----


class _Health(http.server.BaseHTTPRequestHandler):
    api_version = '1'

    def do_GET(self):  # noqa: N802
        body = json.dumps({'status': 'healthy',
                           'api_version': self.api_version,
                           'version': 'old'}).encode()
        self.send_response(200)
        self.send_header('Content-Type', 'application/json')
        self.send_header('Content-Length', str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):  # noqa: N802
        self.send_response(500)
        self.end_headers()
        raise AssertionError('an operation reached a too-old server')

    def version_string(self):
        return 'skygo/0.0.1'  # SkyGo's Server header

    def log_message(self, *args):
        pass


def test_too_old_server_refused(home, monkeypatch):
    srv = http.server.HTTPServer(('127.0.0.1', 0), _Health)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    try:
        port = srv.server_address[1]
        monkeypatch.setenv('SKYPILOT_API_SERVER_LOCAL_PORT', str(port))
        transport.reset_client()
        with pytest.raises(exceptions.APIVersionMismatchError) as ei:
            sky.status()
        msg = str(ei.value)
        assert f'http://127.0.0.1:{port} speaks API version 1' in msg
        assert f'needs >= {sky.API_VERSION}' in msg
        assert 'sky api stop; sky api start' in msg
    finally:
        srv.shutdown()
        srv.server_close()


def test_foreign_server_refused(home, monkeypatch):

    class Foreign(_Health):
        api_version = '99'

        def version_string(self):
            return 'uvicorn'

        def do_GET(self):  # noqa: N802
            self.send_response(200)
            self.send_header('Content-Length', '2')
            self.end_headers()
            self.wfile.write(b'{}')

    srv = http.server.HTTPServer(('127.0.0.1', 0), Foreign)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        monkeypatch.setenv('SKYPILOT_API_SERVER_LOCAL_PORT',
                           str(srv.server_address[1]))
        transport.reset_client()
        with pytest.raises(exceptions.ForeignApiServerError,
                           match='another port'):
            sky.status()
    finally:
        srv.shutdown()
        srv.server_close()


def test_not_running_without_autostart(home, monkeypatch):
    from conftest import free_port
    monkeypatch.setenv('SKYPILOT_API_SERVER_LOCAL_PORT', str(free_port()))
    c = transport.Client(auto_start=False)
    with pytest.raises(exceptions.ApiServerConnectionError,
                       match='sky api start'):
        c.submit('status', {})


# ---- error mapping ----


@pytest.mark.parametrize('typ,cls,builtin', [
    ('ClusterDoesNotExist', exceptions.ClusterDoesNotExist, ValueError),
    ('ClusterNotUpError', exceptions.ClusterNotUpError, None),
    ('ValueError', exceptions.ServerValueError, ValueError),
    ('NotSupportedError', exceptions.NotSupportedError, None),
    ('ResourcesUnavailableError', exceptions.ResourcesUnavailableError, None),
    ('NoCloudAccessError', exceptions.NoCloudAccessError, None),
    ('InvalidSkyPilotConfigError', exceptions.InvalidSkyPilotConfigError,
     ValueError),
    ('JobNotFound', exceptions.JobNotFoundError, ValueError),
    ('RequestCancelled', exceptions.RequestCancelled, None),
    ('ClusterOwnerIdentityMismatchError',
     exceptions.ClusterOwnerIdentityMismatchError, None),
])
def test_error_types(typ, cls, builtin):
    e = exceptions.from_error_record(typ, 'the message', 'rid')
    assert type(e) is cls and str(e) == 'the message'
    assert e.error_type == typ and e.request_id == 'rid'
    assert isinstance(e, exceptions.SkyPilotError)
    if builtin:
        assert isinstance(e, builtin)


def test_unknown_error_type_keeps_name():
    e = exceptions.from_error_record('BrandNewError', 'boom')
    assert type(e) is exceptions.SkyPilotError
    assert str(e) == 'BrandNewError: boom'
    assert str(exceptions.from_error_record('SkyGoError', 'x')) == 'x'


def test_failed_record_raises():
    rec = {'request_id': 'r1', 'status': 'FAILED', 'error': json.dumps(
        {'type': 'ClusterDoesNotExist', 'message': 'Cluster c does not '
         'exist.', 'object': None})}
    with pytest.raises(exceptions.ClusterDoesNotExist, match='c does not'):
        transport._raise_for(rec)
    with pytest.raises(exceptions.RequestCancelled):
        transport._raise_for({'request_id': 'r2', 'status': 'CANCELLED',
                              'error': ''})
    transport._raise_for({'status': 'SUCCEEDED'})


def test_job_exit_codes():
    code = exceptions.JobExitCode.from_job_status
    assert code('SUCCEEDED') == 0 and code('FAILED_SETUP') == 100
    assert code('RUNNING') == 101 and code('') == 102
    assert code('CANCELLED') == 103
    assert code(sky.JobStatus.FAILED) == 100


# ---- enums and result shapes ----


def test_status_enums_are_strings():
    assert sky.ClusterStatus.UP == 'UP' and str(sky.ClusterStatus.UP) == 'UP'
    assert f'{sky.JobStatus.RUNNING}' == 'RUNNING'
    assert sky.jobs.ManagedJobStatus.parse('FAILED_SETUP').is_failed()
    assert sky.JobStatus.parse(None) is None
    with pytest.raises(ValueError, match='choose one of'):
        sky.ClusterStatus.parse('GONE')


def test_status_record_shape():
    rec = {'name': 'c', 'launched_at': 5, 'last_use': 'sky launch',
           'status': 'UP', 'autostop': -1, 'to_down': False, 'metadata':
           None, 'user_hash': 'h', 'user_name': 'u', 'resources_str':
           '1x(cpus=1, mem=1)', 'nodes': 1, 'head_ip': '127.0.0.2'}
    [out] = sdk._status_result([rec], {})
    for k in ('name', 'launched_at', 'handle', 'last_use', 'status',
              'autostop', 'to_down', 'metadata', 'user_hash', 'user_name',
              'resources_str'):
        assert k in out
    assert out['status'] is sky.ClusterStatus.UP and out['metadata'] == {}
    assert out['handle'].cluster_name == 'c'
    assert out['handle'].head_ip == '127.0.0.2'


def test_job_status_shapes():
    assert sdk._job_status_result({'job_id': 0, 'status': ''}, {}) == {
        None: None}
    assert sdk._job_status_result({'job_id': 3, 'status': 'RUNNING'}, {}) \
        == {3: sky.JobStatus.RUNNING}
    assert sdk._job_status_result({'job_id': 7, 'status': ''},
                                  {'job_ids': [7]}) == {7: None}


def test_queue_and_launch_shapes():
    v = {'c': [{'job_id': 1, 'job_name': 'j', 'username': 'u', 'user_hash':
                'h', 'submitted_at': 1.5, 'start_at': None, 'end_at': 2.9,
                'resources': '1x', 'status': 'SUCCEEDED', 'log_path': 'p'}]}
    [j] = sdk._queue_result(v, {'cluster_names': ['c']})
    assert j['status'] is sky.JobStatus.SUCCEEDED
    assert j['submitted_at'] == 1 and j['start_at'] is None
    job_id, handle = sdk._launch_result({'cluster_name': 'c', 'job_id': 2},
                                        {})
    assert job_id == 2 and handle.cluster_name == 'c'
    assert sdk._launch_result({'cluster_name': 'c'}, {'dryrun': True}) == (
        None, None)
    assert sdk._endpoints_result({'8080': '127.0.0.2:8080'}, {}) == {
        8080: '127.0.0.2:8080'}


def test_accelerator_shapes():
    v = {'json': {'A100': [
        {'cloud': 'AWS', 'instance_type': 'p4d', 'accelerator_name': 'A100',
         'accelerator_count': 8, 'cpu_count': 96, 'device_memory': 40,
         'memory': 1152, 'price': 32.7, 'spot_price': None,
         'region': 'us-east-1'},
        {'cloud': 'GCP', 'instance_type': 'a2', 'accelerator_name': 'A100',
         'accelerator_count': 1, 'cpu_count': 12, 'device_memory': 40,
         'memory': 85, 'price': 3.6, 'spot_price': 1.1,
         'region': 'us-central1'}]}}
    [info, _] = sdk._list_accelerators_result(v, {})['A100']
    assert info.cloud == 'AWS' and info.accelerator_count == 8
    assert info._asdict()['price'] == 32.7


def test_local_request_id_get():
    rid = sdk._local(['a', 'b'])
    assert isinstance(rid, str) and sky.get(rid) == ['a', 'b']


def test_refused_parameters():
    with pytest.raises(exceptions.NotSupportedError, match='backend'):
        sky.launch(sky.Task(run='x'), backend=object())
    with pytest.raises(ValueError, match='name of a storage'):
        sky.storage_delete('')
    with pytest.raises(exceptions.NotSupportedError):
        sky.get_user_workspace()
    with pytest.raises(ValueError, match='not both'):
        sky.api_cancel(['x'], all_users=True)


# ---- local paths ----


def test_paths_made_absolute_and_checked(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / 'wd').mkdir()
    (tmp_path / 'data.txt').write_text('x')
    cfg, roots = sdk._prepare_config(
        {'workdir': 'wd', 'file_mounts': {
            '/z': 'data.txt', '/a': 'wd', '/s3': 's3://bucket/x',
            '/b': {'name': 'bkt', 'source': 'wd'},
            '/c': {'name': 'lst', 'source': ['data.txt', 'wd']}}}, True,
        'task t')
    assert cfg['workdir'] == str(tmp_path / 'wd')
    assert cfg['file_mounts']['/z'] == str(tmp_path / 'data.txt')
    assert cfg['file_mounts']['/s3'] == 's3://bucket/x'
    assert cfg['file_mounts']['/b']['source'] == str(tmp_path / 'wd')
    # mounts/<i>: i indexes the sorted local destinations; storage/<i>/<j>
    # the sorted bucket destinations (URIs included) and their sources.
    assert roots == [('workdir', str(tmp_path / 'wd')),
                     ('mounts/0', str(tmp_path / 'wd')),
                     ('mounts/1', str(tmp_path / 'data.txt')),
                     ('storage/0/0', str(tmp_path / 'wd')),
                     ('storage/1/0', str(tmp_path / 'data.txt')),
                     ('storage/1/1', str(tmp_path / 'wd'))]
    with pytest.raises(ValueError, match='nope'):
        sdk._prepare_config({'workdir': 'nope'}, True, 'task t')
    with pytest.raises(ValueError, match='missing.txt'):
        sdk._prepare_config({'file_mounts': {'/d': 'missing.txt'}}, True,
                            'task t')
    cfg, roots = sdk._prepare_config({'workdir': 'wd', 'file_mounts': {
        '/d': 'data.txt', '/m': 'missing.txt'}}, False, 'task t')
    assert roots == [('workdir', str(tmp_path / 'wd'))]
    assert cfg['file_mounts']['/m'] == str(tmp_path / 'missing.txt')


def test_home_expanded_on_client(tmp_path, monkeypatch):
    monkeypatch.setenv('HOME', str(tmp_path))
    (tmp_path / 'proj').mkdir()
    cfg, _ = sdk._prepare_config({'workdir': '~/proj'}, True, 'task t')
    assert cfg['workdir'] == str(tmp_path / 'proj')


# ---- ignore rules and manifest ----


def test_ignore_rules(tmp_path):
    (tmp_path / '.gitignore').write_text(
        '*.log\n!keep.log\n/build/\ndocs/**/*.tmp\n\\#lit\n# comment\n')
    ig = _upload.Ignore(str(tmp_path))
    assert ig.match('a.log', False) and ig.match('sub/b.log', False)
    assert not ig.match('keep.log', False)
    assert ig.match('build', True) and not ig.match('build', False)
    assert not ig.match('sub/build', True)
    assert ig.match('docs/x/y/z.tmp', False) and ig.match('docs/z.tmp', False)
    assert ig.match('#lit', False)
    assert not ig.match('src/main.py', False)


def test_skyignore_replaces_gitignore(tmp_path):
    (tmp_path / '.gitignore').write_text('*.py\n')
    (tmp_path / '.skyignore').write_text('data/\n')
    ig = _upload.Ignore(str(tmp_path))
    assert not ig.match('a.py', False) and ig.match('data', True)


def test_scan_manifest(tmp_path):
    root = tmp_path / 'wd'
    (root / 'src').mkdir(parents=True)
    (root / 'src' / 'a.py').write_text('print(1)\n')
    (root / 'big.bin').write_bytes(b'\0' * 10)
    (root / 'empty').write_text('')
    (root / 'sub').mkdir()
    (root / 'sub' / '.gitignore').write_text('*.o\n')
    (root / 'sub' / 'x.o').write_text('o')
    (root / 'sub' / 'x.c').write_text('c')
    (root / 'x.o').write_text('top-level .o is kept')
    os.symlink('src/a.py', root / 'link')
    s = _upload.scan([('workdir', str(root))])
    by = {e['path']: e for e in s.entries}
    assert by['workdir']['type'] == 'dir'
    assert by['workdir/link'] == {'path': 'workdir/link', 'type': 'symlink',
                                  'mode': 0o777, 'link': 'src/a.py'}
    assert 'workdir/sub/x.o' not in by and 'workdir/x.o' in by
    a = by['workdir/src/a.py']
    assert a['sha256'] == hashlib.sha256(b'print(1)\n').hexdigest()
    assert a['size'] == 9 and a['mode'] == os.stat(root / 'src' /
                                                   'a.py').st_mode & 0o777
    assert 'size' not in by['workdir/empty']
    assert s.local[a['sha256']] == str(root / 'src' / 'a.py')
    # A file root is one entry named by the root.
    f = _upload.scan([('mounts/0', str(root / 'big.bin'))])
    assert [e['path'] for e in f.entries] == ['mounts/0']
    with pytest.raises(ValueError, match='more than its limit'):
        _upload.scan([('workdir', str(root))], limit=5)


def test_hash_cache_is_the_go_clients(tmp_path):
    """The SDK reads and writes the CLI's cache file in its format: an
    unchanged file is not read again, a rewritten one is."""
    root = tmp_path / 'w'
    root.mkdir()
    (root / 'a.txt').write_text('one')
    cache_path = str(tmp_path / 'upload_hashes.json')
    c = _upload.HashCache(cache_path)
    s = _upload.scan([('workdir', str(root))], cache=c)
    assert s.hashed == 1
    c.save()
    with open(cache_path) as f:
        saved = json.load(f)
    e = saved[str(root / 'a.txt')]
    st = os.stat(root / 'a.txt')
    assert e == {'s': 3, 'm': st.st_mtime_ns, 'c': st.st_ctime_ns,
                 'i': st.st_ino, 'h': hashlib.sha256(b'one').hexdigest(),
                 't': e['t']}
    again = _upload.scan([('workdir', str(root))],
                         cache=_upload.HashCache(cache_path))
    assert again.hashed == 0
    assert again.entries == s.entries
    (root / 'a.txt').write_text('two')
    changed = _upload.scan([('workdir', str(root))],
                           cache=_upload.HashCache(cache_path))
    assert changed.hashed == 1
    sha = {x['path']: x.get('sha256') for x in changed.entries}
    assert sha['workdir/a.txt'] == hashlib.sha256(b'two').hexdigest()


def test_batch_tar_entries(tmp_path):
    import io
    import tarfile
    p = tmp_path / 'f'
    p.write_bytes(b'hello')
    sha = hashlib.sha256(b'hello').hexdigest()
    s = _upload.Scanned()
    s.local[sha] = str(p)
    data = _upload._batch_tar(s, [{'sha256': sha, 'size': 5, 'mode': 0o640}])
    with tarfile.open(fileobj=io.BytesIO(data)) as tf:
        [m] = tf.getmembers()
        assert m.name == sha and m.size == 5 and m.mode == 0o640
        assert tf.extractfile(m).read() == b'hello'


class _Tty(io.StringIO):

    def isatty(self):
        return True


def test_stage_lines_dropped_into_a_pipe_drawn_on_a_tty():
    st = '\x1b_skygo-status Provisioning dev...\x1b\\\n'
    end = '\x1b_skygo-status \x1b\\\n'
    lines = ['a\n', st, 'b\n', end, 'c\n']
    pipe = io.StringIO()
    sdk._write_lines(iter(lines), pipe)
    assert pipe.getvalue() == 'a\nb\nc\n'
    tty = _Tty()
    sdk._write_lines(iter(lines), tty)
    assert tty.getvalue() == ('a\n\r\x1b[KProvisioning dev...'
                              '\r\x1b[Kb\nProvisioning dev...\r\x1b[Kc\n')
    relay = io.StringIO()
    sdk._write_lines(iter(lines), relay, relay=True)
    assert relay.getvalue() == ''.join(lines)
