"""sky.volumes against a real SkyGo API server: apply, ls, delete of a
host-dir volume on the local infrastructure, and the server's refusals."""
import pytest

import sky
from sky import exceptions


def test_volumes_apply_ls_delete(sky_server, tmp_path):
    spec = tmp_path / 'vol.yaml'
    spec.write_text('name: sdkpy-vol\ntype: host-dir\ninfra: local\n')
    assert sky.get(sky.volumes.apply(str(spec))) is None
    # Applying again is a no-op, as the CLI says.
    assert sky.get(sky.volumes.apply({'name': 'sdkpy-vol', 'type': 'host-dir'})) is None
    recs = sky.get(sky.volumes.ls())
    [rec] = [r for r in recs if r['name'] == 'sdkpy-vol']
    assert rec['type'] == 'host-dir' and rec['cloud'] == 'local', rec
    assert rec['status'] == 'READY' and rec['usedby_clusters'] == [], rec
    assert rec['config']['host_path'].endswith(rec['name_on_cloud']), rec
    assert [r['name'] for r in sky.get(sky.volumes.ls(['sdkpy-vol'], refresh=True))] == ['sdkpy-vol']
    assert sky.get(sky.volumes.delete('sdkpy-vol')) == ['sdkpy-vol']
    assert not [r for r in sky.get(sky.volumes.ls()) if r['name'] == 'sdkpy-vol']
    with pytest.raises(exceptions.SkyPilotError, match='Volume sdkpy-vol not found.'):
        sky.get(sky.volumes.delete(['sdkpy-vol']))


def test_volumes_kubernetes_without_kubeconfig_refused(sky_server):
    # The test server has no kubeconfig: a PVC volume has nowhere to go.
    with pytest.raises(exceptions.SkyPilotError, match='no kubeconfig found'):
        sky.get(sky.volumes.apply({'name': 'sdkpy-pvc', 'type': 'k8s-pvc',
                                   'size': 10}))


def test_volumes_spec_checked_locally():
    with pytest.raises(ValueError, match='unknown volume spec key'):
        sky.volumes.apply({'name': 'x', 'type': 'host-dir', 'sizee': 1})
