"""sky.jobs against a real SkyGo API server: launch (a task, and a
pipeline), queue, tail_logs, cancel, download_logs."""
import io
import os
import time

import pytest

import sky


def _wait_managed(job_id, want, timeout=120):
    deadline = time.time() + timeout
    st = None
    while time.time() < deadline:
        rows = [r for r in sky.get(sky.jobs.queue(job_ids=[job_id]))
                if r['job_id'] == job_id]
        st = rows[-1]['status'] if rows else None
        if st in want:
            return rows
        time.sleep(0.5)
    raise AssertionError(f'managed job {job_id} is {st}, want {want}')


def test_jobs_launch_queue_logs(sky_server, tmp_path):
    (tmp_path / 'in.txt').write_text('from-workdir\n')
    task = sky.Task(name='mj-ok', run='cat in.txt; echo managed-done',
                    workdir=str(tmp_path))
    task.set_resources(sky.Resources(infra='local'))
    job_id = sky.get(sky.jobs.launch(task))
    assert isinstance(job_id, int)
    rows = _wait_managed(job_id, {sky.jobs.ManagedJobStatus.SUCCEEDED})
    r = rows[0]
    for k in ('job_id', 'task_id', 'job_name', 'task_name', 'status',
              'resources', 'submitted_at', 'start_at', 'end_at',
              'job_duration', 'recovery_count', 'user_name'):
        assert k in r, k
    assert r['job_name'] == 'mj-ok'
    assert isinstance(r['status'], sky.jobs.ManagedJobStatus)
    out = io.StringIO()
    assert sky.jobs.tail_logs(job_id=job_id, follow=True,
                              output_stream=out) == 0
    assert 'from-workdir' in out.getvalue()
    assert 'managed-done' in out.getvalue()
    got = sky.jobs.download_logs(None, job_id)
    assert list(got) == [job_id] and os.path.isdir(got[job_id])
    assert os.listdir(got[job_id])


def test_jobs_pipeline(sky_server):
    with sky.Dag() as dag:
        a = sky.Task(name='step-a', run='echo A')
        b = sky.Task(name='step-b', run='echo B')
        a >> b
    dag.name = 'pipe'
    job_id = sky.get(sky.jobs.launch(dag))
    rows = _wait_managed(job_id, {sky.jobs.ManagedJobStatus.SUCCEEDED})
    assert [r['task_name'] for r in rows if r['job_id'] == job_id] == [
        'step-a', 'step-b']
    assert all(r['status'] == 'SUCCEEDED' for r in rows)


def test_jobs_cancel(sky_server):
    job_id = sky.get(sky.jobs.launch(sky.Task(name='mj-slow',
                                              run='sleep 300')))
    _wait_managed(job_id, {sky.jobs.ManagedJobStatus.RUNNING,
                           sky.jobs.ManagedJobStatus.STARTING,
                           sky.jobs.ManagedJobStatus.PENDING})
    assert sky.get(sky.jobs.cancel(job_ids=[job_id])) is None
    _wait_managed(job_id, {sky.jobs.ManagedJobStatus.CANCELLED})
    with pytest.raises(ValueError, match='exactly one'):
        sky.jobs.cancel()


def test_jobs_not_found(sky_server):
    assert sky.jobs.tail_logs(job_id=99999, follow=False,
                              output_stream=io.StringIO()) == 102
    assert sky.get(sky.jobs.queue(job_ids=[99999])) == []


def test_pools(sky_server):
    assert sky.get(sky.jobs.pool_status()) == []
    fields = sky.client.transport.get_client().body_fields(
        '/jobs/pool_apply') or set()
    if 'task_yaml' not in fields:
        with pytest.raises(sky.exceptions.NotSupportedError,
                           match='pool_apply'):
            sky.jobs.pool_apply(sky.Task(run='true'), 'p1')
    with pytest.raises(ValueError, match='pool_names or all'):
        sky.jobs.pool_down()
