"""sky.Dag: the context manager, `>>` chains, YAML documents for jobs."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..'))

import pytest  # noqa: E402

from sky import dag as dag_lib  # noqa: E402
from sky.dag import Dag, as_dag  # noqa: E402
from sky.resources import Resources  # noqa: E402
from sky.task import Task  # noqa: E402
from sky.utils import dag_utils  # noqa: E402

DATA = os.path.join(os.path.dirname(__file__), 'testdata')


def test_seed_dag_example():
    with Dag() as dag:
        preprocess = Task(
            name='preprocess',
            setup='pip install pandas pyarrow',
            run='python preprocess.py --output /tmp/data',
        )
        preprocess.set_resources(Resources(cpus='8+', memory='32+'))
        train = Task(
            name='train',
            setup='pip install torch transformers',
            run='python train.py --data /tmp/data',
        )
        train.set_resources(Resources(accelerators='A100:4'))
        assert (preprocess >> train) is train
    assert dag_lib.get_current_dag() is None
    assert dag.tasks == [preprocess, train]
    assert dag.is_chain()
    assert dag.successors(preprocess) == [train]
    docs = dag.to_yaml_configs()
    assert docs == [preprocess.to_yaml_config(), train.to_yaml_config()]
    dag.name = 'pipeline'
    docs = dag.to_yaml_configs()
    assert docs[0] == {'name': 'pipeline'}
    assert docs[1]['resources'] == {'cpus': '8+', 'memory': '32+'}
    assert docs[2]['name'] == 'train'


def test_chaining_order_follows_edges_not_creation():
    with Dag(name='p') as dag:
        c = Task('c', run='c')
        a = Task('a', run='a')
        b = Task('b', run='b')
        a >> b >> c  # pylint: disable=pointless-statement
    # tasks is the execution order, the order of the YAML task documents.
    assert dag.tasks == [a, b, c]
    assert [d['name'] for d in dag.to_yaml_configs()] == ['p', 'a', 'b', 'c']
    with pytest.raises(ValueError, match='cycle'):
        dag.add_edge(c, a)
    assert dag.is_chain()


def test_non_chain_is_rejected():
    with Dag() as dag:
        a = Task('a', run='a')
        b = Task('b', run='b')
        c = Task('c', run='c')
        a >> b  # pylint: disable=pointless-statement
        a >> c  # pylint: disable=pointless-statement
    assert not dag.is_chain()
    with pytest.raises(ValueError, match='is not a chain'):
        dag.to_yaml_configs()
    with Dag() as unlinked:
        Task('a', run='a')
        Task('b', run='b')
    assert not unlinked.is_chain()
    with pytest.raises(ValueError, match='is not a chain'):
        unlinked.to_yaml_configs()
    with pytest.raises(ValueError, match='no tasks'):
        Dag().to_yaml_configs()


def test_rshift_needs_a_dag_and_tasks():
    a, b = Task('a', run='a'), Task('b', run='b')
    with pytest.raises(ValueError, match='needs a current Dag'):
        a >> b  # pylint: disable=pointless-statement
    with Dag():
        with pytest.raises(TypeError):
            a >> 3  # pylint: disable=pointless-statement


def test_nested_dags_and_explicit_add():
    with Dag() as outer:
        t1 = Task('t1', run='x')
        with Dag() as inner:
            t2 = Task('t2', run='y')
        t3 = Task('t3', run='z')
    assert outer.tasks == [t1, t3] and inner.tasks == [t2]
    d = Dag()
    d.add(t1)
    d.add(t1)
    assert len(d) == 1 and t1 in d and t2 not in d
    d.add_edge(t1, t2)
    assert d.tasks == [t1, t2] and d.is_chain()
    d.remove(t2)
    assert d.tasks == [t1] and d.successors(t1) == []


def test_as_dag():
    t = Task('solo', run='x')
    d = as_dag(t)
    assert d.tasks == [t] and d.name == 'solo'
    assert d.to_yaml_configs() == [{'name': 'solo', 'run': 'x'}]
    assert as_dag(d) is d
    with pytest.raises(TypeError, match='sky.Task or sky.Dag'):
        as_dag('run: x')
    # as_dag does not add the task to a Dag being built.
    with Dag() as outer:
        pass
    assert outer.tasks == []


def test_load_pipeline_yaml():
    dag = dag_utils.load_chain_dag_from_yaml(
        os.path.join(DATA, 'examples__spot_pipeline__multi_jobs.yaml'))
    assert dag.name == 'pipeline'
    assert [t.name for t in dag.tasks] == ['train1', 'train2', 'eval1',
                                           'eval2']
    assert dag.is_chain()
    docs = dag.to_yaml_configs()
    assert docs[0] == {'name': 'pipeline'}
    assert docs[1]['num_nodes'] == 2
    assert docs[4]['resources'] == {'accelerators': 'T4:4'}
    # The text form reads back to the same documents.
    text = dag_utils.dump_chain_dag_to_yaml_str(dag)
    again = dag_utils.load_chain_dag_from_yaml_str(text)
    assert again.to_yaml_configs() == docs
    assert 'setup: |\n  echo setup for train' in text


def test_load_job_group_yaml():
    dag = dag_utils.load_chain_dag_from_yaml(
        os.path.join(DATA, 'tests__test_job_groups__example_job_group.yaml'))
    assert dag.execution == 'parallel' and dag.name == 'rl-experiment'
    assert len(dag.tasks) == 4 and not dag.is_chain()
    docs = dag.to_yaml_configs()
    assert docs[0] == {'name': 'rl-experiment', 'execution': 'parallel'}
    assert [d['name'] for d in docs[1:]] == [
        'trainer', 'data-processor', 'replay-buffer', 'env-worker'
    ]


def test_load_header_rules():
    with pytest.raises(ValueError, match='Invalid execution mode for pipeline'):
        dag_utils.load_chain_dag_from_yaml_str(
            'name: p\nexecution: sideways\n---\nrun: x\n')
    d = dag_utils.load_chain_dag_from_yaml_str('name: only-header\n')
    assert [t.name for t in d.tasks] == ['only-header']
    d = dag_utils.load_chain_dag_from_yaml_str('run: a\n---\nrun: b\n')
    assert d.name is None and [t.run for t in d.tasks] == ['a', 'b']
    assert d.is_chain()
    with pytest.raises(ValueError, match='is empty'):
        dag_utils.load_chain_dag_from_yaml_str('---\n---\n')
    # A job group header keeps its other fields.
    d = dag_utils.load_chain_dag_from_yaml_str(
        'name: g\nexecution: parallel\nprimary_tasks: [a]\n---\nname: a\n'
        'run: x\n---\nname: b\nrun: y\n')
    assert d.to_yaml_configs()[0] == {
        'name': 'g',
        'execution': 'parallel',
        'primary_tasks': ['a']
    }


def test_enums():
    from sky.utils import common  # pylint: disable=import-outside-toplevel
    assert common.OptimizeTarget.COST.api_name == 'cost'
    assert common.AutostopWaitFor.JOBS == 'jobs'
    assert str(common.AutostopWaitFor.JOBS_AND_SSH) == 'jobs_and_ssh'
    assert common.AutostopWaitFor.from_str('NONE') is \
        common.AutostopWaitFor.NONE
    with pytest.raises(ValueError, match='wait_for must be one of'):
        common.AutostopWaitFor.from_str('ssh')
    r = Resources(autostop={'idle_minutes': 5,
                            'wait_for': common.AutostopWaitFor.JOBS})
    assert r.to_yaml_config() == {
        'autostop': {
            'idle_minutes': 5,
            'wait_for': 'jobs'
        }
    }


def test_dag_context_is_per_thread():
    import threading  # pylint: disable=import-outside-toplevel
    seen = []
    with Dag() as dag:
        th = threading.Thread(
            target=lambda: seen.append(dag_lib.get_current_dag()))
        th.start()
        th.join()
        Task('mine', run='x')
    assert seen == [None]
    assert [t.name for t in dag.tasks] == ['mine']


def test_single_task_keeps_a_differing_dag_name():
    d = dag_utils.load_chain_dag_from_yaml_str(
        'name: dag-name\n---\nname: simple-task\nrun: echo\n')
    assert d.name == 'dag-name'
    assert d.to_yaml_configs() == [{'name': 'dag-name'},
                                   {'name': 'simple-task', 'run': 'echo'}]
    d.name = 'simple-task'
    assert d.to_yaml_configs() == [{'name': 'simple-task', 'run': 'echo'}]
