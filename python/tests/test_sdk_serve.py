"""sky.serve against a real SkyGo API server on the local infrastructure."""
import io
import time
import urllib.request


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
    # This server takes serve tasks as YAML; an older one is refused
    # (test_sdk_unit covers the refusal).
    assert 'task_yaml' in fields, fields
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
