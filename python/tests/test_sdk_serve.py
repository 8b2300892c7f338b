"""sky.serve against a real SkyGo API server on the local infrastructure.

A server that does not take serve tasks as YAML (its /api/openapi.json
lists no task_yaml on /serve/up) must be refused with NotSupportedError
before anything is sent: one that ignored the field would run an empty
task."""
import io
import time
import urllib.request

import pytest

import sky
from sky.client import transport


def _service_task(port):
    return sky.Task.from_yaml_config({
        'name': 'sdkpy-svc',
        'run': f'python3 -m http.server {port} --bind 0.0.0.0',
        'service': {'readiness_probe': '/', 'replicas': 1},
        'resources': {'ports': port, 'infra': 'local'},
    })


def test_serve_up_status_down(sky_server):
    fields = transport.get_client().body_fields('/serve/up') or set()
    task = _service_task(18081)
    if 'task_yaml' not in fields:
        with pytest.raises(sky.exceptions.NotSupportedError,
                           match='task as YAML on /serve/up'):
            sky.serve.up(task, 'sdkpy-svc')
        return
    name, endpoint = sky.get(sky.serve.up(task, 'sdkpy-svc'))
    assert name == 'sdkpy-svc' and endpoint
    deadline = time.time() + 120
    rec = None
    while time.time() < deadline:
        [rec] = sky.get(sky.serve.status('sdkpy-svc'))
        if rec['status'] == 'READY':
            break
        time.sleep(1)
    assert rec and rec['status'] == 'READY', rec
    url = endpoint if endpoint.startswith('http') else 'http://' + endpoint
    with urllib.request.urlopen(url, timeout=10) as r:
        assert r.status == 200
    out = io.StringIO()
    sky.serve.tail_logs('sdkpy-svc', 'controller', follow=False,
                        output_stream=out)
    assert sky.get(sky.serve.down('sdkpy-svc')) is None
