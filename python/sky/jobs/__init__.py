"""Managed jobs (sky.jobs.*) against the server's jobs.* operations."""
from __future__ import annotations

import os
TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: typing costs ms at import
    from typing import Any, Dict, List, Optional, Union

from sky import _enums
from sky import exceptions
from sky.client import _ops
from sky.client import sdk as _sdk

ManagedJobStatus = _enums.ManagedJobStatus

__all__ = ['ManagedJobStatus', 'launch', 'queue', 'cancel', 'tail_logs',
           'download_logs', 'pool_apply', 'pool_status', 'pool_down']


def launch(task: Any, name: Optional[str] = None, pool: Optional[str] = None,
           num_jobs: Optional[int] = None, *,
           _need_confirmation: bool = False) -> _sdk.RequestId:
    """Launches a managed job (a task, a pipeline DAG or a job group).

    Request returns the job id (int), or the list of ids when num_jobs > 1.
    """
    text, upload_ids, dag = _sdk._dag_yaml(task)  # pylint: disable=protected-access
    body: Dict[str, Any] = {'dag_yaml': text,
                            'entrypoint_command': _sdk._entrypoint()}  # pylint: disable=protected-access
    if any(upload_ids):
        body['upload_ids'] = upload_ids
    if name:
        body['name'] = name
    if pool:
        body['pool'] = pool
    if num_jobs is not None:
        if int(num_jobs) < 1:
            raise ValueError('num_jobs must be at least 1')
        body['num_jobs'] = int(num_jobs)
    return _sdk._submit(_ops.JOBS_LAUNCH, _sdk._with_env(body))  # pylint: disable=protected-access


def queue(refresh: bool = False, skip_finished: bool = False,
          all_users: bool = False, job_ids: Optional[List[int]] = None,
          limit: Optional[int] = None,
          fields: Optional[List[str]] = None) -> _sdk.RequestId:
    """Request returns one dict per task of each managed job (job_id,
    task_id, job_name, task_name, status as ManagedJobStatus, resources,
    submitted_at, start_at, end_at, job_duration, recovery_count,
    failure_reason, user_name, user_hash, ...), newest job first."""
    body: Dict[str, Any] = {}
    if skip_finished:
        body['skip_finished'] = True
    if all_users:
        body['all_users'] = True
    if job_ids:
        body['job_ids'] = [int(i) for i in job_ids]
    if limit:
        body['limit'] = int(limit)
    if refresh:
        pass  # the server's queue is always current (the controller is in it)

    def post(v: Any, b: Dict[str, Any]):
        rows = _sdk._jobs_queue_result(v, b)  # pylint: disable=protected-access
        if fields:
            rows = [{k: r.get(k) for k in fields} for r in rows]
        return rows

    return _sdk._submit(_ops.JOBS_QUEUE, body, post)  # pylint: disable=protected-access


def cancel(name: Optional[str] = None, job_ids: Optional[List[int]] = None,
           all: bool = False,  # pylint: disable=redefined-builtin
           all_users: bool = False, pool: Optional[str] = None,
           graceful: bool = False,
           graceful_timeout: Optional[int] = None) -> _sdk.RequestId:
    """Cancels managed jobs: by name, ids, pool, all (yours) or all users'.
    Request returns None."""
    chosen = [x for x in (name, job_ids, pool, all or None, all_users or None)
              if x]
    if len(chosen) != 1:
        raise ValueError('sky.jobs.cancel: give exactly one of name, '
                         'job_ids, pool, all=True or all_users=True')
    body = _sdk._set(  # pylint: disable=protected-access
        {}, name=name or None,
        job_ids=[int(i) for i in job_ids] if job_ids else None,
        pool=pool or None, all=bool(all), all_users=bool(all_users),
        graceful=bool(graceful),
        graceful_timeout=None if graceful_timeout is None
        else int(graceful_timeout))
    return _sdk._submit(_ops.JOBS_CANCEL, body)  # pylint: disable=protected-access


def tail_logs(name: Optional[str] = None, job_id: Optional[int] = None,
              follow: bool = True, controller: bool = False,
              refresh: bool = False, tail: Optional[int] = None,
              output_stream: Optional[Any] = None) -> int:
    """Streams a managed job's log; returns the exit code (0 succeeded,
    100 failed, 101 not finished, 102 not found, 103 cancelled)."""
    if name is not None and job_id is not None:
        raise ValueError('give name or job_id, not both')
    body: Dict[str, Any] = {'follow': bool(follow)}
    if job_id is not None:
        body['job_id'] = int(job_id)
    if name:
        body['name'] = name
    if controller:
        body['controller'] = True
    if tail:
        body['tail'] = int(tail)
    c = _sdk._client()  # pylint: disable=protected-access
    rid = c.submit(_ops.JOBS_LOGS.name, body)
    try:
        rec = _sdk._follow_request(rid, follow, _sdk._out(output_stream))  # pylint: disable=protected-access
    except exceptions.JobNotFoundError:
        return int(exceptions.JobExitCode.NOT_FOUND)
    v = _sdk._decode_result(rec) or {}  # pylint: disable=protected-access
    return int(v.get('exit_code') or 0)


def download_logs(name: Optional[str], job_id: Optional[int],
                  refresh: bool = False, controller: bool = False,
                  local_dir: str = '~/sky_logs') -> Dict[int, str]:
    """Downloads managed job logs; returns {job_id: local directory}."""
    body: Dict[str, Any] = {}
    if job_id is not None:
        body['job_ids'] = [int(job_id)]
    if name:
        body['name'] = name
    if controller:
        body['controller'] = True
    c = _sdk._client()  # pylint: disable=protected-access
    rid = c.submit(_ops.JOBS_DOWNLOAD_LOGS.name, body)
    v = _sdk._decode_result(c.get_record(rid)) or {}  # pylint: disable=protected-access
    root = os.path.join(os.path.expanduser(local_dir), 'managed_jobs')
    return {int(j.get('job_id')): _sdk._save_download(  # pylint: disable=protected-access
        v.get('request_id') or rid, root, j) for j in v.get('jobs') or []}


def pool_apply(task: Optional[Any], pool_name: str, mode: Any = 'rolling',
               workers: Optional[int] = None,
               _need_confirmation: bool = False) -> _sdk.RequestId:
    """Creates or updates a pool of workers from a task with a ``pool:``
    section (or, with task None, resizes it to workers)."""
    body: Dict[str, Any] = {'pool_name': pool_name}
    if task is not None:
        _sdk._require_task_yaml(_ops.JOBS_POOL_APPLY, 'sky.jobs.pool_apply')  # pylint: disable=protected-access
        text, upload_id = _sdk._one_task_yaml(task, True, 'sky.jobs.pool_apply')  # pylint: disable=protected-access
        body['task_yaml'] = text
        if upload_id:
            body['upload_id'] = upload_id
    if mode:
        body['mode'] = str(getattr(mode, 'value', mode))
    if workers is not None:
        body['workers'] = int(workers)
    return _sdk._submit(_ops.JOBS_POOL_APPLY, _sdk._with_env(body))  # pylint: disable=protected-access


def pool_status(pool_names: Optional[Union[str, List[str]]] = None
                ) -> _sdk.RequestId:
    """Request returns the pools' records (list of dicts)."""
    return _sdk._submit(_ops.JOBS_POOL_STATUS, _sdk._names_body('pool_names', pool_names))  # pylint: disable=protected-access


def pool_down(pool_names: Optional[Union[str, List[str]]] = None,
              all: bool = False,  # pylint: disable=redefined-builtin
              purge: bool = False) -> _sdk.RequestId:
    """Tears pools down. Request returns None."""
    body = _sdk._names_body('pool_names', pool_names, all, purge, required=True)  # pylint: disable=protected-access
    return _sdk._submit(_ops.JOBS_POOL_DOWN, body, _sdk._none)  # pylint: disable=protected-access
