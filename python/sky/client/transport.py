"""HTTP transport to a SkyGo API server, behaving as the Go CLI's client
(internal/client): the same endpoint discovery, credentials, headers,
auto-start of the local server, request waiting, log streaming and error
mapping.

The network modules (urllib.request pulls in http.client, email and ssl)
are imported on first use, not at ``import sky``.
"""
from __future__ import annotations

import base64
import json
import os
import threading
import time
TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: typing costs ms at import
    from typing import Any, Dict, Iterator, List, Optional, Tuple

from sky import exceptions

# Environment variables (SkyPilot's names; internal/client, internal/api).
ENV_ENDPOINT = 'SKYPILOT_API_SERVER_ENDPOINT'
ENV_TOKEN = 'SKYPILOT_SERVICE_ACCOUNT_TOKEN'
ENV_PORT = 'SKYPILOT_API_SERVER_LOCAL_PORT'
ENV_CATALOG_DIR = 'SKYPILOT_CATALOG_DIR'
ENV_SKY_BINARY = 'SKYGO_SKY_BINARY'
DEFAULT_PORT = 46580

HEADER_API_VERSION = 'X-SkyPilot-API-Version'
HEADER_VERSION = 'X-SkyPilot-Version'
HEADER_REQUEST_ID = 'X-Skypilot-Request-ID'
HEADER_STREAM_REQUEST_ID = 'X-SkyPilot-Stream-Request-ID'
HEADER_USER_NAME = 'X-SkyPilot-User-Name'
SERVER_HEADER_PREFIX = 'skygo/'

# How long the client waits for a local server it started (Go: 30 s).
START_TIMEOUT = 30.0
# Calls that answer at once (submit, status, upload) give up after this;
# /api/get and /api/stream wait as long as the request runs.
SHORT_TIMEOUT = 60.0


def sky_dir(home: str) -> str:
    return os.path.join(home, '.sky')


def skygo_root(home: str) -> str:
    return os.path.join(home, '.sky', 'skygo')


def login_path(home: str) -> str:
    """SkyGo's own login file (`sky api login` writes it)."""
    return os.path.join(skygo_root(home), 'login.yaml')


def config_path(home: str) -> str:
    """The user's ~/.sky/config.yaml, shared with SkyPilot."""
    return os.path.join(sky_dir(home), 'config.yaml')


def server_dir(home: str) -> str:
    return os.path.join(skygo_root(home), 'api_server')


def cookies_path(home: str) -> str:
    return os.path.join(skygo_root(home), 'cookies.txt')


def upload_hashes_path(home: str) -> str:
    return os.path.join(skygo_root(home), 'upload_hashes.json')


def _unquote(v: str) -> str:
    v = v.strip()
    if len(v) >= 2 and v[0] == v[-1] and v[0] in '"\'':
        return v[1:-1]
    return v


def _parse_api_server(text: str) -> Optional[Dict[str, str]]:
    """The api_server mapping of a config file in the common block form
    (``api_server:`` then indented ``key: value`` lines), or None when the
    file uses YAML this small reader does not follow."""
    out: Dict[str, str] = {}
    inside = False
    indent = None
    for raw in text.splitlines():
        line = raw.split(' #', 1)[0].rstrip()
        if not line.strip() or line.lstrip().startswith('#'):
            continue
        if line.startswith('---'):
            continue
        lead = len(line) - len(line.lstrip())
        if lead == 0:
            inside = False
            key, sep, rest = line.partition(':')
            if not sep:
                return None
            if key.strip() == 'api_server':
                if rest.strip() and rest.strip() not in ('{}', 'null', '~'):
                    return None  # flow style: leave to a YAML parser
                inside = True
                indent = None
            continue
        if not inside:
            continue
        if indent is None:
            indent = lead
        if lead != indent:
            return None
        key, sep, rest = line.strip().partition(':')
        if not sep:
            return None
        rest = rest.strip()
        if rest in ('|', '>', '|-', '>-'):
            return None
        out[key.strip()] = '' if rest in ('null', '~') else _unquote(rest)
    return out


def read_login(home: str) -> Dict[str, str]:
    """api_server.endpoint and api_server.service_account_token from
    SkyGo's login file when one exists, else from ~/.sky/config.yaml
    (internal/client ReadLogin). Missing files are not errors."""
    for path in (login_path(home), config_path(home)):
        try:
            with open(path, encoding='utf-8') as f:
                text = f.read()
        except FileNotFoundError:
            continue
        doc = _parse_api_server(text)
        if doc is None:
            try:
                import yaml  # pylint: disable=import-outside-toplevel
            except ImportError as e:
                raise exceptions.SkyPilotError(
                    f'{path}: its api_server section needs a YAML parser to '
                    'read: pip install PyYAML or apt install python3-yaml'
                ) from e
            try:
                full = yaml.safe_load(text) or {}
            except yaml.YAMLError as e:
                raise exceptions.SkyPilotError(f'{path}: {e}') from e
            doc = (full.get('api_server') if isinstance(full, dict) else
                   None) or {}
        return {
            'endpoint': str(doc.get('endpoint') or ''),
            'token': str(doc.get('service_account_token') or ''),
            'source': path,
        }
    return {'endpoint': '', 'token': '', 'source': ''}


def write_login(home: str, endpoint: str, token: str) -> None:
    """Stores the endpoint and token in SkyGo's login file, 0600; empty
    values record a logout (internal/client WriteLogin)."""
    path = login_path(home)
    os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
    lines = ['api_server:']
    lines.append(f'    endpoint: {json.dumps(endpoint)}' if endpoint else
                 '    endpoint: ""')
    lines.append(f'    service_account_token: {json.dumps(token)}'
                 if token else '    service_account_token: ""')
    tmp = path + '.tmp'
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, 'w', encoding='utf-8') as f:
        f.write('\n'.join(lines) + '\n')
    os.replace(tmp, path)


def local_port() -> int:
    v = os.environ.get(ENV_PORT, '').strip()
    if not v:
        return DEFAULT_PORT
    try:
        p = int(v)
    except ValueError:
        p = 0
    if p <= 0 or p > 65535:
        raise ValueError(f'{ENV_PORT}={v!r} is not a port number (1-65535)')
    return p


def local_endpoint() -> str:
    return f'http://127.0.0.1:{local_port()}'


def _redact(url: str) -> str:
    from urllib.parse import urlsplit, urlunsplit  # cheap, no network
    parts = urlsplit(url)
    if '@' not in parts.netloc:
        return url
    user, _, host = parts.netloc.rpartition('@')
    return urlunsplit(parts._replace(netloc=user.split(':', 1)[0] + '@' +
                                     host))


def os_user_name() -> str:
    try:
        import pwd  # pylint: disable=import-outside-toplevel
        name = pwd.getpwuid(os.getuid()).pw_name
        if name:
            return name
    except (ImportError, KeyError):
        pass
    return os.environ.get('USER', '')


def client_env() -> Optional[Dict[str, str]]:
    """The client settings a request carries (api.ClientEnv): only
    settings, never a token or secret, as the body is recorded."""
    v = os.environ.get(ENV_CATALOG_DIR)
    if v:
        return {ENV_CATALOG_DIR: v}
    return None


class Response:
    """One HTTP answer: status, headers and the open body."""

    def __init__(self, status: int, headers: Any, fp: Any) -> None:
        self.status = status
        self.headers = headers
        self._fp = fp

    def header(self, name: str) -> str:
        return self.headers.get(name) or ''

    def read(self) -> bytes:
        try:
            return self._fp.read()
        finally:
            self.close()

    def json(self) -> Any:
        data = self.read()
        return json.loads(data) if data.strip() else None

    def iter_lines(self) -> Iterator[str]:
        try:
            while True:
                line = self._fp.readline()
                if not line:
                    return
                yield line.decode('utf-8', errors='replace')
        finally:
            self.close()

    def close(self) -> None:
        try:
            self._fp.close()
        except Exception:  # pylint: disable=broad-except
            pass


class Client:
    """Talks to one API server endpoint; see internal/client.Client."""

    def __init__(self, endpoint: Optional[str] = None,
                 token: Optional[str] = None, home: Optional[str] = None,
                 auto_start: bool = True,
                 no_stored_token: bool = False) -> None:
        from urllib.parse import urlsplit, urlunsplit, unquote
        self.home = home or os.path.expanduser('~')
        login = read_login(self.home)
        ep = endpoint or os.environ.get(ENV_ENDPOINT, '').strip() or \
            login['endpoint']
        self.local = False
        if not ep:
            ep = local_endpoint()
            self.local = True
        parts = urlsplit(ep.rstrip('/'))
        if parts.scheme not in ('http', 'https') or not parts.hostname:
            raise ValueError(
                f'API server endpoint {_redact(ep)!r} is not an http(s):// '
                f'URL; fix {ENV_ENDPOINT} or run `sky api login -e URL`')
        self._auth = ''  # never printed
        netloc = parts.netloc
        if '@' in netloc:
            # user:password in the URL means basic auth; it stays out of
            # .endpoint so that it is never printed.
            userinfo, _, netloc = netloc.rpartition('@')
            user, _, pw = userinfo.partition(':')
            cred = f'{unquote(user)}:{unquote(pw)}'.encode()
            self._auth = 'Basic ' + base64.b64encode(cred).decode()
        tok = token or os.environ.get(ENV_TOKEN, '')
        if not tok and not no_stored_token:
            tok = login['token']
        if tok:
            self._auth = 'Bearer ' + tok
        self.endpoint = urlunsplit((parts.scheme, netloc, parts.path, '', ''))
        self.auto_start = auto_start
        self._checked = False  # health (own server, API version) seen
        self._lock = threading.Lock()
        self._opener = None
        self._openapi: Optional[Dict[str, Any]] = None

    # ---- low level ----

    @property
    def has_credentials(self) -> bool:
        return bool(self._auth)

    def _get_opener(self):
        if self._opener is None:
            import urllib.request  # pylint: disable=import-outside-toplevel
            handlers: List[Any] = []
            if self.local:
                # Go's ProxyFromEnvironment never proxies loopback.
                handlers.append(urllib.request.ProxyHandler({}))
            self._opener = urllib.request.build_opener(*handlers)
        return self._opener

    def _headers(self, content_type: Optional[str]) -> Dict[str, str]:
        from sky import API_VERSION, __version__
        h = {HEADER_API_VERSION: str(API_VERSION),
             HEADER_VERSION: __version__}
        if content_type:
            h['Content-Type'] = content_type
        if self._auth:
            h['Authorization'] = self._auth
        else:
            name = os_user_name()
            if name:
                h[HEADER_USER_NAME] = name
        return h

    def _url(self, path: str, query: Optional[Dict[str, Any]]) -> str:
        from urllib.parse import urlencode
        url = self.endpoint.rstrip('/') + path
        if query:
            url += '?' + urlencode(query, doseq=True)
        return url

    def _send(self, method: str, path: str, query: Optional[Dict[str, Any]],
              data: Optional[bytes], content_type: Optional[str],
              timeout: Optional[float]) -> Response:
        """One HTTP exchange. Returns any status; raises OSError-like
        URLError on transport failure."""
        import urllib.error  # pylint: disable=import-outside-toplevel
        import urllib.request  # pylint: disable=import-outside-toplevel
        req = urllib.request.Request(self._url(path, query), data=data,
                                     method=method,
                                     headers=self._headers(content_type))
        try:
            resp = self._get_opener().open(req, timeout=timeout)
        except urllib.error.HTTPError as e:
            return Response(e.code, e.headers, e)
        return Response(resp.status, resp.headers, resp)

    @staticmethod
    def _refused(err: BaseException) -> bool:
        reason = getattr(err, 'reason', err)
        return isinstance(reason, (ConnectionRefusedError,)) or (
            isinstance(reason, OSError) and
            getattr(reason, 'errno', None) in (111, 61))

    @staticmethod
    def _reset(err: BaseException) -> bool:
        reason = getattr(err, 'reason', err)
        return isinstance(reason, (ConnectionResetError,
                                   ConnectionAbortedError)) or \
            type(err).__name__ == 'RemoteDisconnected'

    def _conn_error(self, err: BaseException) -> Exception:
        reason = getattr(err, 'reason', err)
        text = getattr(reason, 'strerror', None) or str(reason)
        return exceptions.ApiServerConnectionError(self.endpoint, text)

    def _check_own(self, resp: Response) -> None:
        if not self.local:
            return
        if resp.header('Server').startswith(SERVER_HEADER_PREFIX):
            return
        resp.close()
        port = local_port()
        raise exceptions.ForeignApiServerError(
            'another API server answers on SkyGo\'s local port: a SkyPilot '
            f'API server is running at {self.endpoint}. Stop it with '
            'SkyPilot\'s `sky api stop`, or give SkyGo another port: '
            f'export {ENV_PORT}={port + 1 if port < 65535 else DEFAULT_PORT + 1}')

    @staticmethod
    def _api_error(resp: Response) -> exceptions.ApiServerError:
        raw = resp.read()[:1 << 20]
        detail = raw.decode('utf-8', errors='replace').strip()
        try:
            v = json.loads(raw)
        except ValueError:
            v = None
        if isinstance(v, dict):
            if v.get('error') == 'version_mismatch':
                detail = str(v.get('message', detail))
                return exceptions.APIVersionMismatchError(detail)
            if 'detail' in v:
                d = v['detail']
                detail = d if isinstance(d, str) else json.dumps(d)
        if resp.status == 401:
            detail += (' (log in with `sky api login -e URL --token sky_...` '
                       f'or set {ENV_TOKEN})')
        return exceptions.ApiServerError(
            f'API server answered {resp.status}: {detail}', resp.status)

    # ---- health, version and auto-start ----

    def health(self) -> Dict[str, Any]:
        """GET /api/health (never starts a server)."""
        try:
            resp = self._send('GET', '/api/health', None, None, None, 10.0)
        except OSError as e:
            if self.local and (self._refused(e) or self._reset(e)):
                raise _NotRunning(self.endpoint) from e
            raise self._conn_error(e) from e
        self._check_own(resp)
        if resp.status != 200:
            raise self._api_error(resp)
        return resp.json() or {}

    def _check_version(self, h: Dict[str, Any]) -> None:
        from sky import API_VERSION
        try:
            got = int(str(h.get('api_version') or '0'))
        except ValueError:
            got = 0
        if h.get('status') == 'needs_auth' and got == 0:
            return  # a probe without credentials learns nothing more
        if got < API_VERSION:
            raise exceptions.APIVersionMismatchError(
                f'the API server at {self.endpoint} speaks API version '
                f'{got or "unknown"}; this client needs >= {API_VERSION}: '
                'upgrade the server (sky api stop; sky api start)')

    def ensure_checked(self) -> None:
        """Before the first operation: a local endpoint must be SkyGo's,
        and any server must speak this client's API version."""
        if self._checked:
            return
        try:
            h = self.health()
        except _NotRunning:
            if not self.auto_start:
                raise exceptions.ApiServerConnectionError(
                    self.endpoint, 'SkyPilot API server is not running; '
                    'start it with `sky api start`') from None
            self._ensure_server()
            h = self.health()
        self._check_version(h)
        self._checked = True

    def _sky_binary(self) -> str:
        import shutil  # pylint: disable=import-outside-toplevel
        b = os.environ.get(ENV_SKY_BINARY, '').strip()
        if b:
            return b
        found = shutil.which('sky')
        if not found:
            raise exceptions.ApiServerConnectionError(
                self.endpoint, 'no SkyGo API server is running and no `sky` '
                f'binary is on PATH to start one: install SkyGo or set '
                f'{ENV_SKY_BINARY}=/path/to/sky')
        return found

    def _ensure_server(self) -> None:
        """Starts the local server unless one answers. The flock on
        ~/.sky/skygo/api_server/.start.lock is the one the Go client
        takes, so a CLI call and an SDK call racing start one server."""
        import fcntl  # pylint: disable=import-outside-toplevel
        import subprocess  # pylint: disable=import-outside-toplevel
        d = server_dir(self.home)
        os.makedirs(d, mode=0o700, exist_ok=True)
        fd = os.open(os.path.join(d, '.start.lock'), os.O_CREAT | os.O_RDWR,
                     0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                self.health()
                return
            except _NotRunning:
                pass
            log_path = os.path.join(d, 'server.log')
            argv = [self._sky_binary(), 'api', 'start', '--foreground']
            env = dict(os.environ)
            env['HOME'] = self.home
            with open(log_path, 'ab') as logf, \
                    open(os.devnull, 'rb') as devnull:
                try:
                    subprocess.Popen(argv, stdin=devnull, stdout=logf,
                                     stderr=logf, env=env,
                                     start_new_session=True)
                except OSError as e:
                    raise exceptions.ApiServerConnectionError(
                        self.endpoint, f'start API server ({argv[0]}): {e}'
                    ) from e
            deadline = time.monotonic() + START_TIMEOUT
            wait = 0.005
            while True:
                try:
                    self.health()
                    return
                except _NotRunning:
                    pass
                if time.monotonic() > deadline:
                    raise exceptions.ApiServerConnectionError(
                        self.endpoint, 'started a local API server but it '
                        f'did not answer within {START_TIMEOUT:.0f}s; see '
                        f'{log_path}')
                time.sleep(wait)
                wait = min(2 * wait, 0.05)
        finally:
            try:
                fcntl.flock(fd, fcntl.LOCK_UN)
            finally:
                os.close(fd)

    # ---- calls ----

    def request(self, method: str, path: str,
                query: Optional[Dict[str, Any]] = None, body: Any = None,
                raw: Optional[bytes] = None,
                timeout: Optional[float] = SHORT_TIMEOUT,
                check: bool = True) -> Response:
        """One call; raises ApiServerError on a non-2xx answer. On a local
        endpoint a refused (or reset) connection starts the server and the
        call is sent once more (internal/client do)."""
        if check:
            self.ensure_checked()
        if raw is not None:
            data, ctype = raw, 'application/octet-stream'
        elif body is not None:
            data, ctype = json.dumps(body).encode(), 'application/json'
        else:
            data, ctype = None, None
        try:
            resp = self._send(method, path, query, data, ctype, timeout)
        except OSError as e:
            if self.local and self.auto_start and (self._refused(e) or
                                                   self._reset(e)):
                self._ensure_server()
                try:
                    resp = self._send(method, path, query, data, ctype,
                                      timeout)
                except OSError as e2:
                    raise self._conn_error(e2) from e2
            elif self.local and self._refused(e):
                raise exceptions.ApiServerConnectionError(
                    self.endpoint, 'SkyPilot API server is not running; '
                    'start it with `sky api start`') from e
            else:
                raise self._conn_error(e) from e
        self._check_own(resp)
        if resp.status >= 300:
            raise self._api_error(resp)
        return resp

    def call_json(self, method: str, path: str, body: Any = None,
                  query: Optional[Dict[str, Any]] = None) -> Any:
        return self.request(method, path, query=query, body=body).json()

    def submit(self, op: str, body: Optional[Dict[str, Any]] = None) -> str:
        """POST an operation; returns its request id at once."""
        path = '/' + op[len('sky.'):].replace('.', '/') if op.startswith(
            'sky.') else '/' + op.replace('.', '/')
        resp = self.request('POST', path, body=body if body is not None
                            else {})
        rid = resp.header(HEADER_REQUEST_ID)
        resp.close()
        if not rid:
            raise exceptions.ApiServerError(
                f'API server at {self.endpoint} accepted {op} but sent no '
                'request id')
        return rid

    def get_record(self, request_id: str) -> Dict[str, Any]:
        """Blocks until the request is final; returns its record. A FAILED
        or CANCELLED request raises the exception of its error type."""
        try:
            resp = self.request('GET', '/api/get',
                                query={'request_id': request_id},
                                timeout=None)
            rec = resp.json() or {}
        except exceptions.ApiServerError as e:
            # FAILED comes back as 500 with the record as detail.
            rec = _failed_record(e)
            if rec is None:
                raise
        _raise_for(rec)
        return rec

    def stream(self, request_id: Optional[str] = None, follow: bool = True,
               tail: Optional[int] = None, server_logs: bool = False,
               log_path: Optional[str] = None) -> Tuple[str, Iterator[str]]:
        """GET /api/stream: the id of the request streamed and its lines."""
        q: Dict[str, Any] = {'follow': 'true' if follow else 'false'}
        if request_id:
            q['request_id'] = request_id
        if log_path:
            q['log_path'] = log_path
        if tail is not None and tail > 0:
            q['tail'] = str(tail)
        if server_logs:
            q['server_logs'] = 'true'
        resp = self.request('GET', '/api/stream', query=q, timeout=None)
        return resp.header(HEADER_STREAM_REQUEST_ID), resp.iter_lines()

    def requests_status(self, request_ids: Optional[List[str]] = None,
                        all_status: bool = False,
                        limit: Optional[int] = None,
                        cluster_name: Optional[str] = None,
                        all_users: bool = False) -> List[Dict[str, Any]]:
        q: Dict[str, Any] = {}
        if request_ids:
            q['request_ids'] = list(request_ids)
        if all_status:
            q['all_status'] = 'true'
        if limit:
            q['limit'] = str(limit)
        if cluster_name:
            q['cluster_name'] = cluster_name
        if all_users:
            q['all_users'] = 'true'
        return self.call_json('GET', '/api/status', query=q) or []

    def cancel(self, request_ids: Optional[List[str]],
               all_users: bool = False) -> List[str]:
        body = {'request_ids': list(request_ids) if request_ids else None,
                'all_users': all_users}
        return self.call_json('POST', '/api/cancel', body=body) or []

    def body_fields(self, path: str) -> Optional[set]:
        """The JSON fields the server's POST path takes, from its OpenAPI
        document (GET /api/openapi.json, fetched once); None when the
        server publishes none or does not have the path."""
        if self._openapi is None:
            try:
                self._openapi = self.call_json('GET', '/api/openapi.json')
            except exceptions.ApiServerError as e:
                if e.status_code != 404:
                    raise
                self._openapi = {}
        doc = self._openapi or {}
        try:
            schema = doc['paths'][path]['post']['requestBody']['content'][
                'application/json']['schema']
        except (KeyError, TypeError):
            return None
        fields: set = set()

        def walk(sc: Any, depth: int = 0) -> None:
            if not isinstance(sc, dict) or depth > 8:
                return
            ref = sc.get('$ref')
            if isinstance(ref, str) and ref.startswith('#/components/schemas/'):
                walk(doc.get('components', {}).get('schemas', {}).get(
                    ref.rsplit('/', 1)[1]), depth + 1)
            fields.update((sc.get('properties') or {}).keys())
            for sub in sc.get('allOf') or []:
                walk(sub, depth + 1)

        walk(schema)
        return fields

    def download(self, request_id: str, path: str) -> Response:
        return self.request('GET', '/api/download',
                            query={'request_id': request_id, 'path': path},
                            timeout=None)


class _NotRunning(Exception):
    """Nothing answers at the local endpoint."""


def _failed_record(e: exceptions.ApiServerError) -> Optional[Dict[str, Any]]:
    if e.status_code != 500:
        return None
    text = str(e)
    i = text.find('{')
    if i < 0:
        return None
    try:
        rec = json.loads(text[i:])
    except ValueError:
        return None
    if isinstance(rec, dict) and rec.get('request_id'):
        return rec
    return None


def _raise_for(rec: Dict[str, Any]) -> None:
    status = rec.get('status')
    if status not in ('FAILED', 'CANCELLED'):
        return
    typ, msg = 'RequestCancelled', f'Request {rec.get("request_id")} was ' \
        'cancelled'
    err = rec.get('error')
    if err:
        try:
            v = json.loads(err)
            typ = v.get('type') or typ
            msg = v.get('message') or msg
        except (ValueError, AttributeError):
            msg = str(err)
    if status == 'CANCELLED':
        typ = 'RequestCancelled'
    raise exceptions.from_error_record(typ, msg, rec.get('request_id'))


_client: Optional[Client] = None
_client_key: Optional[Tuple[str, ...]] = None
_client_lock = threading.Lock()


def get_client() -> Client:
    """The process's client, made again when the settings that choose
    the endpoint change (env, HOME), so tests and notebooks that switch
    servers get the new one."""
    global _client, _client_key
    key = (os.environ.get(ENV_ENDPOINT, ''), os.environ.get(ENV_TOKEN, ''),
           os.environ.get(ENV_PORT, ''), os.path.expanduser('~'))
    with _client_lock:
        if _client is None or key != _client_key:
            _client = Client()
            _client_key = key
        return _client


def reset_client() -> None:
    global _client, _client_key
    with _client_lock:
        _client, _client_key = None, None
