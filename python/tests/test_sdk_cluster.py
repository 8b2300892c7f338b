"""The SDK against a real SkyGo API server on the local infrastructure:
launch (with an uploaded workdir and a file mount), exec, status, queue,
job_status, tail_logs, cancel, autostop, endpoints, stop, start, down,
cost_report, api_info/api_status/api_cancel, and the error mapping."""
import io
import os
import time

import pytest

import sky
from sky import exceptions
from sky.client import _ops

CLUSTER = 'sdkpy'


def _wait_job(cluster, job_id, want, timeout=60):
    deadline = time.time() + timeout
    st = None
    while time.time() < deadline:
        st = sky.get(sky.job_status(cluster, [job_id]))[job_id]
        if st in want:
            return st
        time.sleep(0.3)
    raise AssertionError(f'job {job_id} on {cluster} is {st}, want {want}')


@pytest.fixture(scope='module')
def workdir(tmp_path_factory):
    d = tmp_path_factory.mktemp('wd')
    (d / 'kept.txt').write_text('kept-content\n')
    (d / 'ignored.txt').write_text('should not travel\n')
    (d / 'data').mkdir()
    (d / 'data' / 'big.bin').write_bytes(os.urandom(3 << 20))  # chunked PUT
    (d / '.skyignore').write_text('ignored.txt\n')
    mount = tmp_path_factory.mktemp('mnt') / 'mounted.txt'
    mount.write_text('mounted-content\n')
    mdir = tmp_path_factory.mktemp('mdir')
    (mdir / 'inner.txt').write_text('dir-mount-content\n')
    (mdir / 'skip.log').write_text('ignored by .gitignore\n')
    (mdir / '.gitignore').write_text('*.log\n')
    return d, mount, mdir


@pytest.fixture(scope='module')
def cluster(sky_server, workdir):
    wd, mount, mdir = workdir
    task = sky.Task(
        name='hello',
        setup='echo setup-ran',
        run=('cat kept.txt; test ! -e ignored.txt && echo IGNORED-OK; '
             'wc -c < data/big.bin; cat ~/m/mounted.txt; '
             'cat ~/a-dir/inner.txt; test ! -e ~/a-dir/skip.log && '
             'echo SKIPLOG-OK; echo "env=$MYVAR"'),
        envs={'MYVAR': 'v1'},
        workdir=str(wd),
        file_mounts={'~/m/mounted.txt': str(mount), '~/a-dir': str(mdir)},
    )
    task.set_resources(sky.Resources(infra='local', cpus='1+', ports=8080))
    out = io.StringIO()
    job_id, handle = sky.stream_and_get(
        sky.launch(task, cluster_name=CLUSTER), output_stream=out)
    assert isinstance(job_id, int) and job_id >= 1, out.getvalue()
    assert handle.cluster_name == CLUSTER
    yield job_id
    sky.get(sky.down(CLUSTER))


def test_api_info(sky_server):
    info = sky.api_info()
    assert info['status'] == 'healthy'
    assert info['api_version'] == str(sky.API_VERSION)
    assert info['version'] and 'user' in info and 'commit' in info


def test_launch_uploads_and_logs(cluster):
    out = io.StringIO()
    code = sky.tail_logs(CLUSTER, cluster, follow=True, output_stream=out)
    text = out.getvalue()
    assert code == 0, text
    assert 'kept-content' in text and 'IGNORED-OK' in text
    assert str(3 << 20) in text
    assert 'mounted-content' in text and 'env=v1' in text
    assert 'dir-mount-content' in text and 'SKIPLOG-OK' in text


def test_status_record(cluster):
    recs = sky.get(sky.status(cluster_names=[CLUSTER]))
    assert len(recs) == 1
    r = recs[0]
    for k in ('name', 'launched_at', 'handle', 'last_use', 'status',
              'autostop', 'to_down', 'metadata', 'user_hash', 'user_name',
              'resources_str'):
        assert k in r, k
    assert r['name'] == CLUSTER and r['status'] == sky.ClusterStatus.UP
    assert isinstance(r['status'], sky.ClusterStatus)
    assert r['handle'].cluster_name == CLUSTER
    assert any(c['name'] == CLUSTER for c in sky.get(sky.status()))


def test_queue_and_job_status(cluster):
    jobs = sky.get(sky.queue(CLUSTER))
    j = next(j for j in jobs if j['job_id'] == cluster)
    for k in ('job_id', 'job_name', 'username', 'user_hash', 'submitted_at',
              'start_at', 'end_at', 'resources', 'status', 'log_path'):
        assert k in j, k
    assert j['status'] == sky.JobStatus.SUCCEEDED
    assert j['job_name'] == 'hello'
    assert sky.get(sky.job_status(CLUSTER, [cluster])) == {
        cluster: sky.JobStatus.SUCCEEDED}
    latest = sky.get(sky.job_status(CLUSTER))
    assert list(latest.values()) == [sky.JobStatus.SUCCEEDED]
    assert sky.get(sky.job_status(CLUSTER, [9999])) == {9999: None}
    assert sky.get(sky.job_status(CLUSTER, [cluster, 9999])) == {
        cluster: sky.JobStatus.SUCCEEDED, 9999: None}


def test_cluster_job_spec(cluster):
    task = sky.Task(name='spec-job', run='echo $MODE',
                    envs={'MODE': 'fast'}, secrets={'TOKEN': 's3cr3t-val'})
    job_id, _ = sky.get(sky.exec(task, cluster_name=CLUSTER))
    spec = sky.get(sky.cluster_job_spec(CLUSTER, job_id))
    assert set(spec) == {'task_yaml', 'entrypoint'}, spec
    assert 'echo $MODE' in spec['task_yaml'] and 'MODE: fast' in \
        spec['task_yaml'], spec
    assert 'TOKEN' in spec['task_yaml'] and 's3cr3t-val' not in \
        spec['task_yaml'], spec
    assert spec['entrypoint'], spec
    assert sky.get(sky.cluster_job_spec(CLUSTER, 9999)) is None
    assert sky.get(sky.cluster_job_spec('sdkpy-no-such', 1)) is None


def test_exec_exit_codes_and_cancel(cluster):
    fail = sky.Task(run='echo failing; exit 3')
    job_id, handle = sky.get(sky.exec(fail, cluster_name=CLUSTER))
    assert handle.cluster_name == CLUSTER
    assert sky.tail_logs(CLUSTER, job_id, follow=True,
                         output_stream=io.StringIO()) == 100
    assert sky.tail_logs(CLUSTER, 9999, follow=False,
                         output_stream=io.StringIO()) == 102

    lines = sky.tail_logs(CLUSTER, job_id, follow=True,
                          preload_content=False)
    got = list(lines)
    assert got[-1] is None and any('failing' in l for l in got[:-1])

    slow, _ = sky.get(sky.exec(sky.Task(run='sleep 120'),
                               cluster_name=CLUSTER))
    _wait_job(CLUSTER, slow, {sky.JobStatus.RUNNING, sky.JobStatus.PENDING,
                              sky.JobStatus.SETTING_UP})
    assert sky.get(sky.cancel(CLUSTER, job_ids=[slow])) is None
    assert _wait_job(CLUSTER, slow, {sky.JobStatus.CANCELLED}) == \
        sky.JobStatus.CANCELLED
    assert sky.tail_logs(CLUSTER, slow, follow=True,
                         output_stream=io.StringIO()) == 103


def test_endpoints(cluster):
    eps = sky.get(sky.endpoints(CLUSTER))
    assert list(eps) == [8080] and eps[8080].endswith(':8080')
    assert sky.get(sky.endpoints(CLUSTER, 8080)) == eps


def test_autostop_set_and_cancel(cluster):
    assert sky.get(sky.autostop(CLUSTER, idle_minutes=30)) is None
    [r] = sky.get(sky.status([CLUSTER]))
    assert r['autostop'] == 30 and r['to_down'] is False
    sky.get(sky.autostop(CLUSTER, idle_minutes=60, down=True))
    [r] = sky.get(sky.status([CLUSTER]))
    assert r['autostop'] == 60 and r['to_down'] is True
    sky.get(sky.autostop(CLUSTER, idle_minutes=-1))
    [r] = sky.get(sky.status([CLUSTER]))
    assert r['autostop'] < 0


def test_errors_map_to_seed_classes(sky_server):
    with pytest.raises(exceptions.ClusterDoesNotExist) as ei:
        sky.get(sky.queue('no-such-cluster'))
    assert 'no-such-cluster' in str(ei.value)
    assert isinstance(ei.value, ValueError)
    with pytest.raises(exceptions.ClusterDoesNotExist):
        sky.get(sky.exec(sky.Task(run='true'), cluster_name='no-such-cluster'))
    with pytest.raises(ValueError, match='does-not-exist'):
        sky.launch(sky.Task(run='true', workdir='/does-not-exist'))


def test_api_status_and_cancel(sky_server, cluster):
    rid = sky.exec(sky.Task(run='true'), cluster_name=CLUSTER)
    sky.get(rid)
    recs = sky.api_status([rid])
    assert [r['request_id'] for r in recs] == [rid]
    assert recs[0]['status'] == 'SUCCEEDED' and recs[0]['name'] == 'sky.exec'
    # A request that follows a long job's log runs until cancelled.
    slow, _ = sky.get(sky.exec(sky.Task(run='sleep 120'),
                               cluster_name=CLUSTER))
    from sky.client import sdk
    follow = sdk._submit(_ops.LOGS, {'cluster_name': CLUSTER,
                                  'job_ids': [slow], 'follow': True})
    cancelled = sky.get(sky.api_cancel(follow, silent=True))
    assert cancelled == [follow]
    with pytest.raises(exceptions.RequestCancelled):
        sky.get(follow)
    sky.get(sky.cancel(CLUSTER, job_ids=[slow]))


def test_stop_start_down_cost(sky_server, workdir):
    name = 'sdkpy-ssd'
    job_id, _ = sky.get(sky.launch(sky.Task(run='echo hi'),
                                   cluster_name=name,
                                   idle_minutes_to_autostop=20))
    assert job_id == 1
    [r] = sky.get(sky.status([name]))
    assert r['autostop'] == 20
    assert sky.get(sky.stop(name)) is None
    [r] = sky.get(sky.status([name]))
    assert r['status'] == sky.ClusterStatus.STOPPED
    assert sky.get(sky.start(name, idle_minutes_to_autostop=45)) is None
    [r] = sky.get(sky.status([name], refresh=sky.StatusRefreshMode.AUTO))
    assert r['status'] == sky.ClusterStatus.UP and r['autostop'] == 45
    assert sky.get(sky.down(name)) is None
    assert sky.get(sky.status([name])) == []
    with pytest.raises(exceptions.ClusterDoesNotExist):
        sky.get(sky.down(name))
    costs = sky.get(sky.cost_report())
    c = next(c for c in costs if c['name'] == name)
    for k in ('name', 'launched_at', 'duration', 'last_use', 'num_nodes',
              'resources', 'cluster_hash', 'usage_intervals', 'total_cost'):
        assert k in c, k
    assert c['num_nodes'] == 1 and isinstance(c['usage_intervals'][0], tuple)


def test_dryrun_and_validate(sky_server, workdir):
    wd = workdir[0]
    t = sky.Task(run='echo x', workdir=str(wd))
    assert sky.get(sky.launch(t, cluster_name='sdkpy-dry', dryrun=True)) == (
        None, None)
    assert sky.validate(sky.dag.as_dag(t)) is None
    bad = sky.Task(run='echo x')
    bad.set_resources(sky.Resources(infra='nosuchcloud'))
    with pytest.raises(exceptions.InvalidSkyPilotConfigError,
                       match='nosuchcloud'):
        sky.validate(sky.dag.as_dag(bad))
    with pytest.raises(ValueError, match='missing-src'):
        sky.validate(sky.Task(run='x', file_mounts={'/d': '/missing-src'}))


def test_chain_dag_runs_in_order(sky_server):
    with sky.Dag() as dag:
        a = sky.Task(name='pre', run='sleep 0.5; echo pre-done')
        b = sky.Task(name='train', run='echo train-done')
        a >> b
    job_id, handle = sky.get(sky.launch(dag, cluster_name='sdkpy-chain'))
    assert handle.cluster_name == 'sdkpy-chain'
    jobs = sorted(sky.get(sky.queue('sdkpy-chain')), key=lambda j: j['job_id'])
    assert [j['job_name'] for j in jobs] == ['pre', 'train']
    assert jobs[-1]['job_id'] == job_id
    assert jobs[0]['end_at'] <= jobs[1]['submitted_at'] + 1
    assert sky.tail_logs('sdkpy-chain', job_id, follow=True,
                         output_stream=io.StringIO()) == 0
    jobs = sky.get(sky.queue('sdkpy-chain'))
    assert all(j['status'] == sky.JobStatus.SUCCEEDED for j in jobs)
    out = io.StringIO()
    assert sky.tail_provision_logs('sdkpy-chain', output_stream=out) == 0
    logs = sky.download_logs('sdkpy-chain', [str(job_id)])
    assert list(logs) == [str(job_id)] and os.listdir(logs[str(job_id)])
    sky.get(sky.down('sdkpy-chain'))


def test_infra_queries(sky_server, capsys):
    enabled = sky.get(sky.enabled_clouds())
    assert 'Local' in enabled or 'local' in [e.lower() for e in enabled]
    checked = sky.get(sky.check(None, False))
    assert list(checked) == ['default'] and checked['default']
    accs = sky.get(sky.list_accelerators(name_filter='A100'))
    assert accs and all('A100' in name for name in accs)
    info = next(iter(accs.values()))[0]
    assert info.accelerator_name.startswith('A100') and info.cloud
    counts = sky.get(sky.list_accelerator_counts(name_filter='A100'))
    assert set(counts) == set(accs)
    assert all(isinstance(c, int) for cs in counts.values() for c in cs)
    t = sky.Task(name='opt', run='x')
    t.set_resources(sky.Resources(infra='local', ports=8080))
    optimized = sky.get(sky.optimize(t))
    assert 'infra: local' in optimized and 'run: x' in optimized, optimized
    assert '8080' in optimized, optimized
    assert sky.get(sky.workspaces()) == {'default': {}}
    sky.api_server_logs(follow=False)
    assert capsys.readouterr().out


def test_workspaces_lists_the_servers(sky_server):
    cfg = os.path.join(sky_server.home, '.sky', 'config.yaml')
    assert not os.path.exists(cfg)
    with open(cfg, 'w') as f:
        f.write('workspaces:\n  team-a:\n    private: true\n')
    try:
        assert sky.get(sky.workspaces()) == {
            'default': {}, 'team-a': {'private': True}}
    finally:
        os.remove(cfg)


def test_storage_ls_and_delete_unknown(sky_server):
    # No bucket was made here: the list is empty and deleting an unknown
    # name raises ValueError as sky.storage_delete documents (buckets
    # themselves are exercised against an S3 emulator by the Go tests).
    assert sky.get(sky.storage_ls()) == []
    with pytest.raises(ValueError, match="Storage name 'nope' not found"):
        sky.get(sky.storage_delete('nope'))
