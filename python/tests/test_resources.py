"""sky.Resources: the resources: mapping as given, value semantics, copy."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..'))

import pytest  # noqa: E402

from sky.resources import Resources  # noqa: E402
from sky.resources import parse_infra  # noqa: E402


def test_seed_examples_construct():
    r = Resources(infra='aws', accelerators='V100:4')
    assert r.cloud == 'aws'
    assert r.accelerators == {'V100': 4}
    assert r.to_yaml_config() == {'infra': 'aws', 'accelerators': 'V100:4'}

    r = Resources(accelerators='A100:4',
                  use_spot=True,
                  job_recovery={
                      'strategy': 'EAGER_NEXT_REGION',
                      'max_restarts_on_errors': 3,
                  })
    assert r.use_spot is True
    assert r.job_recovery == {
        'strategy': 'EAGER_NEXT_REGION',
        'max_restarts_on_errors': 3
    }
    assert r.to_yaml_config() == {
        'accelerators': 'A100:4',
        'use_spot': True,
        'job_recovery': {
            'strategy': 'EAGER_NEXT_REGION',
            'max_restarts_on_errors': 3
        },
    }

    r = Resources(cpus='8+', memory='32+')
    assert (r.cpus, r.memory) == ('8+', '32+')
    assert r.to_yaml_config() == {'cpus': '8+', 'memory': '32+'}


def test_yaml_config_keeps_values_as_given_in_schema_order():
    r = Resources(ports=[8080, '8081'],
                  disk_size='1TB',
                  labels={'team': 'ml'},
                  cpus=4,
                  infra='k8s/my-ctx',
                  image_id='docker:ubuntu:22.04',
                  autostop={'idle_minutes': 10, 'down': True})
    assert list(r.to_yaml_config().items()) == [
        ('infra', 'k8s/my-ctx'),
        ('cpus', 4),
        ('disk_size', '1TB'),
        ('ports', [8080, '8081']),
        ('labels', {'team': 'ml'}),
        ('image_id', 'docker:ubuntu:22.04'),
        ('autostop', {'idle_minutes': 10, 'down': True}),
    ]
    # The normalised views.
    assert r.cloud == 'kubernetes' and r.region == 'my-ctx'
    assert r.cpus == '4'
    assert r.disk_size == 1024
    assert r.ports == ['8080-8081']
    assert r.image_id == {'my-ctx': 'docker:ubuntu:22.04'}


def test_parse_infra():
    assert parse_infra('aws') == ('aws', None, None)
    assert parse_infra('AWS/us-east-1/us-east-1a') == ('aws', 'us-east-1',
                                                       'us-east-1a')
    assert parse_infra('*/us-east-1') == (None, 'us-east-1', None)
    assert parse_infra('k8s/arn:aws:eks:us-east-1:123:cluster/c') == (
        'kubernetes', 'arn:aws:eks:us-east-1:123:cluster/c', None)
    assert parse_infra('ssh/pool1') == ('ssh', 'ssh-pool1', None)
    assert parse_infra('/gcp/') == ('gcp', None, None)
    with pytest.raises(ValueError, match='empty part'):
        parse_infra('aws//x')
    with pytest.raises(ValueError, match='more than 3 parts'):
        parse_infra('aws/a/b/c')


def test_accelerator_forms():
    assert Resources(accelerators='A100').accelerators == {'A100': 1}
    assert Resources(accelerators='A100:0.5').accelerators == {'A100': 0.5}
    assert Resources(accelerators={'H100': 8}).accelerators == {'H100': 8}
    assert Resources(accelerators='80GB+').accelerators == {'80GB+': 1}
    assert Resources(accelerators='nvidia:80GB:2').accelerators == {
        'nvidia:80GB': 2
    }
    # Set / flow-set dict = unordered candidates; list = ordered.
    s = Resources(accelerators={'A100:1', 'V100:1'})
    assert s.accelerators == {'A100': 1, 'V100': 1}
    assert s.to_yaml_config() == {'accelerators': {'A100': 1, 'V100': 1}}
    assert s == Resources(accelerators={'A100:1': None, 'V100:1': None})
    lst = Resources(accelerators=['V100:1', 'A100:1'])
    assert lst.accelerators == [{'V100': 1}, {'A100': 1}]
    assert lst.to_yaml_config() == {'accelerators': ['V100:1', 'A100:1']}
    assert lst != Resources(accelerators=['A100:1', 'V100:1'])


@pytest.mark.parametrize('kwargs, match', [
    ({'accelerators': 'A100:x'}, 'not a number'),
    ({'accelerators': 'A100:0'}, 'positive'),
    ({'accelerators': 'a:b:c'}, '<name>:<cnt>'),
    ({'cpus': '8++'}, 'cpus'),
    ({'cpus': 0}, 'cpus'),
    ({'memory': 'lots'}, 'memory'),
    ({'disk_size': 0}, 'positive'),
    ({'disk_size': '10XB'}, 'disk_size'),
    ({'ports': 70000}, '1-65535'),
    ({'ports': '9000-8000'}, 'range'),
    ({'use_spot': 'yes'}, 'use_spot'),
    ({'disk_tier': 'fast'}, 'disk_tier'),
    ({'network_tier': 'fast'}, 'network_tier'),
    ({'priority': 5000}, 'priority'),
    ({'autostop': '10s'}, 'autostop'),
    ({'autostop': {'idle': 3}}, 'unknown key'),
    ({'autostop': {'wait_for': 'ssh'}}, 'wait_for'),
    ({'infra': 'aws', 'region': 'us-east-1'}, 'Cannot specify both'),
])
def test_bad_values(kwargs, match):
    infra = kwargs.pop('infra', None)
    with pytest.raises(ValueError, match=match):
        Resources(infra, **kwargs)


def test_unknown_keyword():
    with pytest.raises(TypeError, match='gpu_count'):
        Resources(gpu_count=2)  # pylint: disable=unexpected-keyword-arg


def test_equality_and_set():
    a = Resources(infra='aws', accelerators='A100:1')
    b = Resources(cloud='AWS', accelerators={'A100': 1})
    assert a == b and hash(a) == hash(b)
    assert Resources(cpus=8) == Resources(cpus='8')
    assert Resources(memory='32GB') == Resources(memory=32)
    assert Resources(ports=[8080, 8081]) == Resources(ports='8080-8081')
    assert Resources(labels={'a': '1', 'b': '2'}) == Resources(labels={
        'b': '2',
        'a': '1'
    })
    assert len({a, b, Resources(infra='gcp')}) == 2
    assert Resources(use_spot=True) != Resources()
    assert Resources(use_spot=False) == Resources()


def test_copy():
    r = Resources(infra='aws/us-east-1', accelerators='A100:4', cpus='8+')
    c = r.copy(accelerators='H100:8')
    assert c.to_yaml_config() == {
        'infra': 'aws/us-east-1',
        'accelerators': 'H100:8',
        'cpus': '8+'
    }
    assert r.accelerators == {'A100': 4}  # the original is unchanged
    # Changing a part of infra spells it out as cloud/region.
    c = r.copy(region='us-west-2')
    assert (c.cloud, c.region) == ('aws', 'us-west-2')
    assert c.to_yaml_config() == {
        'cloud': 'aws',
        'region': 'us-west-2',
        'accelerators': 'A100:4',
        'cpus': '8+'
    }
    c = Resources(cloud='aws', region='x').copy(infra='gcp')
    assert c.to_yaml_config() == {'infra': 'gcp'}
    assert r.copy(cpus=None).cpus is None
    with pytest.raises(TypeError, match='bogus'):
        r.copy(bogus=1)


def test_from_yaml_config():
    rs = Resources.from_yaml_config({'gpus': 'A100:1', 'cpus': None})
    assert rs == {Resources(accelerators='A100:1')}
    rs = Resources.from_yaml_config({
        'use_spot': True,
        'labels': {
            'a': '1'
        },
        'ordered': [{
            'infra': 'aws'
        }, {
            'infra': 'gcp',
            'labels': {
                'b': '2'
            }
        }],
    })
    assert isinstance(rs, list)
    assert rs == [
        Resources(infra='aws', use_spot=True, labels={'a': '1'}),
        Resources(infra='gcp', use_spot=True, labels={
            'a': '1',
            'b': '2'
        }),
    ]
    rs = Resources.from_yaml_config(
        {'any_of': [{
            'cpus': 2
        }, {
            'cpus': 4
        }, {
            'cpus': '2'
        }]})
    assert rs == {Resources(cpus=2), Resources(cpus=4)}
    with pytest.raises(ValueError, match='both "any_of" and "ordered"'):
        Resources.from_yaml_config({'any_of': [{}], 'ordered': [{}]})
    with pytest.raises(ValueError, match='both gpus and accelerators'):
        Resources.from_yaml_config({'gpus': 'A100', 'accelerators': 'A100'})
    with pytest.raises(ValueError, match="unknown field 'spot_recovery'"):
        Resources.from_yaml_config({'spot_recovery': 'FAILOVER'})


def test_repr():
    r = Resources(infra='aws/us-east-1',
                  instance_type='p3.2xlarge',
                  accelerators='V100:1',
                  cpus='8+',
                  use_spot=True)
    assert repr(r) == "AWS/us-east-1(p3.2xlarge, {'V100': 1}, cpus=8+, spot)"
    assert repr(Resources()) == 'Resources()'


def test_cloud_object_by_name():

    class AWS:

        def canonical_name(self):
            return 'aws'

    assert Resources(cloud=AWS()).to_yaml_config() == {'cloud': 'aws'}
    with pytest.raises(ValueError, match='cloud must be a cloud name'):
        Resources(cloud=3)


def test_gpus_spelling_is_kept_and_item_null_clears_base():
    (r,) = Resources.from_yaml_config({'gpus': 'H100:8', 'infra': 'gcp'})
    assert r.accelerators == {'H100': 8}
    assert r.to_yaml_config() == {'infra': 'gcp', 'gpus': 'H100:8'}
    assert r.copy(cpus=4).to_yaml_config() == {
        'infra': 'gcp',
        'gpus': 'H100:8',
        'cpus': 4
    }
    # An item's null replaces the base value (the corpus' gpt2 pipeline uses
    # `image_id: null` to run its lambda candidate without the docker image).
    rs = Resources.from_yaml_config({
        'image_id': 'docker:cuda',
        'any_of': [{
            'infra': 'lambda',
            'image_id': None
        }, {
            'infra': 'aws'
        }]
    })
    assert rs == {
        Resources(infra='lambda'),
        Resources(infra='aws', image_id='docker:cuda')
    }


def test_callers_later_edits_do_not_change_a_resources():
    labels = {'a': '1'}
    r = Resources(labels=labels)
    h = hash(r)
    labels['b'] = '2'
    assert r.labels == {'a': '1'} and hash(r) == h
