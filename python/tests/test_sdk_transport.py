"""Transport against real servers: auto-start of the local server through
the `sky` binary (and sky.api_stop), a resumed chunked upload, and
stream_and_get of a request log."""
import hashlib
import io
import os
import shutil
import subprocess
import tempfile

import pytest

import sky
from sky import _upload
from sky.client import transport

from conftest import free_port, no_binary_reason, sky_binary, _kill_pid


def test_autostart_local_server(monkeypatch):
    binary = sky_binary()
    if binary is None:
        pytest.skip(no_binary_reason())
    home = tempfile.mkdtemp(prefix='skypy-as-', dir='/tmp')
    port = free_port()
    for k in ('SKYPILOT_API_SERVER_ENDPOINT',
              'SKYPILOT_SERVICE_ACCOUNT_TOKEN'):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv('HOME', home)
    monkeypatch.setenv('SKYPILOT_API_SERVER_LOCAL_PORT', str(port))
    monkeypatch.setenv('SKYGO_SKY_BINARY', binary)
    transport.reset_client()
    pid_file = os.path.join(home, '.sky', 'skygo', 'api_server',
                            'server.pid')
    pid = None
    try:
        # Nothing answers: the first call starts the server, then runs.
        assert sky.get(sky.status()) == []
        with open(pid_file, encoding='utf-8') as f:
            pid = int(f.read().strip())
        assert sky.api_info()['status'] == 'healthy'
        sky.api_stop()
        c = transport.Client(auto_start=False)
        with pytest.raises(sky.exceptions.ApiServerConnectionError):
            c.submit('status', {})
        pid = None
        sky.api_start()
        with open(pid_file, encoding='utf-8') as f:
            pid = int(f.read().strip())
        assert sky.api_info()['status'] == 'healthy'
        with pytest.raises(sky.exceptions.NotSupportedError, match='metrics'):
            sky.api_start(metrics=True)
        sky.api_stop()
    finally:
        if pid:
            _kill_pid(pid)
        transport.reset_client()
        shutil.rmtree(home, ignore_errors=True)


def test_upload_resumes_partial_blob(sky_server, tmp_path):
    c = transport.get_client()
    chunk = c.call_json('GET', _upload.PATH_LIMITS)['chunk_bytes']
    data = os.urandom(chunk + 12345)
    (tmp_path / 'big.bin').write_bytes(data)
    sha = hashlib.sha256(data).hexdigest()
    mode = os.stat(tmp_path / 'big.bin').st_mode & 0o777
    # A cut-off upload left the first chunk on the server.
    c.request('PUT', _upload.PATH_BLOB, query={
        'sha256': sha, 'size': str(len(data)), 'offset': '0',
        'mode': format(mode, 'o')}, raw=data[:chunk]).json()
    rep = _upload.upload(c, [('workdir', str(tmp_path))])
    assert rep['id'] and rep['files'] == 1
    assert rep['sent_bytes'] == 12345
    # The same tree again: nothing travels, the id is the same.
    again = _upload.upload(c, [('workdir', str(tmp_path))])
    assert again['id'] == rep['id'] and again['sent_bytes'] == 0


def test_many_small_files_batch(sky_server, tmp_path):
    for i in range(40):
        (tmp_path / f'f{i}.txt').write_text(f'file {i}\n')
    rep = _upload.upload(transport.get_client(),
                         [('workdir', str(tmp_path))])
    assert rep['files'] == 40 and rep['sent'] == 40


def test_stream_and_get_prints_request_log(sky_server):
    t = sky.Task(name='sg', run='echo sg')
    out = io.StringIO()
    job_id, handle = sky.stream_and_get(
        sky.launch(t, cluster_name='sdkpy-sg'), output_stream=out)
    assert job_id == 1 and handle.cluster_name == 'sdkpy-sg'
    text = out.getvalue()
    assert f'Job submitted, ID: {job_id}' in text, text
    assert '\x1b_skygo-status' not in text  # stage lines are not for pipes
    assert sky.stream_and_get(sky.down('sdkpy-sg'),
                              output_stream=io.StringIO()) is None


def test_sky_binary_missing(monkeypatch, tmp_path):
    monkeypatch.delenv('SKYGO_SKY_BINARY', raising=False)
    monkeypatch.setenv('PATH', str(tmp_path))
    monkeypatch.setenv('HOME', str(tmp_path))
    monkeypatch.setenv('SKYPILOT_API_SERVER_LOCAL_PORT', str(free_port()))
    monkeypatch.delenv('SKYPILOT_API_SERVER_ENDPOINT', raising=False)
    c = transport.Client()
    with pytest.raises(sky.exceptions.ApiServerConnectionError,
                       match='SKYGO_SKY_BINARY'):
        c.submit('status', {})
    assert subprocess  # the binary is looked up, never guessed
