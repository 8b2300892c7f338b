"""Credentials against a real SkyGo API server that requires them: basic
auth from user:password in the endpoint URL, a service-account token from
SKYPILOT_SERVICE_ACCOUNT_TOKEN, and sky.api_login / sky.api_logout."""
import os

import pytest

import sky
from sky.client import transport

from conftest import SkyServer, no_binary_reason, sky_binary, _SDK_ENV


@pytest.fixture(scope='module')
def auth_server():
    binary = sky_binary()
    if binary is None:
        pytest.skip(no_binary_reason())
    srv = SkyServer(binary)
    srv.env.update({'ENABLE_SERVICE_ACCOUNTS': 'true',
                    'SKYPILOT_INITIAL_BASIC_AUTH': 'admin:pw-Secret1'})
    saved = {k: os.environ.get(k) for k in _SDK_ENV}
    try:
        srv.sky('api', 'start', '--enable-basic-auth', timeout=60)
        pid_file = os.path.join(srv.home, '.sky', 'skygo', 'api_server',
                                'server.pid')
        with open(pid_file, encoding='utf-8') as f:
            srv.pid = int(f.read().strip())
        for k in _SDK_ENV:
            os.environ.pop(k, None)
        os.environ['HOME'] = srv.home
        os.environ['SKYPILOT_CATALOG_DIR'] = srv.env['SKYPILOT_CATALOG_DIR']
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
            transport.reset_client()


def _use(endpoint=None, token=None):
    for k, v in (('SKYPILOT_API_SERVER_ENDPOINT', endpoint),
                 ('SKYPILOT_SERVICE_ACCOUNT_TOKEN', token)):
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v
    transport.reset_client()


def test_basic_auth_and_token(auth_server):
    ep = auth_server.endpoint
    _use(ep)
    with pytest.raises(sky.exceptions.ApiServerError) as ei:
        sky.status()
    assert ei.value.status_code == 401 and 'sky api login' in str(ei.value)

    _use(ep.replace('http://', 'http://admin:pw-Secret1@'))
    assert sky.get(sky.status()) == []
    assert sky.api_info()['user']['name'] == 'admin'
    c = transport.get_client()
    assert c.endpoint == ep  # the password is not kept in the endpoint
    tok = c.call_json('POST', '/users/service-account-tokens',
                      body={'token_name': 'sdk-test', 'role': 'admin'})
    secret = tok['token']
    assert secret.startswith('sky_')

    _use(ep, secret)
    assert sky.get(sky.status()) == []
    assert sky.api_info()['user']['name']

    _use(ep, 'sky_not-a-real-token')
    with pytest.raises(sky.exceptions.ApiServerError) as ei:
        sky.status()
    assert ei.value.status_code == 401 and secret not in str(ei.value)

    # Login stores endpoint and token (0600); logout forgets them.
    _use()
    sky.api_login(ep, service_account_token=secret)
    login = transport.login_path(auth_server.home)
    assert os.stat(login).st_mode & 0o777 == 0o600
    assert sky.get(sky.status()) == []
    with pytest.raises(sky.exceptions.ApiServerError, match='credentials'):
        sky.api_login(ep)
    sky.api_logout()
    c = transport.get_client()
    assert c.local and not c.has_credentials
