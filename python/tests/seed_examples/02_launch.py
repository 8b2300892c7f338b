# seed-example: python-sdk.md line 34 (sky.launch)
# seed-example: rewritten: infra: aws -> local; accelerators V100:4 dropped: the local infrastructure has no accelerators (a local node is this machine's CPUs)
import sky
task = sky.Task(run='echo hello SkyPilot')
task.set_resources(
    sky.Resources(infra='local'))
sky.launch(task, cluster_name='my-cluster')
