"""sky.Task: constructor, setters, task YAML round trips, local checks."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..'))

import pytest  # noqa: E402

from sky.resources import Resources  # noqa: E402
from sky.task import Task  # noqa: E402

yaml = pytest.importorskip('yaml')

DATA = os.path.join(os.path.dirname(__file__), 'testdata')


def _data(name):
    return os.path.join(DATA, name)


def _load(name):
    with open(_data(name), encoding='utf-8') as f:
        return yaml.safe_load(f)


def test_seed_example_constructors():
    task = Task(
        name='hello-gpu',
        run='nvidia-smi && python -c "import torch; print(torch.cuda.device_count())"',
    )
    assert task.set_resources(Resources(accelerators='A100:1')) is task
    assert task.to_yaml_config() == {
        'name': 'hello-gpu',
        'resources': {
            'accelerators': 'A100:1'
        },
        'run': 'nvidia-smi && python -c "import torch; print(torch.cuda.device_count())"',
    }
    assert task.num_nodes == 1
    assert task.resources == {Resources(accelerators='A100:1')}

    task = Task(name='sweep-0',
                setup='pip install torch transformers',
                run='python train.py --lr 0.001 --batch-size 32')
    assert task.to_yaml_config() == {
        'name': 'sweep-0',
        'setup': 'pip install torch transformers',
        'run': 'python train.py --lr 0.001 --batch-size 32',
    }


def test_constructor_all_fields():
    t = Task('t',
             setup=['a', 'b'],
             run='echo',
             envs={'A': 1, 'B': 'x'},
             secrets={'TOKEN': 's3cr3t'},
             workdir='~/code',
             num_nodes=3,
             file_mounts={'/d': '~/data', '/b': {'name': 'bkt', 'mode': 'COPY'}},
             volumes={'/vol': 'myvol'},
             resources={'cpus': 2},
             event_callback='echo cb',
             service={'readiness_probe': '/', 'replicas': 2},
             config={'kubernetes': {'pod_config': {}}},
             api_server_access=False)
    assert t.setup == 'a\nb'
    assert t.envs == {'A': '1', 'B': 'x'}
    assert t.secrets == {'TOKEN': 's3cr3t'}
    assert t.file_mounts == {'/d': '~/data'}
    assert t.storage_mounts == {'/b': {'name': 'bkt', 'mode': 'COPY'}}
    assert t.service == {'readiness_probe': '/', 'replicas': 2}
    assert list(t.to_yaml_config()) == [
        'name', 'workdir', 'num_nodes', 'resources', 'envs', 'secrets',
        'file_mounts', 'volumes', 'setup', 'run', 'service', 'config',
        'event_callback', 'api_server_access'
    ]
    assert t.to_yaml_config()['file_mounts'] == {
        '/d': '~/data',
        '/b': {
            'name': 'bkt',
            'mode': 'COPY'
        }
    }
    assert t.to_yaml_config(redact_secrets=True)['secrets'] == {
        'TOKEN': '<redacted>'
    }
    assert t.envs_and_secrets == {'A': '1', 'B': 'x', 'TOKEN': 's3cr3t'}


def test_secrets_never_in_repr():
    t = Task('t', run='echo', secrets={'HF_TOKEN': 'hf_abcdef'},
             envs={'X': 'visible-value'})
    r = repr(t)
    assert 'hf_abcdef' not in r and 'HF_TOKEN' not in r
    assert 'secrets=<1 hidden>' in r
    assert 'visible-value' not in r  # env values are not shown either
    assert r.startswith("Task(name='t', run='echo'")


def test_update_envs_and_secrets():
    t = Task(run='x')
    assert t.update_envs({'A': 'a'}) is t
    t.update_envs([('B', 'b'), ('A', 'a2')])
    assert t.envs == {'A': 'a2', 'B': 'b'}
    with pytest.raises(ValueError, match='invalid keys'):
        t.update_envs({'1BAD': 'x'})
    with pytest.raises(ValueError, match="Environment variable 'C' is None"):
        t.update_envs({'C': None})
    t.update_secrets({'S': 'v'})
    t.update_secrets([('secrets:shared', None)])
    assert t.secrets == {'S': 'v', 'secrets:shared': None}
    with pytest.raises(ValueError, match='null value'):
        t.update_secrets({'secrets:x': 'v'})
    # List form: managed-secret references only.
    t = Task(run='x', secrets=['secrets:HF_TOKEN', 'secrets:workspace.KEY'])
    assert t.to_yaml_config()['secrets'] == [
        'secrets:HF_TOKEN', 'secrets:workspace.KEY'
    ]
    with pytest.raises(ValueError, match='Invalid secret in array form'):
        Task(run='x', secrets=['HF_TOKEN'])
    # Updating a list form turns it into the dict form (refs -> null).
    t.update_secrets({'INLINE': 'v'})
    assert t.to_yaml_config()['secrets'] == {
        'secrets:HF_TOKEN': None,
        'secrets:workspace.KEY': None,
        'INLINE': 'v'
    }


def test_num_nodes():
    t = Task(run='x')
    assert t.num_nodes == 1 and 'num_nodes' not in t.to_yaml_config()
    t.num_nodes = 4
    assert t.to_yaml_config()['num_nodes'] == 4
    for bad in (0, -1, 1.5, True, '2'):
        with pytest.raises(ValueError, match='num_nodes should be a positive '
                           'int'):
            t.num_nodes = bad


def test_file_mounts_setters():
    t = Task(run='x', file_mounts={'/a': 'a', '/s': {'name': 'b'}})
    t.set_file_mounts({'/c': 's3://bucket/c'})
    assert t.file_mounts == {'/c': 's3://bucket/c'}
    assert t.storage_mounts == {'/s': {'name': 'b'}}
    t.update_file_mounts({'/d': '~/d'})
    assert t.file_mounts == {'/c': 's3://bucket/c', '/d': '~/d'}
    t.set_storage_mounts({'/t': {'source': '~/x', 'name': 'n'}})
    assert t.storage_mounts == {'/t': {'source': '~/x', 'name': 'n'}}
    assert t.file_mounts == {'/c': 's3://bucket/c', '/d': '~/d'}
    t.set_file_mounts(None)
    assert t.file_mounts is None
    with pytest.raises(ValueError, match='cannot be cloud storage'):
        t.update_file_mounts({'s3://x/y': '/tmp'})
    with pytest.raises(ValueError, match='cannot end with a slash'):
        t.update_file_mounts({'/a/': '/tmp'})
    with pytest.raises(ValueError, match='cannot end with a slash'):
        t.update_file_mounts({'/a': '/tmp/'})
    with pytest.raises((ValueError, Exception), match='mapping'):
        t.set_storage_mounts({'/x': object()})


def test_set_resources_forms():
    a = Resources(infra='aws', accelerators='A100:8')
    b = Resources(infra='gcp', accelerators='A100:8')
    t = Task(run='x')
    assert t.resources == {Resources()}
    assert 'resources' not in t.to_yaml_config()
    t.set_resources([a, b])
    assert t.resources == [a, b]
    assert t.to_yaml_config()['resources'] == {
        'accelerators': 'A100:8',
        'ordered': [{
            'infra': 'aws'
        }, {
            'infra': 'gcp'
        }]
    }
    t.set_resources({a, b})
    assert t.resources == {a, b}
    res = t.to_yaml_config()['resources']
    assert res['accelerators'] == 'A100:8'
    assert sorted(res['any_of'], key=str) == [{'infra': 'aws'}, {'infra': 'gcp'}]
    t.set_resources({a})
    assert t.to_yaml_config()['resources'] == a.to_yaml_config()
    t.set_resources({'cpus': '4+', 'any_of': [{'infra': 'aws'}]})
    assert t.to_yaml_config()['resources'] == {'infra': 'aws', 'cpus': '4+'}
    with pytest.raises(ValueError, match='not a sky.Resources'):
        t.set_resources(['aws'])
    with pytest.raises(ValueError, match='empty'):
        t.set_resources([])
    t.set_resources([a, b]).set_resources_override({'use_spot': True})
    assert t.resources == [a.copy(use_spot=True), b.copy(use_spot=True)]


def test_run_must_be_a_string():
    with pytest.raises(Exception, match='command generator'):
        Task(run=lambda rank, ips: 'echo')
    with pytest.raises(ValueError, match='run must be a string'):
        Task(run=3)


def test_service_and_pool_exclusive():
    t = Task(run='x', service={'readiness_probe': '/'})
    with pytest.raises(ValueError, match='both service and pool'):
        t.set_pool({'workers': 2})


# ---- YAML ----

ROUND_TRIP = [
    'examples__multi_resources.yaml',
    'examples__multi_accelerators.yaml',
    'tests__test_yamls__test_multiple_accelerators_unordered_with_default.yaml',
    'tests__test_yamls__test_multiple_resources.yaml',
    'examples__oci__serve-http-cpu.yaml',
    'examples__airflow__data_preprocessing.yaml',
    'tests__test_yamls__intermediate_bucket.yaml',
    'examples__multi_hostname.yaml',
]


@pytest.mark.parametrize('name', ROUND_TRIP)
def test_yaml_round_trip_is_identity(name):
    """What was read is what is written (after `${VAR}` substitution)."""
    t = Task.from_yaml(_data(name))
    got = t.to_yaml_config()
    want = _load(name)
    if name == 'examples__airflow__data_preprocessing.yaml':
        want['file_mounts']['/data'] = {
            'name': 'sky-demo-data-test',
            'store': 's3'
        }
    assert got == want
    # And it is stable: loading the output again gives the same output.
    assert Task.from_yaml_config(got).to_yaml_config() == got


def test_yaml_values_and_order():
    t = Task.from_yaml(_data('examples__oci__serve-http-cpu.yaml'))
    assert t.service == {'readiness_probe': '/', 'replicas': 2}
    (r,) = t.resources
    assert (r.cloud, r.region, r.cpus, r.ports) == ('oci', 'us-sanjose-1',
                                                    '2+', ['8080'])
    assert t.run == 'python -m http.server 8080'
    assert list(t.to_yaml_config()) == ['resources', 'run', 'service']

    t = Task.from_yaml(_data('examples__multi_resources.yaml'))
    assert [x.cloud for x in t.resources] == ['aws', 'gcp']
    assert isinstance(t.resources, list)

    t = Task.from_yaml(_data('tests__test_yamls__test_multiple_resources.yaml'))
    assert isinstance(t.resources, set) and len(t.resources) == 3
    assert t.to_yaml_config()['resources']['any_of'][0] == {
        'infra': 'aws/us-east-1',
        'accelerators': 'A100:8'
    }

    t = Task.from_yaml(_data('examples__multi_hostname.yaml'))
    assert t.num_nodes == 2 and t.name == 'multi_hostname'

    t = Task.from_yaml(_data('tests__test_yamls__intermediate_bucket.yaml'))
    assert t.workdir == '.'
    assert t.file_mounts == {
        '/setup.py': './setup.py',
        '/sky': '.',
        '/train-00001-of-01024':
            'gs://cloud-tpu-test-datasets/fake_imagenet/train-00001-of-01024',
    }


def test_required_envs_and_overrides_before_substitution():
    name = _data('llm__axolotl__axolotl-spot.yaml')
    with pytest.raises(ValueError, match="Environment variable 'HF_TOKEN' is "
                       'None'):
        Task.from_yaml(name)
    t = Task.from_yaml(name,
                       env_overrides=[('HF_TOKEN', 'tok'),
                                      ('BUCKET', 'my-bkt')])
    assert t.envs == {'HF_TOKEN': 'tok', 'BUCKET': 'my-bkt'}
    # ${BUCKET} in file_mounts is the override's value; run is left to the
    # shell.
    assert t.storage_mounts == {'/sky-notebook': {'name': 'my-bkt',
                                                  'mode': 'MOUNT'}}
    assert '${HF_TOKEN}' in t.run
    (r,) = t.resources
    assert r.to_yaml_config() == {
        'infra': 'gcp',
        'accelerators': 'A100:1',
        'use_spot': True,
        'image_id': 'docker:winglian/axolotl:main-py3.10-cu118-2.0.1'
    }
    assert t.workdir == 'mistral'


def test_from_yaml_config_rules():
    t = Task.from_yaml_config({
        'name': 'x',
        'setup': None,
        'envs': {
            'N': 123,
            'B': True,
            'F': 1.5
        },
        'secrets': {
            'TOK': 'abc',
            'secrets:REF': None
        },
        'workdir': '~/$PROJ',
        'file_mounts': {
            '/data/${N}': '~/d/$TOK',
            '/keep': '$UNKNOWN/${ALSO_UNKNOWN}'
        },
        'volumes': {
            '/v': '${N}-vol'
        },
        'service': {
            'readiness_probe': {
                'path': '/health',
                'post_data': {
                    'model': '$N'
                }
            }
        },
        'run': 'echo $N',
    }, env_overrides={'PROJ': 'proj'})
    assert t.setup is None
    assert t.envs == {'N': '123', 'B': 'True', 'F': '1.5', 'PROJ': 'proj'}
    assert t.workdir == '~/proj'
    assert t.file_mounts == {'/data/123': '~/d/abc',
                             '/keep': '$UNKNOWN/${ALSO_UNKNOWN}'}
    assert t.volumes == {'/v': '123-vol'}
    assert t.service['readiness_probe']['post_data'] == {'model': '123'}
    assert t.run == 'echo $N'
    assert t.secrets == {'TOK': 'abc', 'secrets:REF': None}

    t = Task.from_yaml_config({'secrets': ['secrets:A'], 'run': 'x'},
                              secrets_overrides={'B': 'b'})
    assert t.secrets == {'secrets:A': None, 'B': 'b'}
    with pytest.raises(ValueError, match="Secret variable 'S' is None"):
        Task.from_yaml_config({'secrets': {'S': None}})
    with pytest.raises(ValueError, match='not as dict'):
        Task.from_yaml_config('run: x')
    with pytest.raises(ValueError, match='num_nodes'):
        Task.from_yaml_config({'num_nodes': 0})
    # Unknown top-level keys reach the server, which names them.
    t = Task.from_yaml_config({'run': 'x', 'rn': 'y'})
    assert t.to_yaml_config() == {'run': 'x', 'rn': 'y'}


def test_from_yaml_errors(tmp_path):
    p = tmp_path / 'empty.yaml'
    p.write_text('# nothing\n---\n')
    with pytest.raises(ValueError, match='is empty or contains no task '
                       'definition'):
        Task.from_yaml(str(p))
    p.write_bytes(b'run: \xff\xfe\n')
    with pytest.raises(ValueError, match='not a valid UTF-8 text file'):
        Task.from_yaml(str(p))
    p.write_text('run: a\nrun: b\n')
    with pytest.raises(ValueError, match="duplicate key 'run'"):
        Task.from_yaml(str(p))
    with pytest.raises(ValueError, match='has 5 YAML documents'):
        Task.from_yaml(_data('examples__spot_pipeline__multi_jobs.yaml'))
    t = Task.from_yaml_str('name: s\nrun: echo hi\n')
    assert t.to_yaml_config() == {'name': 's', 'run': 'echo hi'}


def test_validate_local_paths(tmp_path):
    (tmp_path / 'src').mkdir()
    (tmp_path / 'f.txt').write_text('x')
    t = Task('ok-name', run='x', workdir=str(tmp_path / 'src'),
             file_mounts={
                 '/f': str(tmp_path / 'f.txt'),
                 '/u': 's3://bucket',
                 '/b': {'name': 'n', 'source': str(tmp_path / 'src')},
             })
    t.validate()
    t.workdir = str(tmp_path / 'nope')
    with pytest.raises(ValueError, match='Workdir must be a valid directory'):
        t.validate(workdir_only=True)
    t.workdir = None
    t.update_file_mounts({'/g': str(tmp_path / 'missing')})
    with pytest.raises(ValueError, match='does not exist locally'):
        t.validate()
    t.validate(skip_file_mounts=True)
    t.name = '-bad-'
    with pytest.raises(ValueError, match='Invalid task name'):
        t.validate_name()


def test_optimizer_hints_and_unsendable_things():
    t = Task(run='x').set_inputs('s3://data', 10).set_outputs('gs://out', 2.5)
    assert t.to_yaml_config() == {
        'run': 'x',
        'inputs': {'s3://data': 10},
        'outputs': {'gs://out': 2.5}
    }
    with pytest.raises(Exception, match='cannot be sent'):
        t.set_time_estimator(lambda r: 3600)


def test_local_sources():
    from sky.task import is_local_source  # pylint: disable=import-outside-toplevel
    assert is_local_source('~/data') and is_local_source('./x')
    assert not is_local_source('s3://bucket/x')
    assert not is_local_source('https://acct.blob.core.windows.net/c')
    assert not is_local_source('skypilot:placeholder')


def test_missing_pyyaml_says_how_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, 'yaml', None)  # import yaml fails
    with pytest.raises(ImportError, match='pip install PyYAML, or apt '
                       'install python3-yaml'):
        Task.from_yaml_str('run: x')
    # Building and serialising tasks needs no YAML library.
    assert Task(run='x').to_yaml_config() == {'run': 'x'}


def test_model_import_loads_no_yaml():
    # (sky/__init__ may load json and the client; the model adds no YAML.)
    import subprocess  # pylint: disable=import-outside-toplevel
    code = ('import sys; sys.path.insert(0, sys.argv[1]); import sky.task, '
            'sky.dag, sky.resources, sky.utils.common, sky.utils.dag_utils; '
            'print(sorted(m for m in ("yaml", "requests") if m in sys.modules))')
    out = subprocess.run(
        [sys.executable, '-c', code,
         os.path.join(os.path.dirname(__file__), '..')],
        check=True, capture_output=True, text=True).stdout
    assert out.strip() == '[]'


def test_set_resources_yaml_is_deterministic():
    import subprocess  # pylint: disable=import-outside-toplevel
    code = ('import sys; sys.path.insert(0, sys.argv[1]); '
            'from sky.task import Task; from sky.resources import Resources; '
            't = Task(run="x"); t.set_resources({Resources(infra=c) for c in '
            '("aws", "gcp", "azure", "lambda", "kubernetes")}); '
            'print(t.to_yaml_config())')
    outs = set()
    for seed in ('1', '2', '3', '4'):
        env = dict(os.environ, PYTHONHASHSEED=seed)
        outs.add(
            subprocess.run([
                sys.executable, '-c', code,
                os.path.join(os.path.dirname(__file__), '..')
            ],
                           check=True,
                           capture_output=True,
                           text=True,
                           env=env).stdout)
    assert len(outs) == 1, outs
