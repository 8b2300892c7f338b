"""The SDK functions (sky.launch, sky.status, ...) over the SkyGo API
server's HTTP API.

Asynchronous functions return a :class:`RequestId` (a ``str``);
:func:`get` blocks until the request is final and returns the documented
Python shape, mapping the server's result JSON (the Go types of
internal/api) by the request's operation name.
"""
from __future__ import annotations

import json
import os
import sys
import time
TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: typing costs ms at import
    from typing import (Any, Callable, Dict, Iterator, List, Optional, Tuple,
                        Union)

from sky import _enums
from sky import exceptions
from sky.client import _ops
from sky.client import transport

# ---- request ids ----


class RequestId(str):
    """The id of a request on the API server (a str).

    ``_post`` (when set) turns the request's decoded result into what the
    function that submitted it documents; without it :func:`get` maps the
    result by the request's operation name.
    """
    _post: Optional[Callable[[Any, Dict[str, Any]], Any]] = None


class LocalRequestId(RequestId):
    """A request answered at once by the server (e.g. ``/api/cancel``,
    which has no request record): :func:`get` returns the stored value."""
    _value: Any = None


def _rid(value: str, post=None) -> RequestId:
    r = RequestId(value)
    if post is not None:
        r._post = post  # pylint: disable=protected-access
    return r


def _local(value: Any) -> LocalRequestId:
    import uuid  # pylint: disable=import-outside-toplevel
    r = LocalRequestId('local-' + uuid.uuid4().hex)
    r._value = value  # pylint: disable=protected-access
    return r


def _client() -> transport.Client:
    return transport.get_client()


def _submit(op: _ops.Op, body: Dict[str, Any], post=None) -> RequestId:
    return _rid(_client().submit(op.name, body), post)


def _set(body: Dict[str, Any], **fields: Any) -> Dict[str, Any]:
    """Adds the fields that are set: None and False stay out of the body
    (the server's defaults), while 0 is a value (idle_minutes=0)."""
    for k, v in fields.items():
        if v is not None and v is not False:
            body[k] = v
    return body


def _names_body(key: str, names: Any, all: bool = False,  # pylint: disable=redefined-builtin
                purge: bool = False, required: bool = False) -> Dict[str, Any]:
    """The body of a status or down of pools or services: the names (one
    name or a list) under key, and all/purge when set. required: a down
    names what it takes down, or says all."""
    names = [names] if isinstance(names, str) else names
    if required and not names and not all:
        raise ValueError(f'give {key} or all=True')
    return _set({}, **{key: list(names) if names else None},
                all=bool(all), purge=bool(purge))


def _not_supported(what: str, missing: str) -> exceptions.NotSupportedError:
    return exceptions.NotSupportedError(
        f'{what} is not available on a SkyGo server yet: {missing}')


def _refuse(name: str, value: Any, default: Any, why: str) -> None:
    """Internal and SkyPilot-only parameters: a non-default value cannot be
    honoured here, so it is refused rather than ignored."""
    if value != default:
        raise exceptions.NotSupportedError(
            f'{name}={value!r} is not supported by the SkyGo SDK: {why}')


# ---- handles and result mapping ----


class ResourceHandle:
    """The handle of a cluster as the SkyGo SDK returns it (SkyPilot's
    ResourceHandle is a backend object; this one is a plain record).

    Attributes: cluster_name, cluster_name_on_cloud, head_ip, launched_nodes,
    launched_resources (the resources string, e.g. ``1x(cpus=4, mem=8)``),
    cloud, region, ssh (whether ``ssh <cluster>`` reaches the head node).
    """

    def __init__(self, cluster_name: str, **kw: Any) -> None:
        self.cluster_name = cluster_name
        self.cluster_name_on_cloud = kw.get('cluster_name_on_cloud') or \
            cluster_name
        self.head_ip = kw.get('head_ip')
        self.launched_nodes = kw.get('launched_nodes')
        self.launched_resources = kw.get('launched_resources')
        self.cloud = kw.get('cloud')
        self.region = kw.get('region')
        self.ssh = kw.get('ssh')

    def get_cluster_name(self) -> str:
        return self.cluster_name

    def to_dict(self) -> Dict[str, Any]:
        return dict(self.__dict__)

    def __repr__(self) -> str:
        return (f'ResourceHandle(cluster_name={self.cluster_name!r}, '
                f'head_ip={self.head_ip!r}, '
                f'launched_resources={self.launched_resources!r})')

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, ResourceHandle) and \
            self.__dict__ == other.__dict__


def _launch_result(v: Any, body: Dict[str, Any]) -> Tuple[Optional[int],
                                                         Optional[Any]]:
    v = v or {}
    if body.get('dryrun'):
        return None, None
    job_id = v.get('job_id') or None
    name = v.get('cluster_name') or body.get('cluster_name')
    handle = ResourceHandle(name, ssh=v.get('ssh')) if name else None
    return job_id, handle


def _cluster_record(r: Dict[str, Any]) -> Dict[str, Any]:
    out = dict(r)
    out['status'] = _enums.ClusterStatus.parse(r.get('status'))
    out['handle'] = ResourceHandle(
        r.get('name'), cluster_name_on_cloud=r.get('cluster_name_on_cloud'),
        head_ip=r.get('head_ip') or None, launched_nodes=r.get('nodes'),
        launched_resources=r.get('resources_str'), cloud=r.get('cloud'),
        region=r.get('region'))
    for k in ('metadata', 'labels', 'links'):
        if out.get(k) is None:
            out[k] = {}
    return out


def _status_result(v: Any, body: Dict[str, Any]) -> List[Dict[str, Any]]:
    return [_cluster_record(r) for r in (v or [])]


def _int_or_none(x: Any) -> Optional[int]:
    return None if x is None else int(x)


def _job_record(j: Dict[str, Any]) -> Dict[str, Any]:
    out = dict(j)
    out['status'] = _enums.JobStatus.parse(j.get('status'))
    for k in ('submitted_at', 'start_at', 'end_at'):
        out[k] = _int_or_none(j.get(k))
    if out.get('metadata') is None:
        out['metadata'] = {}
    return out


def _queue_result(v: Any, body: Dict[str, Any]) -> List[Dict[str, Any]]:
    v = v or {}
    names = body.get('cluster_names') or list(v)
    jobs: List[Dict[str, Any]] = []
    for n in names:
        jobs.extend(_job_record(j) for j in (v.get(n) or []))
    return jobs


def _job_status_result(v: Any, body: Dict[str, Any]):
    v = v or {}
    ids = body.get('job_ids') or []
    st = _enums.JobStatus.parse(v.get('status'))
    if not ids:
        if st is None:
            return {None: None}
        return {v.get('job_id'): st}
    return {ids[0]: st}


def _cost_record(r: Dict[str, Any]) -> Dict[str, Any]:
    out = dict(r)
    out.setdefault('last_use', None)
    out['usage_intervals'] = [tuple(iv) for iv in (r.get('usage_intervals')
                                                   or [])]
    if r.get('status'):
        out['status'] = _enums.ClusterStatus.parse(r['status']) if r[
            'status'] in ('INIT', 'UP', 'STOPPED') else r['status']
    return out


def _endpoints_result(v: Any, body: Dict[str, Any]) -> Dict[int, str]:
    return {int(k): u for k, u in (v or {}).items()}


def _check_result(v: Any, body: Dict[str, Any]):
    enabled = {}
    for r in v or []:
        if r.get('enabled'):
            enabled[r.get('infra')] = list(r.get('capabilities') or
                                           ['compute'])
    return {'default': enabled}


def _enabled_clouds_result(v: Any, body: Dict[str, Any]) -> List[str]:
    return [r.get('infra') for r in (v or []) if r.get('enabled')]


class InstanceTypeInfo(tuple):
    """One accelerator offering (SkyPilot's InstanceTypeInfo namedtuple
    fields, in order)."""
    _fields = ('cloud', 'instance_type', 'accelerator_name',
               'accelerator_count', 'cpu_count', 'device_memory', 'memory',
               'price', 'spot_price', 'region')

    def __new__(cls, d: Dict[str, Any]):
        return super().__new__(cls, tuple(d.get(f) for f in cls._fields))

    def __getattr__(self, name: str) -> Any:
        try:
            return self[self._fields.index(name)]
        except ValueError:
            raise AttributeError(name) from None

    def _asdict(self) -> Dict[str, Any]:
        return dict(zip(self._fields, self))

    def __repr__(self) -> str:
        inner = ', '.join(f'{k}={v!r}' for k, v in zip(self._fields, self))
        return f'InstanceTypeInfo({inner})'


def _gpus_json(v: Any) -> Dict[str, list]:
    js = (v or {}).get('json') or {}
    if isinstance(js, str):
        js = json.loads(js)
    return js


def _list_accelerators_result(v: Any, body: Dict[str, Any]):
    return {name: [InstanceTypeInfo(o) for o in offs]
            for name, offs in _gpus_json(v).items()}


def _none(v: Any, body: Dict[str, Any]) -> None:
    return None


def _jobs_launch_result(v: Any, body: Dict[str, Any]):
    ids = (v or {}).get('job_ids') or []
    if len(ids) == 1:
        return ids[0]
    return ids or None


def _managed_record(j: Dict[str, Any]) -> Dict[str, Any]:
    out = dict(j)
    out['status'] = _enums.ManagedJobStatus.parse(j.get('status'))
    return out


def _jobs_queue_result(v: Any, body: Dict[str, Any]):
    return [_managed_record(j) for j in ((v or {}).get('jobs') or [])]


# Result mapping by the request's operation name (api.Request.name).
_RESULTS: Dict[str, Callable[[Any, Dict[str, Any]], Any]] = {
    _ops.LAUNCH.name: _launch_result,
    _ops.EXEC.name: _launch_result,
    _ops.STATUS.name: _status_result,
    _ops.QUEUE.name: _queue_result,
    _ops.JOB_STATUS.name: _job_status_result,
    _ops.STOP.name: _none,
    _ops.DOWN.name: _none,
    _ops.START.name: _none,
    _ops.AUTOSTOP.name: _none,
    _ops.CANCEL.name: _none,
    _ops.COST_REPORT.name: lambda v, b: [_cost_record(r) for r in (v or [])],
    _ops.ENDPOINTS.name: _endpoints_result,
    _ops.CHECK.name: _check_result,
    _ops.LIST_ACCELERATORS.name: _list_accelerators_result,
    _ops.OPTIMIZE.name: lambda v, b: v,
    _ops.JOBS_LAUNCH.name: _jobs_launch_result,
    _ops.JOBS_QUEUE.name: _jobs_queue_result,
    _ops.JOBS_CANCEL.name: _none,
    _ops.SERVE_DOWN.name: _none,
    _ops.SERVE_TERMINATE_REPLICA.name: _none,
}


def _decode_result(rec: Dict[str, Any]) -> Any:
    rv = rec.get('return_value')
    if rv in (None, ''):
        return None
    try:
        return json.loads(rv)
    except ValueError:
        return rv


def _map_result(rid: str, rec: Dict[str, Any]) -> Any:
    value = _decode_result(rec)
    try:
        body = json.loads(rec.get('request_body') or '{}')
    except ValueError:
        body = {}
    post = getattr(rid, '_post', None)
    if post is not None:
        return post(value, body)
    name = str(rec.get('name') or '')
    if name.startswith('sky.'):
        name = name[len('sky.'):]
    f = _RESULTS.get(name)
    return f(value, body) if f else value


def get(request_id: str) -> Any:
    """Waits for and gets the result of a request (id or id prefix).

    Raises the exception of the request's error type when it FAILED, and
    :class:`sky.exceptions.RequestCancelled` when it was cancelled.
    """
    if isinstance(request_id, LocalRequestId):
        return request_id._value  # pylint: disable=protected-access
    rec = _client().get_record(str(request_id))
    return _map_result(request_id, rec)


def _out(output_stream) -> Any:
    return output_stream if output_stream is not None else sys.stdout


# The server's stage lines ("Provisioning dev on Local (1 node)...") are
# APC strings (internal/ux Status): the CLI draws the current one as a live
# line on a terminal and drops them into a pipe; so does the SDK.
_STATUS_OPEN = '\x1b_skygo-status '
_STATUS_CLOSE = '\x1b\\'
_CLEAR_LINE = '\r\x1b[K'


def _status_of(line: str) -> Optional[str]:
    body = line.rstrip('\n')
    if body.startswith(_STATUS_OPEN) and body.endswith(_STATUS_CLOSE):
        return body[len(_STATUS_OPEN):-len(_STATUS_CLOSE)]
    return None


def _is_tty(out) -> bool:
    try:
        return bool(out.isatty())
    except Exception:  # pylint: disable=broad-except
        return False


def _write_lines(lines: Iterator[str], out, relay: bool = False) -> None:
    """Writes a request log: plain lines as they are; stage lines drawn as
    one live line on a terminal, dropped otherwise (relay: kept as the
    server sent them, for a caller that renders them itself)."""
    tty = _is_tty(out)
    live = ''
    try:
        for line in lines:
            msg = None if relay else _status_of(line)
            if msg is not None:
                if tty and (live or msg):
                    out.write(_CLEAR_LINE + msg)
                live = msg if tty else ''
            elif live:
                out.write(_CLEAR_LINE + line + live)
            else:
                out.write(line)
            try:
                out.flush()
            except Exception:  # pylint: disable=broad-except
                pass
    finally:
        if live:
            out.write(_CLEAR_LINE)


def stream_and_get(request_id: Optional[str] = None,
                   log_path: Optional[str] = None,
                   tail: Optional[int] = None, follow: bool = True,
                   output_stream: Optional[Any] = None,
                   relay_rich_status: bool = False) -> Any:
    """Streams the log of a request (or of a log file on the server) and
    returns the request's result; with follow=False returns None."""
    if isinstance(request_id, LocalRequestId):
        return get(request_id)
    c = _client()
    got, lines = c.stream(str(request_id) if request_id else None,
                          follow=follow, tail=tail, log_path=log_path)
    _write_lines(lines, _out(output_stream), relay=relay_rich_status)
    rid = request_id if request_id is not None else RequestId(got)
    if not follow or log_path or not rid:
        return None
    return _map_result(rid, c.get_record(str(rid)))


# ---- tasks: YAML, local paths, uploads ----


def _is_url(p: str) -> bool:
    return '://' in p


def _abs_local(p: str) -> str:
    return os.path.abspath(os.path.expanduser(p))


def _prepare_config(config: Dict[str, Any], mounts: bool,
                    what: str) -> Tuple[Dict[str, Any], List[Tuple[str, str]]]:
    """Makes the local paths of one task's YAML config absolute (``~``
    expanded here, on the client), checks they exist, and lists the upload
    roots: ``workdir`` and ``mounts/<i>`` over the sorted destinations."""
    cfg = dict(config)
    roots: List[Tuple[str, str]] = []
    wd = cfg.get('workdir')
    if isinstance(wd, str) and wd and not _is_url(wd):
        p = _abs_local(wd)
        if not os.path.isdir(p):
            raise ValueError(
                f'{what}: workdir {wd!r} ({p}) does not exist or is not a '
                'directory')
        cfg['workdir'] = p
        roots.append(('workdir', p))
    fms = cfg.get('file_mounts')
    if isinstance(fms, dict) and fms:
        new: Dict[str, Any] = {}
        local: Dict[str, str] = {}
        buckets: Dict[str, List[str]] = {}
        for dst, src in fms.items():
            if isinstance(src, dict):
                # A bucket: its local sources go up under storage/<i>/<j>
                # (i over the sorted bucket destinations, as the server's
                # TaskSpec.Storage), to be uploaded into the bucket.
                st = dict(src)
                srcs = st.get('source')
                paths: List[str] = []
                if isinstance(srcs, str) and not _is_url(srcs):
                    paths = [_abs_local(srcs)]
                    st['source'] = paths[0]
                elif isinstance(srcs, list):
                    paths = [_abs_local(x) for x in srcs]
                    st['source'] = paths
                for p in paths:
                    if mounts and not os.path.exists(p):
                        raise ValueError(
                            f'{what}: file_mounts {dst}: storage source '
                            f'{p!r} does not exist')
                buckets[dst] = paths
                new[dst] = st
            elif isinstance(src, str) and _is_url(src):
                buckets[dst] = []
                new[dst] = src
            elif isinstance(src, str):
                p = _abs_local(src)
                # Without mounts (exec) the sources are not sent, so a
                # missing one is no error here.
                if mounts and not os.path.exists(p):
                    raise ValueError(
                        f'{what}: file_mounts {dst}: source {src!r} ({p}) '
                        'does not exist')
                new[dst] = p
                local[dst] = p
            else:
                new[dst] = src
        cfg['file_mounts'] = new
        if mounts:
            for i, dst in enumerate(sorted(local)):
                roots.append((f'mounts/{i}', local[dst]))
            for i, dst in enumerate(sorted(buckets)):
                for j, p in enumerate(buckets[dst]):
                    roots.append((f'storage/{i}/{j}', p))
    return cfg, roots


def _upload_roots(roots: List[Tuple[str, str]]) -> str:
    if not roots:
        return ''
    from sky import _upload  # pylint: disable=import-outside-toplevel
    return _upload.upload(_client(), roots)['id']


def _to_yaml_text(configs: List[Dict[str, Any]]) -> str:
    # JSON is YAML: no YAML library is needed to send a task.
    return '\n---\n'.join(json.dumps(c, indent=2) for c in configs) + '\n'


def _as_dag(task: Any):
    from sky import dag as dag_lib  # pylint: disable=import-outside-toplevel
    return dag_lib.as_dag(task)


def _require_task_yaml(op: _ops.Op, func: str) -> None:
    """Operations whose server side may predate YAML task bodies: the
    server's OpenAPI document must list task_yaml for them, since a
    server that ignores the field would run an empty task."""
    path = op.path
    c = _client()
    fields = c.body_fields(path)
    if fields is None or 'task_yaml' not in fields:
        raise exceptions.NotSupportedError(
            f'{func} needs an API server that takes the task as YAML on '
            f'{path}; the server at {c.endpoint} does not (its '
            '/api/openapi.json lists no task_yaml there): upgrade the '
            'server, or use the CLI for now')


def _one_task_yaml(task: Any, mounts: bool, func: str) -> Tuple[str, str]:
    """The task_yaml and upload_id of a sky.Task or one-task sky.Dag."""
    dag = _as_dag(task)
    if len(dag.tasks) != 1:
        raise exceptions.NotSupportedError(
            f'{func} runs one task; this DAG has {len(dag.tasks)}. Run a '
            'pipeline as a managed job: sky.jobs.launch(dag)')
    t = dag.tasks[0]
    cfg, roots = _prepare_config(t.to_yaml_config(), mounts,
                                 f'task {t.name or "<unnamed>"}')
    return _to_yaml_text([cfg]), _upload_roots(roots)


def _dag_yaml(dag_or_task: Any, upload: bool = True,
              check_paths: bool = True) -> Tuple[str, List[str], Any]:
    """The dag_yaml and per-task upload ids of a DAG (or a task)."""
    dag = _as_dag(dag_or_task)
    configs = list(dag.to_yaml_configs())
    n_tasks = len(dag.tasks)
    first = len(configs) - n_tasks  # 1 when a pipeline header leads
    out = configs[:first]
    ids: List[str] = []
    for t, cfg in zip(dag.tasks, configs[first:]):
        if check_paths:
            cfg, roots = _prepare_config(cfg, True,
                                         f'task {t.name or "<unnamed>"}')
        else:
            roots = []
        out.append(cfg)
        ids.append(_upload_roots(roots) if upload else '')
    return _to_yaml_text(out), ids, dag


def _entrypoint() -> str:
    return ' '.join([os.path.basename(sys.argv[0] or 'python')] +
                    sys.argv[1:]) if sys.argv else 'python'


_wait_for_value = _enums.wait_for_value


def _with_env(body: Dict[str, Any]) -> Dict[str, Any]:
    env = transport.client_env()
    if env:
        body['env_vars'] = env
    return body


def _generated_cluster_name() -> str:
    user = ''.join(ch for ch in (os.environ.get('USER') or 'user').lower()
                   if ch.isascii() and ch.isalnum()) or 'user'
    return f'sky-{time.time_ns() & 0xffff:04x}-{user}'


# ---- cluster operations ----


def launch(task: Any, cluster_name: Optional[str] = None,
           retry_until_up: bool = False,
           idle_minutes_to_autostop: Optional[int] = None,
           wait_for: Optional[Any] = None, dryrun: bool = False,
           down: bool = False, backend: Optional[Any] = None,
           optimize_target: Any = _enums.OptimizeTarget.COST,
           no_setup: bool = False, clone_disk_from: Optional[str] = None,
           fast: bool = False, resize: bool = False,
           _need_confirmation: bool = False,
           _is_launched_by_jobs_controller: bool = False,
           _is_launched_by_sky_serve_controller: bool = False,
           _file_mounts_blob_id: Optional[str] = None,
           _extra_launch_context: Optional[Dict[str, Any]] = None,
           _include_credentials: bool = False) -> RequestId:
    """Launches a cluster (or reuses it) and runs the task on it.

    Request returns ``(job_id, handle)``: the job id (None when no job was
    submitted) and a :class:`ResourceHandle` (None for a dry run).
    """
    _refuse('backend', backend, None, 'the SkyGo server has one backend')
    _refuse('clone_disk_from', clone_disk_from, None,
            'disk cloning is not implemented by the SkyGo server')
    _refuse('resize', resize, False,
            'resizing a cluster is not implemented by the SkyGo server')
    _refuse('_is_launched_by_jobs_controller',
            _is_launched_by_jobs_controller, False,
            'the SkyGo jobs controller runs inside the server')
    _refuse('_is_launched_by_sky_serve_controller',
            _is_launched_by_sky_serve_controller, False,
            'the SkyGo serve controller runs inside the server')
    _refuse('_file_mounts_blob_id', _file_mounts_blob_id, None,
            'SkyGo uploads files with upload_v2 (the SDK does it)')
    _refuse('_extra_launch_context', _extra_launch_context, None,
            'SkyGo has no launch context')
    _refuse('_include_credentials', _include_credentials, False,
            'the SkyGo server does not send credentials to clients')
    _refuse('_need_confirmation', _need_confirmation, False,
            'the SDK cannot prompt; call sky.optimize first to see the plan')
    cluster_name = cluster_name or _generated_cluster_name()
    opts = dict(retry_until_up=retry_until_up, dryrun=dryrun,
                no_setup=no_setup, fast=fast,
                optimize_time=_enums.optimize_time(optimize_target))
    last = dict(idle_minutes_to_autostop=idle_minutes_to_autostop,
                wait_for=_wait_for_value(wait_for), down=down)
    dag = _as_dag(task)
    if len(dag.tasks) <= 1:
        return _submit(_ops.LAUNCH, _launch_body(dag, cluster_name, **opts,
                                              **last))
    return _launch_chain(dag, cluster_name, opts, last)


def _launch_body(task: Any, cluster_name: str, *, retry_until_up: bool,
                 dryrun: bool, no_setup: bool, fast: bool,
                 optimize_time: bool, idle_minutes_to_autostop: Optional[int],
                 wait_for: Optional[str], down: bool) -> Dict[str, Any]:
    task_yaml, upload_id = _one_task_yaml(task, True, 'sky.launch')
    body: Dict[str, Any] = {
        'task_yaml': task_yaml,
        'cluster_name': cluster_name,
        # The request ends once the job is submitted; its output is
        # sky.tail_logs's (SkyPilot's SDK does the same).
        'detach_run': True,
        'entrypoint_command': _entrypoint(),
    }
    _set(body, upload_id=upload_id or None, dryrun=bool(dryrun),
         no_setup=bool(no_setup), fast=bool(fast),
         idle_minutes_to_autostop=None if idle_minutes_to_autostop is None
         else int(idle_minutes_to_autostop),
         down=bool(down), wait_for=wait_for or None,
         retry_until_up=bool(retry_until_up),
         optimize_time=bool(optimize_time))
    return _with_env(body)


def _launch_chain(dag: Any, cluster_name: str, opts: Dict[str, Any],
                  last: Dict[str, Any]) -> RequestId:
    """A chain DAG on one cluster: its tasks are launched there in order,
    each after the job of the one before SUCCEEDED. The first launch is
    submitted now; :func:`get` on the returned id drives the rest (the
    chain is the client's, so it advances while get runs), and returns
    the last task's ``(job_id, handle)``. Autostop and down apply to the
    last launch, so the cluster outlives the tasks before it."""
    if not dag.is_chain():
        raise exceptions.NotSupportedError(
            f'sky.launch runs a single task or a chain of tasks; this DAG '
            f'of {len(dag.tasks)} tasks is not a chain. Run it as a managed '
            'job: sky.jobs.launch(dag)')
    order = dag.topological_order()
    none = dict(idle_minutes_to_autostop=None, wait_for=None, down=False)
    first = _launch_body(order[0], cluster_name, **opts, **none)

    def post(v: Any, body: Dict[str, Any]):
        job_id, handle = _launch_result(v, body)
        prev = order[0]
        for i, t in enumerate(order[1:], start=1):
            if job_id is not None:
                st = _wait_job_end(cluster_name, job_id)
                if st != _enums.JobStatus.SUCCEEDED:
                    raise exceptions.SkyPilotError(
                        f'task {prev.name or i - 1} (job {job_id} on '
                        f'cluster {cluster_name}) ended {st}; the '
                        f'{len(order) - i} task(s) after it were not run')
            extra = last if i == len(order) - 1 else none
            job_id, handle = get(_submit(_ops.LAUNCH, _launch_body(
                t, cluster_name, **opts, **extra)))
            prev = t
        return job_id, handle

    return _submit(_ops.LAUNCH, first, post)


def _wait_job_end(cluster_name: str, job_id: int) -> Any:
    wait = 0.2
    while True:
        st = get(job_status(cluster_name, [job_id])).get(job_id)
        if st is None or st.is_terminal():
            return st
        time.sleep(wait)
        wait = min(wait * 1.5, 2.0)


def exec(  # pylint: disable=redefined-builtin
        task: Any, cluster_name: Optional[str] = None, dryrun: bool = False,
        down: bool = False, backend: Optional[Any] = None) -> RequestId:
    """Runs the task on an existing cluster (workdir synced, setup and file
    mounts skipped). Request returns ``(job_id, handle)``."""
    _refuse('backend', backend, None, 'the SkyGo server has one backend')
    _refuse('down', down, False,
            'sky.exec cannot tear a cluster down on SkyGo; use '
            'sky.autostop(cluster, idle_minutes=0, down=True)')
    if not cluster_name:
        raise ValueError('sky.exec needs cluster_name: the cluster to run '
                         'the task on')
    task_yaml, upload_id = _one_task_yaml(task, False, 'sky.exec')
    body: Dict[str, Any] = {'task_yaml': task_yaml,
                            'cluster_name': cluster_name, 'detach_run': True,
                            'entrypoint_command': _entrypoint()}
    if upload_id:
        body['upload_id'] = upload_id
    if dryrun:
        body['dryrun'] = True
    return _submit(_ops.EXEC, body)


def stop(cluster_name: str, purge: bool = False, graceful: bool = False,
         graceful_timeout: Optional[int] = None) -> RequestId:
    """Stops a cluster. Request returns None."""
    return _submit(_ops.STOP, _teardown_body(cluster_name, purge, graceful,
                                          graceful_timeout), _none)


def _teardown_body(cluster_name: str, purge: bool, graceful: bool,
                   graceful_timeout: Optional[int]) -> Dict[str, Any]:
    return _set({'cluster_names': [cluster_name]}, purge=purge or None,
                graceful=graceful or None,
                graceful_timeout=None if graceful_timeout is None
                else int(graceful_timeout))


def start(cluster_name: str, idle_minutes_to_autostop: Optional[int] = None,
          wait_for: Optional[Any] = None, retry_until_up: bool = False,
          down: bool = False, force: bool = False) -> RequestId:
    """Restarts a STOPPED (or INIT) cluster. Request returns None."""
    if down and idle_minutes_to_autostop is None:
        raise ValueError('down=True requires idle_minutes_to_autostop to be '
                         'set')
    body: Dict[str, Any] = {'cluster_names': [cluster_name]}
    if retry_until_up:
        body['retry_until_up'] = True
    if force:
        body['force'] = True
    rid = _client().submit(_ops.START.name, body)
    if idle_minutes_to_autostop is None:
        return _rid(rid, _none)

    # The server's start sets no autostop: set it once the start is done,
    # as `sky start -i` does.
    def then_autostop(v: Any, b: Dict[str, Any]) -> None:
        get(autostop(cluster_name, idle_minutes_to_autostop, wait_for,
                     down))
        return None

    return _rid(rid, then_autostop)


def down(cluster_name: str, purge: bool = False, graceful: bool = False,
         graceful_timeout: Optional[int] = None) -> RequestId:
    """Tears a cluster down. Request returns None."""
    return _submit(_ops.DOWN, _teardown_body(cluster_name, purge, graceful,
                                          graceful_timeout), _none)


def status(cluster_names: Optional[List[str]] = None,
           refresh: Any = _enums.StatusRefreshMode.NONE,
           all_users: bool = False, *, _include_credentials: bool = False,
           _summary_response: bool = False) -> RequestId:
    """Gets cluster records (list of dicts; see the seed's keys)."""
    _refuse('_include_credentials', _include_credentials, False,
            'the SkyGo server does not send credentials to clients')
    do_refresh = _enums.refresh_wanted(refresh)
    body: Dict[str, Any] = {}
    if cluster_names:
        body['cluster_names'] = list(cluster_names)
    if do_refresh:
        body['refresh'] = True
    if all_users:
        body['all_users'] = True
    return _submit(_ops.STATUS, body)


def autostop(cluster_name: str, idle_minutes: int,
             wait_for: Optional[Any] = None, down: bool = False,
             hook: Optional[str] = None,
             hook_timeout: Optional[int] = None) -> RequestId:
    """Schedules autostop/autodown (idle_minutes < 0 cancels it)."""
    _refuse('hook', hook, None,
            'autostop hooks are set in the task YAML (resources.autostop.'
            'hook) on SkyGo')
    _refuse('hook_timeout', hook_timeout, None,
            'autostop hooks are set in the task YAML on SkyGo')
    body: Dict[str, Any] = {'cluster_names': [cluster_name],
                            'idle_minutes': int(idle_minutes)}
    if idle_minutes < 0:
        body['cancel'] = True
    if down:
        body['down'] = True
    w = _wait_for_value(wait_for)
    if w:
        body['wait_for'] = w
    return _submit(_ops.AUTOSTOP, body, _none)


def cost_report(days: Optional[int] = None) -> RequestId:
    """Cost records of clusters, live and terminated (list of dicts)."""
    body: Dict[str, Any] = {}
    if days is not None:
        body['days'] = int(days)
    return _submit(_ops.COST_REPORT, body)


def endpoints(cluster: str,
              port: Optional[Union[int, str]] = None) -> RequestId:
    """Request returns {port: endpoint} of the cluster's exposed ports."""
    body: Dict[str, Any] = {'cluster': cluster}
    if port is not None:
        body['port'] = int(port)
    return _submit(_ops.ENDPOINTS, body)


# ---- jobs on a cluster ----


def queue(cluster_name: str, skip_finished: bool = False,
          all_users: bool = False) -> RequestId:
    """Request returns the cluster's job records (list of dicts)."""
    body: Dict[str, Any] = {'cluster_names': [cluster_name]}
    if skip_finished:
        body['skip_finished'] = True
    if all_users:
        body['all_users'] = True
    return _submit(_ops.QUEUE, body)


def job_status(cluster_name: str,
               job_ids: Optional[List[int]] = None) -> RequestId:
    """Request returns {job_id: JobStatus or None}; {None: None} when
    job_ids is None and the cluster has no job."""
    ids = [int(i) for i in job_ids] if job_ids else []
    if len(ids) <= 1:
        body: Dict[str, Any] = {'cluster_name': cluster_name,
                                'follow': False}
        if ids:
            body['job_ids'] = ids
        return _submit(_ops.JOB_STATUS, body)

    # Several jobs: the queue has them all, in one request.
    def post(v: Any, b: Dict[str, Any]):
        by_id = {j.get('job_id'): _enums.JobStatus.parse(j.get('status'))
                 for j in (v or {}).get(cluster_name) or []}
        return {i: by_id.get(i) for i in ids}

    return _submit(_ops.QUEUE, {'cluster_names': [cluster_name],
                             'all_users': True}, post)


def cluster_job_spec(cluster_name: str, job_id: int) -> RequestId:
    """Request returns {'task_yaml', 'entrypoint'} (secrets redacted) of
    the job, or None when the cluster does not exist or the job's spec
    was not recorded."""
    return _submit(_ops.CLUSTER_JOB_SPEC, {'cluster_name': cluster_name,
                                        'job_id': int(job_id)})


def cancel(cluster_name: str, all: bool = False,  # pylint: disable=redefined-builtin
           all_users: bool = False, job_ids: Optional[List[int]] = None,
           _try_cancel_if_cluster_is_init: bool = False) -> RequestId:
    """Cancels jobs on a cluster. Request returns None."""
    _refuse('_try_cancel_if_cluster_is_init', _try_cancel_if_cluster_is_init,
            False, 'the SkyGo jobs controller runs inside the server')
    if not job_ids and not all and not all_users:
        raise ValueError('sky.cancel: name the jobs to cancel (job_ids) or '
                         'pass all=True')
    body: Dict[str, Any] = {'cluster_name': cluster_name}
    if job_ids:
        body['job_ids'] = [int(i) for i in job_ids]
    if all or all_users:
        body['all'] = True
    if all_users:
        body['all_users'] = True
    return _submit(_ops.CANCEL, body)


def _follow_request(rid: str, follow: bool, out) -> Dict[str, Any]:
    c = _client()
    _, lines = c.stream(rid, follow=True)
    _write_lines(lines, out)
    return c.get_record(rid)


def _iter_request(rid: str) -> Iterator[Optional[str]]:
    c = _client()
    _, lines = c.stream(rid, follow=True)
    for line in lines:
        if _status_of(line) is None:  # stage lines are display, not log
            yield line
    c.get_record(rid)  # raise the request's error, if any
    yield None


def tail_logs(cluster_name: str, job_id: Optional[int], follow: bool,
              tail: int = 0, output_stream: Optional[Any] = None, *,
              preload_content: bool = True) -> Union[int,
                                                     Iterator[Optional[str]]]:
    """Tails a job's log. Returns the exit code (0 succeeded, 100 failed,
    101 not finished, 102 not found, 103 cancelled), or with
    preload_content=False an iterator of lines ending with None."""
    if not preload_content and output_stream is not None:
        raise ValueError('output_stream cannot be used with '
                         'preload_content=False')
    body: Dict[str, Any] = {'cluster_name': cluster_name,
                            'follow': bool(follow)}
    if job_id is not None:
        body['job_ids'] = [int(job_id)]
    if tail and tail > 0:
        body['tail'] = int(tail)
    rid = _client().submit(_ops.LOGS.name, body)
    if not preload_content:
        return _iter_request(rid)
    rec = _follow_request(rid, follow, _out(output_stream))
    v = _decode_result(rec) or {}
    st = v.get('status') or ''
    if not st:
        return int(exceptions.JobExitCode.NOT_FOUND)
    if not follow and not _enums.JobStatus.parse(st).is_terminal():
        return 0
    return int(exceptions.JobExitCode.from_job_status(st))


def tail_provision_logs(cluster_name: str, worker: Optional[int] = None,
                        follow: bool = True, tail: int = 0,
                        output_stream: Optional[Any] = None) -> int:
    """Streams the cluster's provision log: the log of its latest launch
    or start request, up to the job it submitted. Returns 0."""
    _refuse('worker', worker, None,
            'the provision log is the head\'s launch request log on SkyGo')
    c = _client()
    recs = c.requests_status(all_status=True, cluster_name=cluster_name,
                             all_users=True)
    rec = next((r for r in recs if r.get('name') in ('sky.launch',
                                                      'sky.start')), None)
    if rec is None:
        raise exceptions.ClusterDoesNotExist(
            f"no provision log of cluster '{cluster_name}': this API server "
            'has no launch or start of it (see sky.status())')
    final = rec.get('status') in ('SUCCEEDED', 'FAILED', 'CANCELLED')
    _, lines = c.stream(rec['request_id'], follow=follow and not final,
                        tail=tail or None)
    def until_job():
        for line in lines:
            if 'Job submitted, ID:' in line:
                return
            yield line

    _write_lines(until_job(), _out(output_stream))
    return 0


def tail_hook_logs(cluster_name: str, event: Optional[str] = None,
                   follow: bool = True, tail: int = 0) -> int:
    """Prints a lifecycle-hook log (stop, down, preemption). Returns 0;
    raises when the server cannot show it."""
    body: Dict[str, Any] = {'cluster_name': cluster_name, 'follow': follow}
    if event:
        body['hook'] = event
    if tail:
        body['tail'] = int(tail)
    rid = _client().submit(_ops.HOOK_LOGS.name, body)
    _follow_request(rid, follow, sys.stdout)
    return 0


def _save_download(rid: str, root: str, job: Dict[str, Any]) -> str:
    ts = os.path.basename(os.path.normpath('/' + (job.get('run_timestamp')
                                                  or '')))
    if ts in ('', '/', '.'):
        ts = f'job-{job.get("job_id")}'
    d = os.path.join(root, ts)
    os.makedirs(d, exist_ok=True)
    c = _client()
    for name in job.get('files') or []:
        p = os.path.normpath(os.path.join(d, name))
        if not p.startswith(d + os.sep):
            raise exceptions.SkyPilotError(
                f'the server named a log file outside {d}: {name!r}')
        os.makedirs(os.path.dirname(p), exist_ok=True)
        resp = c.download(rid, f'{job.get("run_timestamp")}/{name}')
        with open(p, 'wb') as f:
            f.write(resp.read())
    return d


def download_logs(cluster_name: str,
                  job_ids: Optional[List[str]]) -> Dict[str, str]:
    """Downloads job logs to ~/sky_logs/<run_timestamp>; returns
    {job_id (str): local directory}."""
    body: Dict[str, Any] = {'cluster_name': cluster_name, 'follow': False}
    if job_ids:
        body['job_ids'] = [int(i) for i in job_ids]
    c = _client()
    rid = c.submit(_ops.DOWNLOAD_LOGS.name, body)
    v = _decode_result(c.get_record(rid)) or {}
    root = os.path.join(os.path.expanduser('~'), 'sky_logs')
    return {str(j.get('job_id')): _save_download(v.get('request_id') or rid,
                                                 root, j)
            for j in v.get('jobs') or []}


# ---- infrastructure ----


def check(infra_list: Optional[Tuple[str, ...]], verbose: bool,
          workspace: Optional[str] = None) -> RequestId:
    """Checks credentials. Request returns {workspace: {infra: [capability,
    ...]}} of the enabled infras."""
    _refuse('workspace', workspace, None,
            'the SkyGo check covers the active workspace')
    body: Dict[str, Any] = {}
    if infra_list:
        body['clouds'] = list(infra_list)
    if verbose:
        body['verbose'] = True
    return _submit(_ops.CHECK, body)


def enabled_clouds(workspace: Optional[str] = None,
                   expand: bool = False) -> RequestId:
    """Request returns the enabled infras' names (a check is run)."""
    _refuse('workspace', workspace, None,
            'the SkyGo check covers the active workspace')
    _refuse('expand', expand, False,
            'SkyGo lists node pools with `sky check`, not here')
    return _submit(_ops.CHECK, {}, _enabled_clouds_result)


def list_accelerators(gpus_only: bool = True,
                      name_filter: Optional[str] = None,
                      region_filter: Optional[str] = None,
                      quantity_filter: Optional[int] = None,
                      clouds: Optional[Union[List[str], str]] = None,
                      all_regions: bool = False, require_price: bool = True,
                      case_sensitive: bool = True) -> RequestId:
    """Request returns {accelerator: [InstanceTypeInfo, ...]}."""
    return _submit(_ops.LIST_ACCELERATORS, _gpus_body(
        gpus_only, name_filter, region_filter, quantity_filter, clouds,
        all_regions, require_price, case_sensitive))


def _gpus_body(gpus_only, name_filter, region_filter, quantity_filter,
               clouds, all_regions, require_price, case_sensitive):
    _refuse('gpus_only', gpus_only, True,
            'the SkyGo catalog lists accelerators only')
    _refuse('require_price', require_price, True,
            'SkyGo lists offerings with their price (null when unknown)')
    _refuse('case_sensitive', case_sensitive, True,
            'SkyGo matches accelerator names as the CLI does')
    body: Dict[str, Any] = {'all': True}
    if name_filter:
        body['gpus_only_name'] = name_filter
    if quantity_filter:
        body['quantity_filter'] = quantity_filter
    infra = ''
    if isinstance(clouds, (list, tuple)):
        if len(clouds) > 1:
            raise exceptions.NotSupportedError(
                'list_accelerators filters by one cloud on SkyGo; call it '
                'once per cloud')
        infra = clouds[0] if clouds else ''
    elif clouds:
        infra = clouds
    if region_filter:
        infra = f'{infra or "*"}/{region_filter}'
    if infra:
        body['clouds'] = infra
    if all_regions:
        body['all_regions'] = True
    return _with_env(body)


def list_accelerator_counts(gpus_only: bool = True,
                            name_filter: Optional[str] = None,
                            region_filter: Optional[str] = None,
                            quantity_filter: Optional[int] = None,
                            clouds: Optional[Union[List[str], str]] = None,
                            all_regions: bool = False,
                            require_price: bool = True,
                            case_sensitive: bool = True) -> RequestId:
    """Request returns {accelerator: [counts offered]}."""
    return _submit(_ops.LIST_ACCELERATOR_COUNTS, _gpus_body(
        gpus_only, name_filter, region_filter, quantity_filter, clouds,
        all_regions, require_price, case_sensitive))


def kubernetes_node_info(context: Optional[str] = None) -> RequestId:
    """Request returns {'node_info_dict': {node: {name, accelerator_type,
    total: {accelerator_count}, free: {accelerators_available}, ...}},
    'hint': str} for one context (default: the current one)."""
    return _submit(_ops.KUBERNETES_NODE_INFO, _set({}, context=context))


def realtime_kubernetes_gpu_availability(
        context: Optional[str] = None, name_filter: Optional[str] = None,
        quantity_filter: Optional[int] = None,
        is_ssh: Optional[bool] = None) -> RequestId:
    """Request returns [(context, [(gpu, requestable counts, capacity,
    available), ...]), ...], live from the nodes."""
    return _submit(_ops.REALTIME_KUBERNETES_GPU_AVAILABILITY,
                   _set({}, context=context, name_filter=name_filter,
                        quantity_filter=quantity_filter, is_ssh=is_ssh),
                   _realtime_result)


def _realtime_result(value: Any, _body: Any = None) -> Any:
    return [(ctx, [tuple(row) for row in rows]) for ctx, rows in value or []]


def optimize(dag: Any, minimize: Any = _enums.OptimizeTarget.COST,
             admin_policy_request_options: Optional[Any] = None) -> RequestId:
    """Plans the DAG's tasks. Request returns the optimized DAG as YAML
    text (each task with the resources the optimizer chose); the plan
    table is the request's log (see sky.stream_and_get)."""
    _refuse('admin_policy_request_options', admin_policy_request_options,
            None, 'SkyGo has no admin policies')
    text, _, _ = _dag_yaml(dag, upload=False)
    body: Dict[str, Any] = {'dag_yaml': text}
    if _enums.optimize_time(minimize):
        body['optimize_time'] = True
    return _submit(_ops.OPTIMIZE, _with_env(body))


def validate(dag: Any, workdir_only: bool = False,
             admin_policy_request_options: Optional[Any] = None,
             _skip_local_paths: bool = False) -> None:
    """Validates the DAG: local paths here, the rest on the server.
    Raises on an invalid DAG."""
    _refuse('admin_policy_request_options', admin_policy_request_options,
            None, 'SkyGo has no admin policies')
    d = _as_dag(dag)
    if _skip_local_paths or workdir_only:
        if workdir_only and not _skip_local_paths:
            for t in d.tasks:
                _prepare_config({'workdir': t.to_yaml_config().get('workdir')},
                                False, f'task {t.name or "<unnamed>"}')
        # The server checks that paths are absolute: make them so here.
        text = _to_yaml_text([_abs_paths(c) for c in d.to_yaml_configs()])
    else:
        text, _, _ = _dag_yaml(d, upload=False)
    get(_submit(_ops.VALIDATE, {'name': d.name or '', 'yaml': '',
                             'dag_yaml': text}))


def _abs_paths(cfg: Dict[str, Any]) -> Dict[str, Any]:
    cfg = dict(cfg)
    wd = cfg.get('workdir')
    if isinstance(wd, str) and wd and not _is_url(wd):
        cfg['workdir'] = _abs_local(wd)
    fms = cfg.get('file_mounts')
    if isinstance(fms, dict):
        cfg['file_mounts'] = {
            k: _abs_local(v) if isinstance(v, str) and not _is_url(v) else v
            for k, v in fms.items()}
    return cfg


def reload_config() -> None:
    """Re-reads the client config (endpoint, credentials) on next call."""
    transport.reset_client()


# ---- storage ----


def storage_ls() -> RequestId:
    """Request returns the storage records (list of dicts: name,
    launched_at, store (list of store types), last_use, status)."""
    return _submit(_ops.STORAGE_LS, {})


def storage_delete(name: str) -> RequestId:
    """Deletes a storage: its buckets SkyPilot created, with their objects,
    then its record. The request raises ValueError for an unknown name."""
    if not isinstance(name, str) or not name:
        raise ValueError('storage_delete needs the name of a storage')
    return _submit(_ops.STORAGE_DELETE, {'name': name})


# ---- API server ----


def _sky_binary() -> str:
    return _client()._sky_binary()  # pylint: disable=protected-access


def _run_sky(args: List[str], env: Optional[Dict[str, str]] = None) -> None:
    import subprocess  # pylint: disable=import-outside-toplevel
    argv = [transport.Client(auto_start=False)._sky_binary()] + args  # pylint: disable=protected-access
    p = subprocess.run(argv, env=env, check=False)
    if p.returncode != 0:
        raise exceptions.SkyPilotError(
            f'`sky {" ".join(args)}` failed (exit code {p.returncode})')


def api_start(*, deploy: bool = False, host: str = '127.0.0.1',
              foreground: bool = False, metrics: bool = False,
              metrics_port: Optional[int] = None,
              enable_basic_auth: bool = False,
              port: Optional[int] = None) -> None:
    """Starts the local API server through the `sky` binary (on PATH, or
    SKYGO_SKY_BINARY) unless one runs."""
    _refuse('metrics', metrics, False,
            'the SkyGo server always serves /metrics')
    _refuse('metrics_port', metrics_port, None,
            'the SkyGo server serves /metrics on its own port')
    args = ['api', 'start']
    if deploy:
        args.append('--deploy')
    if host and host != '127.0.0.1':
        args += ['--host', host]
    if foreground:
        args.append('--foreground')
    if enable_basic_auth:
        args.append('--enable-basic-auth')
    if port is not None:
        args += ['--port', str(int(port))]
    _run_sky(args)
    transport.reset_client()


def api_stop() -> None:
    """Stops the local API server (nothing for a remote one)."""
    c = _client()
    if not c.local:
        return
    _run_sky(['api', 'stop'])
    transport.reset_client()


def api_status(request_ids: Optional[List[str]] = None,
               all_status: bool = False, limit: Optional[int] = None,
               fields: Optional[List[str]] = None,
               cluster_name: Optional[str] = None) -> List[Dict[str, Any]]:
    """Lists requests (newest first) as request payload dicts."""
    recs = _client().requests_status(
        [str(r) for r in request_ids] if request_ids else None, all_status,
        limit, cluster_name)
    if fields:
        recs = [{k: r.get(k) for k in fields} for r in recs]
    elif not request_ids:
        for r in recs:
            r.pop('return_value', None)
            r.pop('error', None)
    return recs


def api_info() -> Dict[str, Any]:
    """The server's health: status, api_version, version, commit, user."""
    c = _client()
    c.ensure_checked()
    h = c.health()
    h.setdefault('user', None)
    h.setdefault('commit', None)
    h.setdefault('version_on_disk', h.get('version'))
    return h


def api_cancel(request_ids: Optional[Union[str, List[str]]] = None,
               all_users: bool = False, silent: bool = False) -> RequestId:
    """Aborts requests (default: all of the caller's). Returns a request id
    whose result is the list of ids cancelled (the server answers at once,
    so :func:`get` returns it without waiting)."""
    if request_ids is not None and all_users:
        raise ValueError('give request_ids or all_users, not both')
    ids = [request_ids] if isinstance(request_ids, str) else (
        [str(r) for r in request_ids] if request_ids else None)
    done = _client().cancel(ids, all_users)
    if not silent:
        if done:
            print(f'Cancelled {len(done)} request(s): {", ".join(done)}')
        else:
            print('No requests to cancel.')
    return _local(done)


def api_server_logs(follow: bool = True, tail: Optional[int] = None) -> None:
    """Streams the API server's own log (admins)."""
    _, lines = _client().stream(None, follow=follow, tail=tail,
                                server_logs=True)
    _write_lines(lines, sys.stdout)


def api_login(endpoint: Optional[str] = None, relogin: bool = False,
              service_account_token: Optional[str] = None,
              no_browser: bool = False) -> None:
    """Logs in: checks the endpoint answers (with the token, when given)
    and stores it in ~/.sky/skygo/login.yaml, as `sky api login` does."""
    _refuse('relogin', relogin, False,
            'SkyGo logs in with a service-account token (no OAuth)')
    _refuse('no_browser', no_browser, False,
            'SkyGo logs in with a service-account token (no browser)')
    if not endpoint:
        raise ValueError('sky.api_login needs endpoint, e.g. '
                         'http://1.2.3.4:46580')
    home = os.path.expanduser('~')
    c = transport.Client(endpoint=endpoint, token=service_account_token,
                         home=home, auto_start=False, no_stored_token=True)
    h = c.health()
    if h.get('status') == 'needs_auth':
        raise exceptions.ApiServerError(
            f'the API server at {c.endpoint} needs credentials: give '
            'service_account_token=, or user:password@ in the endpoint', 401)
    c._check_version(h)  # pylint: disable=protected-access
    transport.write_login(home, endpoint.rstrip('/'),
                          service_account_token or '')
    transport.reset_client()
    print(f'Logged into SkyPilot API server at: {c.endpoint}')


def api_logout() -> None:
    """Forgets the stored endpoint, token and cookies."""
    home = os.path.expanduser('~')
    transport.write_login(home, '', '')
    try:
        os.remove(transport.cookies_path(home))
    except FileNotFoundError:
        pass
    transport.reset_client()
    print('Logged out of SkyPilot API server.')


# ---- utilities not on a SkyGo server ----


def dashboard(starting_page: Optional[str] = None) -> None:
    raise _not_supported('sky.dashboard', 'there is no web dashboard')


def workspaces() -> RequestId:
    """Request returns {workspace name: its settings} as the server's
    config defines them (workspaces:), 'default' always among them."""
    return _submit(_ops.WORKSPACES, {})


def set_preferred_workspace(preferred: Optional[str]) -> Dict[str, Any]:
    raise _not_supported('sky.set_preferred_workspace',
                         'there is no preferred-workspace setting')


def get_user_workspace(requested: Optional[str] = None) -> Dict[str, Any]:
    raise _not_supported('sky.get_user_workspace',
                         'there is no workspace resolver operation')


def create_debug_dump(request_ids: Optional[List[str]] = None,
                      cluster_names: Optional[List[str]] = None,
                      managed_job_ids: Optional[List[int]] = None,
                      recent_minutes: Optional[float] = None) -> RequestId:
    raise _not_supported('sky.create_debug_dump',
                         'there is no debug dump operation')


def download_debug_dump(*args: Any, **kwargs: Any) -> Any:
    raise _not_supported('sky.download_debug_dump',
                         'there is no debug dump operation')


# What `from sky.client.sdk import *` (sky/__init__.py) exports: this
# module's own functions and classes.
__all__ = [n for n, v in list(globals().items())
           if not n.startswith('_') and callable(v) and
           getattr(v, '__module__', None) == __name__]
